package events_test

import (
	"testing"

	"github.com/engram-memory/engram/pkg/events"
)

// FuzzContextSubject: a context subject reads back to the ids it was built
// from, and parsing any subject never panics.
func FuzzContextSubject(f *testing.F) {
	for _, s := range [][2]string{{"acme/web", "chat 42"}, {"", ""}, {"p.q", "*>"}, {"%", "%41"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, project, session string) {
		s := events.Subjects{}
		ref, err := s.ParseContextAPI(s.ContextAPI(project, session))
		if err != nil || ref.ProjectID != project || ref.SessionID != session {
			t.Fatalf("round trip of %q %q: %+v %v", project, session, ref, err)
		}
		_, _ = s.ParseContextAPI(project + "." + session)
		_, _ = s.ParseContextAPI("engram.api.context." + project + "." + session)
	})
}
