package eval

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"unicode"
)

// The reference BM25: Okapi with k1 1.5 and b 0.75, English stop words, no
// stemming, over label + body. It is the baseline every ranking is judged
// against, written here on its own (it shares no code with the stores'
// lexical channels) so that a change to the ranker cannot move it.
const (
	bm25K1 = 1.5
	bm25B  = 0.75
)

// stopWords is the English stop-word list of NLTK.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`i me my myself we our ours ourselves you your yours yourself yourselves he him
		his himself she her hers herself it its itself they them their theirs themselves what which who whom this
		that these those am is are was were be been being have has had having do does did doing a an the and but
		if or because as until while of at by for with about against between into through during before after
		above below to from up down in out on off over under again further then once here there when where why how
		all any both each few more most other some such no nor not only own same so than too very s t can will
		just don should now d ll m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma mightn mustn needn
		shan shouldn wasn weren won wouldn`) {
		m[w] = true
	}
	return m
}()

// bm25Tokens lower-cases text and splits it on anything that is not a
// letter or a digit, dropping stop words.
func bm25Tokens(text string) []string {
	fields := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	out := fields[:0]
	for _, f := range fields {
		if !stopWords[f] {
			out = append(out, f)
		}
	}
	return out
}

// bm25Index is one project's index.
type bm25Index struct {
	ids      []string
	tf       []map[string]int
	docLen   []int
	df       map[string]int
	totalLen int
}

func newBM25Index() *bm25Index { return &bm25Index{df: map[string]int{}} }

func (x *bm25Index) add(id, text string) {
	toks := bm25Tokens(text)
	tf := make(map[string]int, len(toks))
	for _, t := range toks {
		tf[t]++
	}
	for t := range tf {
		x.df[t]++
	}
	x.ids = append(x.ids, id)
	x.tf = append(x.tf, tf)
	x.docLen = append(x.docLen, len(toks))
	x.totalLen += len(toks)
}

// search returns the ids of the best limit documents, best first (ties by id).
func (x *bm25Index) search(query string, limit int) []string {
	n := len(x.ids)
	if n == 0 {
		return nil
	}
	avg := float64(x.totalLen) / float64(n)
	seen := map[string]bool{}
	var terms []string
	for _, t := range bm25Tokens(query) {
		if !seen[t] {
			seen[t] = true
			terms = append(terms, t)
		}
	}
	type scored struct {
		i int
		s float64
	}
	var out []scored
	for i, tf := range x.tf {
		s := 0.0
		for _, t := range terms {
			f := float64(tf[t])
			if f == 0 {
				continue
			}
			df := float64(x.df[t])
			idf := math.Log(1 + (float64(n)-df+0.5)/(df+0.5))
			s += idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*float64(x.docLen[i])/avg))
		}
		if s > 0 {
			out = append(out, scored{i, s})
		}
	}
	slices.SortFunc(out, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.s, a.s), strings.Compare(x.ids[a.i], x.ids[b.i]))
	})
	ids := make([]string, 0, min(limit, len(out)))
	for _, s := range out[:min(limit, len(out))] {
		ids = append(ids, x.ids[s.i])
	}
	return ids
}
