package redis

import (
	"math"
	"slices"
	"strconv"

	"github.com/engram-memory/engram/pkg/memory"
)

// Scoring the read postings as the SQLite store scores its index (see its
// lexIndex.search; TestLexicalParityDev compares the two on the
// development sets). A query term (memory.LexTerm) is up to two kinds of
// unit: its group, every list of its prefix's family, whose frequencies
// in a document are summed and saturated once, with one idf from the
// documents holding any of them; and each query word's own token, which
// adds memory.ExactWeight x its own idf (a group of one list that is the
// word itself is one unit of both weights). Both are multiplied by the
// term's weight. Units are taken rarest first; once the rarer ones found
// twice as many documents as the caller wants, a common unit
// (memory.CommonShare) brings no document in: a common group is left out,
// a common word's own token adds to the documents found.
//
// Where the budget truncated a list the score is approximate: a document
// past the leaders lacks the unread part of its frequency (completeLeaders
// adds it for the leaders), and a group's document count adds the unread
// postings to the documents read.

// lexUnit is one unit of a query over every scope it reads.
type lexUnit struct {
	g      int    // the query term
	word   string // "" for a group unit
	merged bool   // a group of one list that is its word's own token: both weights
	df     int64  // the sum of its lists' document frequencies (the common rule's measure)
}

// lexDoc accumulates one candidate's score.
type lexDoc struct {
	length float64
	exact  float64   // the words' own parts, weighted
	tf     []groupTF // per group of a scored (not common) unit: the summed frequency
	lists  uint64    // the read's lists (their index, below 64) whose read postings hold it
}

type groupTF struct {
	g  int
	tf float64
}

// posting decodes a posting's packed score: its frequency and its
// document's length.
func posting(packed float64) (tf, length float64) {
	rest := int64(packed) % postingShift
	return float64(rest >> 16), float64(rest & 0xffff)
}

// score is step 3's first half: the units of the query in the SQLite
// store's order, the common rule, every read posting accumulated, the
// groups' weights from the documents they hold, and each read's
// candidates ranked, the best k first. want is the caller's limit (0: no
// unit is left out). It reports whether common units were left out.
func score(reads []*lexRead, qs []memory.LexTerm, want, k int) bool {
	if len(reads) == 0 {
		return false
	}
	q := reads[0].q
	// The units, in query order (each group, then its words), then
	// stably by document frequency, as the SQLite store sorts them.
	terms := make([]map[string]bool, len(qs)) // per group: its terms, and whether each is a word's own
	for _, r := range reads {
		for _, l := range r.lists {
			if terms[l.gi] == nil {
				terms[l.gi] = map[string]bool{}
			}
			terms[l.gi][l.term()] = terms[l.gi][l.term()] || !l.exp
		}
	}
	var units []lexUnit
	for g, lt := range qs {
		if len(terms[g]) == 0 {
			continue
		}
		u := lexUnit{g: g, df: q.groupDF[g]}
		if len(terms[g]) == 1 {
			for t, word := range terms[g] {
				if word { // the one list is the word's own token
					u.merged, u.word = true, t
				}
			}
		}
		units = append(units, u)
		if u.merged {
			continue
		}
		for _, w := range lt.Words {
			if terms[g][w] {
				units = append(units, lexUnit{g: g, word: w, df: q.wordDF[w]})
			}
		}
	}
	slices.SortStableFunc(units, func(a, b lexUnit) int { return int(a.df - b.df) })

	for _, r := range reads {
		// Sized for every posting read (an upper bound of the documents):
		// growing the map was most of accumulate's time.
		n := 0
		for li, l := range r.lists {
			l.inGroup, l.ew, l.foundOnly, l.idx = false, 0, false, li
			n += len(l.ps)
		}
		r.index = make(map[string]int, n)
		r.docs = slices.Grow(r.docs[:0], n)
	}
	found := func() int {
		n := 0
		for _, r := range reads {
			n += len(r.docs)
		}
		return n
	}
	common := false
	for _, u := range units {
		if !common && want > 0 && float64(u.df) > memory.CommonShare*q.n && found() >= 2*want {
			common = true // units are sorted by df: the rest are common too
		}
		ew := 0.0
		if u.word != "" {
			ew = memory.ExactWeight * q.idf(q.wordDF[u.word]) * q.tw[u.g] * (bm25K1 + 1)
		}
		group := !common && (u.word == "" || u.merged)
		if common && ew == 0 {
			continue // a common group: left out
		}
		for _, r := range reads {
			for _, l := range r.lists {
				if l.gi != u.g || (u.word != "" && !u.merged && (l.exp || l.term() != u.word)) {
					continue
				}
				if group {
					l.inGroup = true
				}
				if ew > 0 {
					l.ew, l.foundOnly = ew, common
				}
				r.accumulate(l, group, ew, common)
			}
		}
	}
	// Each group's weight, from the documents holding any of its lists
	// (those read, and the unread postings of truncated lists, and of the
	// lists of other projects read through their reach-anywhere postings
	// or only counted: subset). The unread part is a sum over the group's
	// lists, so a document holding two of its terms counts twice there;
	// a project read whole counts it once. With other projects counted so
	// (stop 46) LongMemEval-dev on Redis went R@1/5/10/20 0.478/0.838/
	// 0.900/0.932 -> 0.488/0.838/0.895/0.946 (block recall 0.858 ->
	// 0.853) and LoCoMo-dev 0.358/0.645/0.724/0.772 -> 0.352/0.645/0.723/
	// 0.773 (0.674 -> 0.673); counting the longest list instead of the
	// sum: 0.465/0.835/0.899/0.946 (0.855) and 0.350/0.651/0.718/0.768
	// (0.669).
	docsOf := make([]int64, len(qs))
	for _, r := range reads {
		for _, d := range r.docs {
			for _, t := range d.tf {
				docsOf[t.g]++
			}
		}
		for _, l := range r.lists {
			if l.inGroup && (l.truncated && len(l.ps) > 0 || l.subset) {
				docsOf[l.gi] += l.df - int64(len(l.ps))
			}
		}
	}
	q.gw = make([]float64, len(qs))
	for g := range qs {
		if docsOf[g] > 0 {
			q.gw[g] = q.idf(docsOf[g]) * q.tw[g] * (bm25K1 + 1)
		}
	}
	for _, r := range reads {
		r.cands = make([]memory.Scored, len(r.docs))
		for id, i := range r.index {
			r.cands[i] = memory.Scored{ID: id, Score: r.docScore(&r.docs[i])}
		}
		for _, l := range r.lists {
			if l.truncated {
				if ps := l.ps; len(ps) > 0 {
					last := ps[len(ps)-1]
					l.stop = last.Score
					l.stopMember, _ = last.Member.(string)
					tf, length := posting(last.Score)
					w := l.ew
					if l.inGroup {
						w += q.gw[l.gi]
					}
					l.last = w * tf / (tf + r.c1 + r.c2*length)
				}
			}
		}
		// Only the leaders need their order now; the rest is sorted when
		// readRestVisibility reaches it.
		r.ranked = min(k, len(r.cands))
		sortBest(r.cands, r.ranked)
	}
	return common
}

// accumulate adds l's read postings: their frequencies to the group's sum
// (group), and their own part (ew > 0); foundOnly: only to documents
// already found.
func (r *lexRead) accumulate(l *postingList, group bool, ew float64, foundOnly bool) {
	for _, p := range l.ps {
		id, _ := p.Member.(string)
		i, ok := r.index[id]
		if !ok {
			if foundOnly {
				continue
			}
			i = len(r.docs)
			r.index[id] = i
			r.docs = append(r.docs, lexDoc{})
		}
		tf, length := posting(p.Score)
		r.add(&r.docs[i], l.gi, tf, length, group, ew)
		if l.idx < 64 {
			r.docs[i].lists |= 1 << l.idx
		}
	}
}

// add counts one posting of group g in document d.
func (r *lexRead) add(d *lexDoc, g int, tf, length float64, group bool, ew float64) {
	d.length = length
	if ew > 0 {
		d.exact += ew * tf / (tf + r.c1 + r.c2*length)
	}
	if !group {
		return
	}
	for j := range d.tf {
		if d.tf[j].g == g {
			d.tf[j].tf += tf
			return
		}
	}
	d.tf = append(d.tf, groupTF{g, tf})
}

// docScore is a document's BM25: its words' own parts plus each group's,
// saturated once over the group's summed frequency.
func (r *lexRead) docScore(d *lexDoc) float64 {
	s := d.exact
	for _, t := range d.tf {
		s += r.q.gw[t.g] * t.tf / (t.tf + r.c1 + r.c2*d.length)
	}
	return s
}

// lexStats are one query's statistics over every scope it reads (weigh).
type lexStats struct {
	n       float64
	tw      []float64        // per query term: its weight
	groupDF []int64          // per query term: the sum of its lists' document frequencies
	wordDF  map[string]int64 // per word token
	gw      []float64        // per query term: its group's weight (score)
}

func (q *lexStats) idf(df int64) float64 {
	d := min(float64(df), q.n)
	return math.Log(1 + (q.n-d+0.5)/(d+0.5))
}

// groupIndex reads a list's query term from lexDictScript's reply.
func groupIndex(group string, terms int) (int, bool) {
	qi, err := strconv.Atoi(group)
	if err != nil || qi < lexDictFirstTerm || qi-lexDictFirstTerm >= terms {
		return 0, false
	}
	return qi - lexDictFirstTerm, true
}
