package consolidate_test

import (
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestConfirmSimilarNeedsAHold: confirm_similar answers a hold; set on a
// first call it does not skip the review, the call is held and told why,
// and only the repeat after that hold stores the fact.
func TestConfirmSimilarNeedsAHold(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	old := f.seed(memory.Node{Subkind: memory.Preference, Label: "The user prefers green tea in the morning."})
	f.say("I prefer green tea each morning.", "")
	confirm := call(consolidate.ToolRemember, map[string]any{"text": "The user prefers green tea each morning.", "kind": "preference", "confirm_similar": true})
	f.srv.Enqueue(confirm, confirm, done())
	res := f.run()
	if o := res.Outcome; o.Held != 1 || o.Stored != 1 {
		t.Fatalf("outcome %+v", o)
	}
	s := f.trailing(1)
	for _, want := range []string{"held for review: close to [" + old.ID + "]", "confirm_similar applies only to a fact held earlier in this pass",
		"confirm_similar applies only to a fact held for review earlier in this pass; this one had not been held."} {
		if !strings.Contains(s, want) {
			t.Errorf("first call: no %q:\n%s", want, s)
		}
	}
	if s := f.trailing(2); !strings.Contains(s, "stored [") {
		t.Errorf("the confirmed repeat was not stored:\n%s", s)
	}
	if texts := f.liveTexts(); len(texts) != 2 || texts["The user prefers green tea each morning."] == "" {
		t.Fatalf("live %v", texts)
	}
}
