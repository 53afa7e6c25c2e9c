package events_test

import (
	"testing"

	"github.com/engram-memory/engram/pkg/events"
)

// FuzzContextSubject: a context subject reads back to the ids it was built
// from, and parsing any subject never panics.
func FuzzContextSubject(f *testing.F) {
	for _, s := range [][3]string{{"", "acme/web", "chat 42"}, {"", "", ""}, {"t.1", "p.q", "*>"}, {"%", "%", "%41"}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, tenant, project, session string) {
		s := events.Subjects{}
		ref, err := s.ParseContextAPI(s.ContextAPI(tenant, project, session))
		if err != nil || ref.TenantID != tenant || ref.ProjectID != project || ref.SessionID != session {
			t.Fatalf("round trip of %q %q %q: %+v %v", tenant, project, session, ref, err)
		}
		_, _ = s.ParseContextAPI(project + "." + session)
		_, _ = s.ParseContextAPI("engram.api.context." + project + "." + session)
	})
}
