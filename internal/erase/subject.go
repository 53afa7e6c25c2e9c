package erase

import (
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// addressRef is the tenant, project and session a parsed subject names;
// ok false when the subject does not name a tenant (its body decides).
func addressRef(a events.Address) (memory.SessionRef, bool) {
	return memory.SessionRef{}, false
}
