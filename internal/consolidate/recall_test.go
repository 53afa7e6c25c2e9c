package consolidate_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
)

// TestRecallDateRange: a date-range recall finds an old memory behind more
// than a page of newer ones, and a recent range finds the new ones only.
func TestRecallDateRange(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		clock := memorytest.NewClock()
		st := b.Open(t, storetest.WithClock(clock.Now))
		f := newFixture(t, st, consolidate.WithClock(clock.Now))
		old := f.seed(memory.Node{Subkind: memory.Observation, Label: "The user adopted a cat named Miso."})
		oldDay := clock.Now().Format(time.DateOnly)
		clock.Advance(30 * 24 * time.Hour)
		newDay := clock.Now().Format(time.DateOnly)
		var newest memory.Node
		for i := range memory.DefaultChannelLimit + 5 { // more than one page of newer memories
			clock.Advance(time.Minute)
			newest = f.seed(memory.Node{Subkind: memory.Observation, Label: fmt.Sprintf("The user read book number %d.", i)})
		}
		f.say("When did I get my cat?", "")
		f.srv.Enqueue(
			call(consolidate.ToolRecall, map[string]any{"from": oldDay, "to": oldDay}),
			call(consolidate.ToolRecall, map[string]any{"from": newDay}),
			done())
		res := f.run()
		if res.Verdict != consolidate.VerdictDone {
			t.Fatalf("result %+v", res)
		}
		s := f.trailing(1)
		if !strings.Contains(s, "Recall from "+oldDay+" to "+oldDay+" found:\n"+short(t, res.Pass, old.ID)+" The user adopted a cat named Miso.") ||
			strings.Contains(s[strings.Index(s, "RESULT OF YOUR LAST CALL"):], "book number") {
			t.Errorf("old range:\n%s", s)
		}
		s = f.trailing(2)
		res2 := s[strings.Index(s, "RESULT OF YOUR LAST CALL"):]
		if !strings.Contains(res2, "Recall from "+newDay+" found:\n"+short(t, res.Pass, newest.ID)+" The user read book number") ||
			strings.Contains(res2, old.Label) || strings.Count(res2, "book number") != consolidate.Defaults().RecallHits {
			t.Errorf("new range (newest first, %d hits):\n%s", consolidate.Defaults().RecallHits, res2)
		}
	})
}
