package erase

import (
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// addressRef is the tenant, project and session a parsed subject names
// (an input subject of the form before tenants names the default tenant).
func addressRef(a events.Address) (memory.SessionRef, bool) {
	return memory.SessionRef{Tenant: a.TenantID, Project: a.ProjectID, Session: a.SessionID}, true
}
