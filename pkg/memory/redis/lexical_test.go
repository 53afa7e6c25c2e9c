package redis_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestBudgetedLexical: when a common term's posting list is read only in
// part, the leading candidates still get their exact BM25 scores (the
// contributions of the unread postings are looked up), and when none of
// the leading candidates passes the filter the rest are judged too. The
// exact answer is the same store read with a budget that reads every list
// whole.
func TestBudgetedLexical(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	node := func(id, label, body string, sk memory.Subkind) memory.Node {
		// The id in the body keeps contents distinct (one more term each).
		return memory.Node{ID: id, Subkind: sk, Scope: memory.ScopeProject, ProjectID: "p",
			Label: label, Body: body + " u" + id, Confidence: 0.9}
	}
	long := strings.Repeat("filler words that make the document long ", 6)
	var nodes []memory.Node
	// Short documents that say "alpha" three times: the best postings of
	// alpha, which the budget reads. The five highest ids are observations.
	for i := range 150 {
		sk := memory.Decision
		if i >= 145 {
			sk = memory.Observation
		}
		nodes = append(nodes, node(fmt.Sprintf("a%03d", i), "alpha alpha alpha", "", sk))
	}
	// Long documents with "beta" (rare, so they lead) and one "alpha", whose
	// alpha postings have the least impact: none of them is read.
	for i := range 12 {
		nodes = append(nodes, node(fmt.Sprintf("b%03d", i), strings.Repeat("beta ", 1+i%3)+"alpha", long, memory.Decision))
	}
	// Documents without either term, so that alpha is held by fewer than a
	// quarter of them: not a common term, which is not scored at all once
	// beta matched enough documents (see commonShare).
	for i := range 500 {
		nodes = append(nodes, node(fmt.Sprintf("g%03d", i), "gamma", "", memory.Decision))
	}
	if err := s.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
	terms := []string{"alpha", "beta"}
	for _, tc := range []struct {
		name   string
		filter memory.Filter
		prefix string // every result's id starts so
	}{
		{"leaders completed", memory.Filter{ProjectID: "p"}, "b"},
		{"leaders filtered out", memory.Filter{ProjectID: "p", Subkinds: []memory.Subkind{memory.Observation}}, "a14"},
	} {
		redis.SetLexicalBudget(s, 1_000_000, 1_000_000)
		exact, err := s.Lexical(ctx, terms, tc.filter, 5)
		if err != nil {
			t.Fatal(err)
		}
		// beta (12 postings) is read whole, alpha (162) only its best few.
		redis.SetLexicalBudget(s, 40, 10)
		if planned, err := redis.PlannedReads(ctx, s, tc.filter, terms, 5); err != nil || planned >= 12+162 {
			t.Fatalf("%s: the budget plans %d of the 174 postings (%v): nothing is truncated", tc.name, planned, err)
		}
		got, err := s.Lexical(ctx, terms, tc.filter, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(exact) != 5 || !slices.Equal(got, exact) {
			t.Fatalf("%s: budgeted read\n %v\nexact\n %v", tc.name, got, exact)
		}
		for _, sc := range got {
			if !strings.HasPrefix(sc.ID, tc.prefix) {
				t.Fatalf("%s: result %v, want ids starting %q", tc.name, got, tc.prefix)
			}
		}
	}
	// Without the looked-up contributions a beta document scores only its
	// beta term: the exact scores must be higher than that.
	redis.SetLexicalBudget(s, 1_000_000, 1_000_000)
	betaOnly, err := s.Lexical(ctx, []string{"beta"}, memory.Filter{ProjectID: "p"}, 5)
	if err != nil {
		t.Fatal(err)
	}
	both, _ := s.Lexical(ctx, terms, memory.Filter{ProjectID: "p"}, 5)
	for i := range betaOnly {
		if both[i].ID == betaOnly[i].ID && both[i].Score <= betaOnly[i].Score {
			t.Fatalf("%s scores %v with alpha and beta, %v with beta alone: alpha adds nothing, the test proves nothing",
				both[i].ID, both[i].Score, betaOnly[i].Score)
		}
	}
}

// TestBudgetedLexicalSumsPrefixTF: the term frequencies of a query term's
// prefix expansions are summed per document before BM25's saturation (as
// the SQLite store scores a prefix term), also for the leaders whose
// postings of truncated lists are looked up after the budgeted read. The
// "beta" documents hold both expansions of "alph": "alphas" (12
// documents, read only in part under the budget) and "alpha" (162
// documents, whose best postings, the short "alpha" documents', are all
// the budget reads). Their scores must be BM25 of the summed frequencies,
// with the group's documents counted once for the idf, and the same as an
// unbudgeted read's.
func TestBudgetedLexicalSumsPrefixTF(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	long := strings.Repeat("filler words that make the document long ", 6)
	type doc struct{ label, body string }
	docs := map[string]doc{}
	for i := range 150 {
		docs[fmt.Sprintf("a%03d", i)] = doc{"alpha alpha alpha", ""}
		docs[fmt.Sprintf("g%03d", i)] = doc{"gamma", ""}
	}
	for i := range 12 {
		docs[fmt.Sprintf("b%03d", i)] = doc{strings.Repeat("beta ", 1+i%3) + "alphas alpha", long}
	}
	var nodes []memory.Node
	length := map[string]float64{} // tokens, the label counted twice
	total := 0.0
	for id, d := range docs {
		body := d.body + " u" + id // one more term each keeps contents distinct
		nodes = append(nodes, memory.Node{ID: id, Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: "p",
			Label: d.label, Body: body, Confidence: 0.9})
		length[id] = float64(2*len(strings.Fields(d.label)) + len(strings.Fields(body)))
		total += length[id]
	}
	if err := s.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
	n := float64(len(docs))
	avgdl := total / n
	w := func(df float64) float64 { return math.Log(1+(n-df+0.5)/(df+0.5)) * 2.2 }
	sat := func(tf, dl float64) float64 { return tf / (tf + 1.2*(0.25+0.75*dl/avgdl)) }
	want := func(id string) float64 {
		i := 0
		fmt.Sscanf(id, "b%03d", &i)
		dl := length[id]
		// beta: 12 documents; alph: 162 (alpha's 162 include alphas' 12)
		return w(12)*sat(float64(2*(1+i%3)), dl) + w(162)*sat(2+2, dl)
	}

	terms := []string{"alph", "beta"}
	// alph is held by half the documents, a common term; with limit 7 beta's
	// 12 documents are fewer than 2 x limit, so alph is scored (see
	// commonShare).
	const limit = 7
	f := memory.Filter{ProjectID: "p"}
	redis.SetLexicalBudget(s, 1_000_000, 1_000_000)
	exact, err := s.Lexical(ctx, terms, f, limit)
	if err != nil {
		t.Fatal(err)
	}
	redis.SetLexicalBudget(s, 40, 10)
	planned, err := redis.PlannedReads(ctx, s, f, terms, limit)
	if err != nil {
		t.Fatal(err)
	}
	if all := int64(12 + 162 + 12); planned >= all {
		t.Fatalf("the budget plans %d of the %d postings: nothing is truncated, the test proves nothing", planned, all)
	}
	got, err := s.Lexical(ctx, terms, f, limit)
	if err != nil {
		t.Fatal(err)
	}
	for name, res := range map[string][]memory.Scored{"exact": exact, "budgeted": got} {
		if len(res) != limit {
			t.Fatalf("%s: %d results, want %d: %v", name, len(res), limit, res)
		}
		for _, sc := range res {
			if !strings.HasPrefix(sc.ID, "b") {
				t.Fatalf("%s: result %v, want only beta documents", name, res)
			}
			if v := want(sc.ID); math.Abs(sc.Score-v) > 1e-9*v {
				t.Fatalf("%s: %s scores %v, want %v (BM25 of the summed tf of alphas and alpha)", name, sc.ID, sc.Score, v)
			}
		}
	}
	if !slices.Equal(got, exact) {
		t.Fatalf("budgeted read\n %v\nexact\n %v", got, exact)
	}
}

// TestLexicalCommonTermsWhenFiltered: a common query term left out because
// the rarer ones matched enough documents is scored after all when the
// filter rejects those documents (the SQLite store answers with none
// there): here every beta document is a decision and the filter asks for
// observations, which only alpha matches.
func TestLexicalCommonTermsWhenFiltered(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	var nodes []memory.Node
	add := func(id string, sk memory.Subkind, label string) {
		nodes = append(nodes, memory.Node{ID: id, Subkind: sk, Scope: memory.ScopeProject, ProjectID: "p",
			Label: label, Confidence: 0.9})
	}
	for i := range 12 {
		add(fmt.Sprintf("b%02d", i), memory.Decision, fmt.Sprintf("beta alpha x%d", i))
	}
	for i := range 20 {
		add(fmt.Sprintf("a%02d", i), memory.Observation, fmt.Sprintf("alpha y%d", i))
		add(fmt.Sprintf("g%02d", i), memory.Observation, fmt.Sprintf("gamma z%d", i))
	}
	if err := s.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
	terms := []string{"beta", "alpha"}
	all, err := s.Lexical(ctx, terms, memory.Filter{ProjectID: "p"}, 5)
	if err != nil {
		t.Fatal(err)
	}
	beta, err := s.Lexical(ctx, []string{"beta"}, memory.Filter{ProjectID: "p"}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(all, beta) {
		t.Fatalf("alpha is common and beta matched 12 >= 2 x 5 documents: alpha must not be scored\n %v\nbeta alone\n %v", all, beta)
	}
	obs, err := s.Lexical(ctx, terms, memory.Filter{ProjectID: "p", Subkinds: []memory.Subkind{memory.Observation}}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs) != 5 {
		t.Fatalf("observations: %v, want 5 alpha documents", obs)
	}
	for _, sc := range obs {
		if !strings.HasPrefix(sc.ID, "a") || !(sc.Score > 0) {
			t.Fatalf("observations: %v, want alpha documents", obs)
		}
	}
}
