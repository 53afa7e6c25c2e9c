package sqlite

import (
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/engram-memory/engram/pkg/memory"
)

// BM25 parameters (the usual defaults).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
	// prefixMin is the shortest query term matched as a prefix; shorter
	// terms match whole tokens only (a 2-letter prefix matches most of the
	// vocabulary).
	prefixMin = 3
	// prefixMax is how many longer tokens a prefix term expands to at most
	// (in dictionary order), besides the exact token.
	prefixMax = 32
)

// tokens splits text like memory.Terms does (on anything not a letter or a
// digit, lower-cased, 1-character tokens dropped) but keeps repeats.
func tokens(text string, into map[string]int) {
	start := -1
	for i, r := range text {
		word := unicode.IsLetter(r) || unicode.IsDigit(r)
		if word && start < 0 {
			start = i
		}
		if !word && start >= 0 {
			addToken(text[start:i], into)
			start = -1
		}
	}
	if start >= 0 {
		addToken(text[start:], into)
	}
}

func addToken(t string, into map[string]int) {
	if utf8.RuneCountInString(t) < 2 {
		return
	}
	into[strings.ToLower(t)]++
}

// docText is what the lexical channel indexes of a node.
func docText(n *memory.Node) string {
	var sb strings.Builder
	sb.WriteString(n.Label)
	sb.WriteByte('\n')
	sb.WriteString(n.Body)
	for _, p := range n.Paths {
		sb.WriteByte('\n')
		sb.WriteString(p)
	}
	for _, e := range n.Entities {
		sb.WriteByte('\n')
		sb.WriteString(e.Name)
	}
	return sb.String()
}

type posting struct {
	rid uint32
	gen uint32 // the document generation it was written for; stale entries are skipped
	tf  uint16
}

type term struct {
	postings []posting
	df       int // live documents holding the term
}

// lexIndex is an in-memory BM25 index over node rids. Postings are appended;
// a re-indexed or removed document bumps its generation so that its old
// entries are skipped, and lists are compacted when dead entries pile up.
type lexIndex struct {
	terms    map[string]*term
	dict     []string   // sorted terms, for prefix expansion
	docTerms [][]string // per rid: the distinct terms of the live document
	docLen   []uint32   // per rid: tokens
	gen      []uint32   // per rid
	nDocs    int
	totalLen int64
	dead     int // stale postings
	live     int // live postings
}

func newLexIndex() *lexIndex { return &lexIndex{terms: map[string]*term{}} }

func (x *lexIndex) grow(rid uint32) {
	for int(rid) >= len(x.docLen) {
		x.docLen = append(x.docLen, 0)
		x.gen = append(x.gen, 0)
		x.docTerms = append(x.docTerms, nil)
	}
}

// remove drops a document (its postings become dead).
func (x *lexIndex) remove(rid uint32) {
	if int(rid) >= len(x.docLen) || x.docTerms[rid] == nil {
		return
	}
	for _, t := range x.docTerms[rid] {
		x.terms[t].df--
	}
	x.dead += len(x.docTerms[rid])
	x.live -= len(x.docTerms[rid])
	x.nDocs--
	x.totalLen -= int64(x.docLen[rid])
	x.docTerms[rid] = nil
	x.docLen[rid] = 0
	x.gen[rid]++
}

// set (re)indexes a document.
func (x *lexIndex) set(rid uint32, text string) {
	x.grow(rid)
	x.remove(rid)
	counts := map[string]int{}
	tokens(text, counts)
	if len(counts) == 0 {
		x.docTerms[rid] = []string{}
		x.nDocs++
		return
	}
	names := make([]string, 0, len(counts))
	var length uint32
	for t, c := range counts {
		tm := x.terms[t]
		if tm == nil {
			tm = &term{}
			x.terms[t] = tm
			i, _ := slices.BinarySearch(x.dict, t)
			x.dict = slices.Insert(x.dict, i, t)
		}
		tm.postings = append(tm.postings, posting{rid: rid, gen: x.gen[rid], tf: uint16(min(c, math.MaxUint16))})
		tm.df++
		names = append(names, t)
		length += uint32(c)
	}
	x.docTerms[rid] = names
	x.docLen[rid] = length
	x.nDocs++
	x.totalLen += int64(length)
	x.live += len(names)
	if x.dead > 1024 && x.dead > x.live/2 {
		x.compact()
	}
}

func (x *lexIndex) compact() {
	for t, tm := range x.terms {
		kept := tm.postings[:0]
		for _, p := range tm.postings {
			if x.gen[p.rid] == p.gen && x.docTerms[p.rid] != nil {
				kept = append(kept, p)
			}
		}
		if len(kept) == 0 {
			delete(x.terms, t)
			if i, ok := slices.BinarySearch(x.dict, t); ok {
				x.dict = slices.Delete(x.dict, i, i+1)
			}
			continue
		}
		tm.postings = slices.Clip(kept)
	}
	x.dead = 0
}

// expand returns the dictionary terms a query term matches: itself and, for
// terms of at least prefixMin runes, up to prefixMax longer terms it
// prefixes.
func (x *lexIndex) expand(q string) []*term {
	var out []*term
	if tm := x.terms[q]; tm != nil {
		out = append(out, tm)
	}
	if utf8.RuneCountInString(q) < prefixMin {
		return out
	}
	i, found := slices.BinarySearch(x.dict, q)
	if found {
		i++
	}
	for n := 0; i < len(x.dict) && n < prefixMax && strings.HasPrefix(x.dict[i], q); i, n = i+1, n+1 {
		out = append(out, x.terms[x.dict[i]])
	}
	return out
}

// scratch holds per-query accumulators, reused between queries.
type scratch struct {
	tf      []float32
	score   []float32
	touchT  []uint32
	touched []uint32
}

// search scores every document matching any query term (BM25, a prefix term
// counting as one term whose frequency sums its expansions) and calls
// visit for each with its score, in no particular order.
func (x *lexIndex) search(terms []string, sc *scratch, visit func(rid uint32, score float64)) {
	if x.nDocs == 0 {
		return
	}
	n := len(x.docLen)
	if len(sc.tf) < n {
		sc.tf = make([]float32, n+n/4)
		sc.score = make([]float32, n+n/4)
	}
	avg := float64(x.totalLen) / float64(x.nDocs)
	if avg == 0 {
		avg = 1
	}
	N := float64(x.nDocs)
	sc.touched = sc.touched[:0]
	for _, q := range terms {
		sc.touchT = sc.touchT[:0]
		for _, tm := range x.expand(q) {
			for _, p := range tm.postings {
				if x.gen[p.rid] != p.gen || x.docTerms[p.rid] == nil {
					continue
				}
				if sc.tf[p.rid] == 0 {
					sc.touchT = append(sc.touchT, p.rid)
				}
				sc.tf[p.rid] += float32(p.tf)
			}
		}
		df := float64(len(sc.touchT))
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (N-df+0.5)/(df+0.5))
		for _, rid := range sc.touchT {
			f := float64(sc.tf[rid])
			sc.tf[rid] = 0
			norm := bm25K1 * (1 - bm25B + bm25B*float64(x.docLen[rid])/avg)
			if sc.score[rid] == 0 {
				sc.touched = append(sc.touched, rid)
			}
			sc.score[rid] += float32(idf * f * (bm25K1 + 1) / (f + norm))
		}
	}
	for _, rid := range sc.touched {
		visit(rid, float64(sc.score[rid]))
		sc.score[rid] = 0
	}
}
