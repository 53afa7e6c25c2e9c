package erase

import (
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// The subjects of this version name no tenant: the test's model lets
// only bodies attribute an event (subjectRefOf holds nothing).

func inSubject(s events.Subjects, t events.Type, ref memory.SessionRef) string {
	return s.In(t, ref.Project, ref.Session)
}

func outSubject(s events.Subjects, t events.Type, ref memory.SessionRef) string {
	return s.Out(t, ref.Project, ref.Session)
}

func subjectRefOf(memory.SessionRef) memory.SessionRef {
	return memory.SessionRef{Tenant: "\x00 a subject names no tenant"}
}
