package redis

import (
	"math"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
)

// TestWeighSumsScopes: the BM25 statistics of one query are those of every
// scope it reads, a scope without a match too. A word held by the one
// document of a reach-anywhere scope, beside a project of 999 documents
// that lack it, has the idf of a word in 1 document of 1,000 (not of a
// word every document holds), and its own list weighs ExactWeight more.
func TestWeighSumsScopes(t *testing.T) {
	word := &postingList{key: "engram:{p2}:t:zebra", df: 1, group: "3", gi: 0}
	family := &postingList{key: "engram:{p2}:t:zebras", df: 1, exp: true, group: "3", gi: 0}
	stop := &postingList{key: "engram:{p2}:t:what", df: 1, group: "4", gi: 1}
	project := &lexRead{n: 999, total: 999 * 10}
	anywhere := &lexRead{n: 1, total: 10, lists: []*postingList{word, family, stop}}
	weigh([]*lexRead{project, anywhere}, memory.LexTerms([]string{"zebra", "what"}))
	idf := func(df float64) float64 { return math.Log(1 + (1000-df+0.5)/(df+0.5)) }
	if want := (idf(2) + memory.ExactWeight*idf(1)) * (bm25K1 + 1); math.Abs(word.w-want) > 1e-9 {
		t.Errorf("the word's weight = %v, want %v (group idf of df 2 of 1,000, plus its own)", word.w, want)
	}
	if want := idf(2) * (bm25K1 + 1); math.Abs(family.w-want) > 1e-9 {
		t.Errorf("the expansion's weight = %v, want %v", family.w, want)
	}
	if want := memory.StopWordWeight * (1 + memory.ExactWeight) * idf(1) * (bm25K1 + 1); math.Abs(stop.w-want) > 1e-9 {
		t.Errorf("the stop word's weight = %v, want %v (its term's weight times its idf)", stop.w, want)
	}
	if want := bm25K1 * bm25B / 10; math.Abs(anywhere.c2-want) > 1e-12 || project.c2 != anywhere.c2 {
		t.Errorf("length normalisation %v and %v, want %v (the average length of both scopes)", project.c2, anywhere.c2, want)
	}
	// The dictionary step of a scope with documents but no match.
	r, err := parseLexDict(scopeTag{}, keys{}, []string{"999", "9990"}, nil)
	if err != nil || r == nil || r.n != 999 || r.total != 9990 || len(r.lists) != 0 {
		t.Errorf("a scope without a match: %+v, %v; want its statistics", r, err)
	}
	if word.term() != "zebra" {
		t.Errorf("term of %q = %q", word.key, word.term())
	}
}
