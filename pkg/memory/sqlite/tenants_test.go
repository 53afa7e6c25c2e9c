package sqlite_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
)

// A search weighs with its tenant's statistics: a tenant's scores are the
// same in a store holding other tenants' memories as in one holding its own
// only, through writes, edits and erasures of either. Before stop 47 the
// statistics were the store's: a tenant could read from a memory's
// lexical score (the memory tool's recall explains it) how many memories
// of the other tenants hold a word. Prefix expansions likewise: another
// tenant's vocabulary does not take the places of this one's.
func TestSearchWeighsWithItsTenantsStatistics(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	shared := open(t, filepath.Join(dir, "shared.db"))
	alone := open(t, filepath.Join(dir, "alone.db"))      // "bravo" only
	defaults := open(t, filepath.Join(dir, "default.db")) // the default tenant's only
	t.Cleanup(func() { shared.Close(); alone.Close(); defaults.Close() })

	rng := rand.New(rand.NewPCG(47, 1))
	vocab := strings.Fields("deploy deployment staging cluster release docker cache redis queue worker retry timeout lease vector postgres index shard replica")
	words := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = vocab[rng.IntN(len(vocab))]
		}
		return strings.Join(w, " ")
	}
	node := func(tenant, id, label string) memory.Node {
		return memory.Node{ID: id, TenantID: tenant, ProjectID: "web", Subkind: memory.Decision, Scope: memory.ScopeProject,
			Label: label, Confidence: 0.9, Reach: memory.ReachHere}
	}
	put := func(s interface {
		PutBatch(context.Context, []memory.Node, []memory.Edge) error
	}, nodes ...memory.Node) {
		t.Helper()
		if err := s.PutBatch(ctx, nodes, nil); err != nil {
			t.Fatal(err)
		}
	}
	var bravo, dflt, alpha []memory.Node
	for i := range 40 {
		n := node("bravo", fmt.Sprintf("b%d", i), words(3+rng.IntN(5))+fmt.Sprintf(" b%d", i))
		if i < 5 {
			n.Scope, n.SessionID = memory.ScopeSession, "s1"
		}
		bravo = append(bravo, n)
		dflt = append(dflt, node("", fmt.Sprintf("d%d", i), words(3+rng.IntN(5))+fmt.Sprintf(" d%d", i)))
	}
	for i := range 300 {
		// Another tenant dense with the query words, and with 40 words
		// sorting before "deployment" under the prefix "deploy".
		label := "redis queue deploy " + words(2) + fmt.Sprintf(" a%d", i)
		if i < 40 {
			label += fmt.Sprintf(" deployaa%02d", i)
		}
		alpha = append(alpha, node("alpha", fmt.Sprintf("a%d", i), label))
	}
	put(shared, bravo...)
	put(shared, dflt...)
	put(shared, alpha...)
	put(alone, bravo...)
	put(defaults, dflt...)

	type searcher interface {
		Lexical(context.Context, []string, memory.Filter, int) ([]memory.Scored, error)
	}
	compare := func(when string) {
		t.Helper()
		found := 0 // comparisons with hits
		defer func() {
			if found < 8 {
				t.Errorf("%s: %d comparisons found anything: the test shows little", when, found)
			}
		}()
		for _, q := range []string{"redis queue", "deploy", "deployment timeout", "staging cluster redis", "retry lease worker queue", "zebra team"} {
			for _, c := range []struct {
				tenant string
				ref    searcher
			}{{"bravo", alone}, {"", defaults}} {
				f := memory.Filter{TenantID: c.tenant, ProjectID: "web"}
				got, err := shared.Lexical(ctx, strings.Fields(q), f, 20)
				if err != nil {
					t.Fatal(err)
				}
				want, err := c.ref.Lexical(ctx, strings.Fields(q), f, 20)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) > 0 {
					found++
				}
				same := len(got) == len(want)
				for i := 0; same && i < len(got); i++ {
					same = got[i].ID == want[i].ID && math.Abs(got[i].Score-want[i].Score) < 1e-9
				}
				if !same {
					t.Errorf("%s, tenant %q, query %q: beside other tenants %v, alone %v", when, c.tenant, q, got, want)
				}
			}
		}
	}
	compare("after the writes")

	// Bravo grown past a quarter of the store: its searches read the whole
	// lists (searchVisible no more), pruned.
	// "team" is common among bravo's (the common words' rule), "zebra"
	// rare there and not among alpha's: the rule counts what the rarer
	// words found of the tenant's documents only (here the search's
	// fallback, every term scored when the filter rejected too many, gives
	// the same answer either way).
	var more, zebras []memory.Node
	for i := range 260 {
		label := words(3+rng.IntN(6)) + fmt.Sprintf(" team bm%d", i)
		if i < 5 {
			label += " zebra"
		}
		more = append(more, node("bravo", fmt.Sprintf("bm%d", i), label))
	}
	for i := range 60 {
		zebras = append(zebras, node("alpha", fmt.Sprintf("az%d", i), "zebra "+words(3)+fmt.Sprintf(" az%d", i)))
	}
	put(shared, more...)
	put(shared, zebras...)
	put(alone, more...)
	bravo = append(bravo, more...)
	compare("bravo grown")

	// Edits of every tenant (text changes re-index a document).
	for i := range 60 {
		label := words(4) + fmt.Sprintf(" e%d", i)
		switch i % 3 {
		case 0:
			n := bravo[rng.IntN(len(bravo))]
			n.Label = label
			put(shared, n)
			put(alone, n)
		case 1:
			n := dflt[rng.IntN(len(dflt))]
			n.Label = label
			put(shared, n)
			put(defaults, n)
		default:
			n := alpha[rng.IntN(len(alpha))]
			n.Label = "deploy redis " + label
			put(shared, n)
		}
	}
	compare("after the edits")

	// A session of bravo's erased (its memories go), and all of alpha's.
	for _, s := range []interface {
		Erase(context.Context, memory.EraseScope, memory.Seen) (memory.Erased, error)
	}{shared, alone} {
		if _, err := s.Erase(ctx, memory.EraseScope{Tenant: "bravo", Project: "web", Session: "s1"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := shared.Erase(ctx, memory.EraseScope{Tenant: "alpha"}, nil); err != nil {
		t.Fatal(err)
	}
	compare("after the erasures")

	// New writes take the erased rows' rids (another tenant's now), and
	// the index is built again from the file at open.
	var gamma, more2 []memory.Node
	for i := range 80 {
		gamma = append(gamma, node("gamma", fmt.Sprintf("g%d", i), "redis queue deploy zebra team "+words(3)+fmt.Sprintf(" g%d", i)))
	}
	for i := range 30 {
		more2 = append(more2, node("bravo", fmt.Sprintf("bn%d", i), words(4)+fmt.Sprintf(" bn%d", i)))
	}
	put(shared, gamma...)
	put(shared, more2...)
	put(alone, more2...)
	compare("after rows reused")
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}
	shared = open(t, filepath.Join(dir, "shared.db"))
	if err := shared.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	compare("after a reopen")
}
