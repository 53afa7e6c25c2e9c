package extract_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/demo"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// The probe of 2026-12-06 (engram serve, a scripted model that answers as
// a schema-bound model does: at most 5 memories a reply, the schema's
// maxItems): 20 turns, each stating one rule of its own, published while
// the model was down (or in a burst faster than extraction) were extracted
// in spans of 8 turns, and 14 of the 20 rules were stored: a span's reply
// holds at most 5 memories, so the 6th to 8th rule of a span are never
// extracted, with no log line, no letter and nothing in the journal. A
// model outage (or a burst) delays work; it must not drop what the user
// said. Here: 8 turns of one rule each, queued during an outage. Fixed: a
// full reply to a span of several turns is not applied and the span is
// asked again in halves (see doc.go, Spans).
func TestProbeBacklogKeepsEveryStatedRule(t *testing.T) {
	f := newFixture(t, func(t testing.TB) memory.Store { return storetest.OpenSQLite(t) })
	rules := []string{
		"Always use tabs for indentation in Go files",
		"Never deploy on Fridays",
		"Always write changelog entries in English",
		"Never store passwords in YAML",
		"Always pin Docker base images by digest",
		"Never use the ORM for reporting queries",
		"Always run the linter before pushing",
		"Never force-push shared branches",
	}
	f.srv.Down()
	var turns []string
	for i, r := range rules {
		id := fmt.Sprintf("t%d", i+1)
		turns = append(turns, id)
		if _, err := f.x.HandleTurn(f.ctx, userTurn(id, r+".")); !errors.Is(err, llm.ErrUnavailable) {
			t.Fatalf("%s during the outage: %v, want llm.ErrUnavailable", id, err)
		}
	}
	f.srv.Up()
	demo.Install(f.srv)
	for i, id := range turns {
		if _, err := f.x.HandleTurn(f.ctx, userTurn(id, rules[i]+".")); err != nil {
			t.Fatalf("%s after the outage: %v", id, err)
		}
	}
	var missing []string
	for _, r := range rules {
		if _, ok := f.find(r + "."); !ok {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d rules the user stated were never extracted (%d model calls): %s", len(missing), len(rules), f.extractCalls(),
			strings.Join(missing, "; "))
	}
}

// A backlog of 20 turns that each state a rule: every rule is stored, and
// after the first full reply the spans shrink to what one reply carries
// instead of being asked whole and halved again for every span (8 turns
// -> a full reply, not applied -> 4 turns, 4 rules -> spans of 4: 6 calls).
func TestDenseBacklogSpansShrinkToOneReply(t *testing.T) {
	f := newFixture(t, func(t testing.TB) memory.Store { return storetest.OpenSQLite(t) })
	f.srv.Down()
	rules := []string{
		"Always use tabs for indentation in Go files", "Never deploy on Fridays", "Always write changelog entries in English",
		"Never store passwords in YAML", "Always pin Docker base images by digest", "Never use the ORM for reporting queries",
		"Always run the linter before pushing", "Never force-push shared branches", "Always squash fixup commits before review",
		"Never log request bodies in production", "Always name migrations with a timestamp prefix", "Never vendor the protobuf stubs",
		"Always quote shell variables in scripts", "Never call the payment sandbox from unit tests", "Always keep README examples runnable",
		"Never bump the minimum Python version in a patch release", "Always document feature flags in the wiki",
		"Never mock the clock with sleeps", "Always return wrapped errors from repositories", "Never commit generated CSS bundles",
	}
	n := len(rules)
	rule := func(i int) string { return rules[i] }
	for i := range n {
		if _, err := f.x.HandleTurn(f.ctx, userTurn(fmt.Sprintf("t%02d", i), rule(i)+".")); !errors.Is(err, llm.ErrUnavailable) {
			t.Fatalf("turn %d during the outage: %v, want llm.ErrUnavailable", i, err)
		}
	}
	f.srv.Up()
	demo.Install(f.srv)
	if _, err := f.x.HandleTurn(f.ctx, userTurn(fmt.Sprintf("t%02d", n-1), rule(n-1)+".")); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if n, ok := f.find(rule(i) + "."); !ok || n.AssertedBy != memory.AssertedUser {
			t.Errorf("rule %d: stored %v, %+v", i, ok, n)
		}
	}
	// One call per turn would be 20.
	calls := f.extractCalls()
	t.Logf("%d extraction calls for %d turns", calls, n)
	if calls > 6 {
		t.Errorf("%d extraction calls for %d turns of one rule each, want at most 6", calls, n)
	}
}
