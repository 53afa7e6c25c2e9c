package extract_test

import (
	"fmt"
	"testing"

	"github.com/engram-memory/engram/internal/demo"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// The probe of 2026-12-06 (engram serve, engram publish of a session's
// turns in order, each acknowledged by JetStream before the next): the
// stored transcript held 37 of 1,000 turns out of order (t4 before t3, t15
// before t14, ... 2 of 20 in a burst of 20), because the transcript and
// extractor consumers each handle two turns at once and a turn is
// appended when its handler runs, not in the order it was published. The
// context API then gives the platform its conversation reordered, a
// summary's active task is an older turn, and a pass reads "never mind,
// don't" before the rule it takes back. A race: 400 turns here showed
// 1 to 9 inversions in each of 3 runs (about 4 s). Fixed in the runner
// (internal/runner: a session's events are handed out one at a time, in
// stream order): with the runner before that change this test fails (9 of
// 400 inverted), after it 0 in -count=5.
func TestProbeTranscriptKeepsTheOrderOfTurns(t *testing.T) {
	l := newLoop(t, func(t testing.TB) memory.Store { return storetest.OpenSQLite(t) })
	demo.Install(l.srv)
	const n = 400
	for i := 0; i < n; i++ {
		l.turnEnded(fmt.Sprintf("t%03d", i), fmt.Sprintf("Step %d of the refactoring is done.", i))
	}
	var msgs []memory.Message
	waitFor(t, "every turn's messages", func() bool {
		var err error
		msgs, err = l.st.Messages(l.ctx, ref(), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(msgs) == 2*n
	})
	var order []string
	for _, m := range msgs {
		if m.Role == memory.RoleUser {
			order = append(order, m.TurnID)
		}
	}
	inverted := 0
	for i := 1; i < len(order); i++ {
		if order[i] < order[i-1] {
			inverted++
			if inverted <= 5 {
				t.Errorf("turn %s is stored after %s", order[i], order[i-1])
			}
		}
	}
	if inverted > 0 {
		t.Errorf("%d of %d turns stored out of the order they were published", inverted, n)
	}
}
