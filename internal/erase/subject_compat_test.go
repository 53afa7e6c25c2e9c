package erase

import (
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// Subjects name the tenant: a message is attributed by its subject (or a
// dead letter by its original subject) as well as by its body.

func inSubject(s events.Subjects, t events.Type, ref memory.SessionRef) string {
	return s.In(t, ref.Tenant, ref.Project, ref.Session)
}

func outSubject(s events.Subjects, t events.Type, ref memory.SessionRef) string {
	return s.Out(t, ref.Tenant, ref.Project, ref.Session)
}

func subjectRefOf(ref memory.SessionRef) memory.SessionRef { return ref }
