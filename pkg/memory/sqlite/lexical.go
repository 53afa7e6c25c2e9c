package sqlite

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync/atomic"
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

// docCounts are the token counts of a node's indexed text (docText).
func docCounts(n *memory.Node) map[string]int {
	counts := map[string]int{}
	tokens(docText(n), counts)
	return counts
}

// docText is what the lexical channel indexes of a node. The label is
// written twice (BM25F with label weight 2: the label is what a memory is
// about; on the development set this took the ranker's R@5 from 0.798 to
// 0.808 and R@10 from 0.877 to 0.897). The index is built in memory at
// open, so the weighting needs no migration here (the Redis store's does,
// see its lexVersion).
func docText(n *memory.Node) string {
	var sb strings.Builder
	sb.WriteString(n.Label)
	sb.WriteByte('\n')
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

// posting is a document's entry in a term's list, as searches read it (a
// list keeps its first postings packed in blocks, the others in two
// arrays of rids and tfs: see blocks.go).
type posting struct {
	rid uint32
	tf  uint16
}

type term struct {
	name   string
	bl     *blockList // the first postings, in rid order, packed blockLen a block (blocks.go); nil: none packed
	rids   []uint32   // the postings after the blocks: rids[:run] ascending (none below the blocks'), the rest in the order written
	tfs    []uint16   // by plain posting: the term's count in the document; 0: a removed document's (until compact)
	df     int        // live documents holding the term
	stale  int        // postings of removed or re-indexed documents (tf 0, until compact)
	run    int        // how many plain postings from the first are in rid order (see sortTail)
	maxTF  uint16     // the highest tf of a posting written (a bound for pruning: never lowered)
	dense  bool       // the index keeps a dense copy of the list (lexIndex.dense, dense.go)
	minLen uint32     // the shortest document a posting was written for (a bound: never raised)
	ver    uint32     // bumped when the term's live documents change (the union df cache)
	id     uint32     // its index in lexIndex.tms
}

// lexIndex is an in-memory BM25 index over node rids. Postings are appended;
// a re-indexed or removed document bumps its generation so that its old
// entries are skipped, and lists are compacted when dead entries pile up.
//
// Terms live in one slice, by id, and a document's terms are ids: at a
// million memories the index holds tens of millions of them, which as
// strings (pointers) the garbage collector would scan at every cycle; as
// ids the per-document lists hold no pointers at all.
type lexIndex struct {
	ids      map[string]uint32 // term -> its id (index in tms)
	tms      []term            // by id; a free slot (see free) has no name
	free     []uint32          // ids of terms compact deleted, for new terms
	dict     []string          // sorted terms, for prefix expansion (with mid and recent: see mergeRecent)
	mid      []string          // sorted terms added since dict was last merged (up to an eighth of it)
	recent   []string          // sorted terms added since mid was last merged (kept small)
	docPrint []uint64          // per rid: the fingerprint of the live document's terms (docterms.go); 0: none
	docLen   []uint32          // per rid: tokens
	nDocs    int
	totalLen int64
	// Per tenant other than the default (tenants.go): a search's
	// statistics are its tenant's.
	docTenant []uint32                // per rid: the tenant of the live document (empty until another tenant's is indexed)
	tenantDF  map[uint64]int32        // tenantKey(tenant, term id) -> the tenant's live documents holding the term
	otherDF   map[uint32]int32        // term id -> the same summed over those tenants
	tenantN   map[uint32]*tenantCount // those tenants' live documents and lengths
	dead      int                     // stale postings
	live      int                     // live postings
	dfCache   dfCache
	noPrune   bool                                                                                  // tests: score every unit in full (the reference pruning must match)
	groupRef  func(sc *scratch, u lexUnit, idf func(float64) float64, bm bm25, top float32) float32 // tests: scores a group instead of mergeGroup (the reference it must match)
	dense     map[uint32][]uint16                                                                   // term id -> per rid the live posting's tf (0: none), for the terms most documents hold (dense.go)
	denseFrom int                                                                                   // tests: keep terms dense from this many documents (0: denseMinDocs)
	noPack    bool                                                                                  // tests: never pack lists in blocks (see packing)
	forcePack bool                                                                                  // tests: always pack lists in blocks
	pruned    atomic.Int64                                                                          // searches pruned (MaxScore: the units left scored for the documents found only)
	failed    atomic.Int64                                                                          // searches that tried to prune and scored every unit in full after all
	scanned   atomic.Int64                                                                          // documents removed by looking them up in every list (docterms.go)
	noPair    bool                                                                                  // tests: score a word and its group in two passes (the reference scorePair must match)
	paired    atomic.Int64                                                                          // a word and its group scored in one pass (scorePair)
}

func newLexIndex() *lexIndex { return &lexIndex{ids: map[string]uint32{}} }

// term returns the term t (nil: not in the index). The pointer is valid
// until the next term is added.
func (x *lexIndex) term(t string) *term {
	if id, ok := x.ids[t]; ok {
		return &x.tms[id]
	}
	return nil
}

func (x *lexIndex) grow(rid uint32) {
	for int(rid) >= len(x.docLen) {
		x.docLen = append(x.docLen, 0)
		x.docPrint = append(x.docPrint, 0)
	}
}

// remove drops a document: its postings get tf 0 (stale, skipped by
// searches, dropped by compact). old is the token counts of the text it
// was indexed with (nil: not known; see docterms.go).
func (x *lexIndex) remove(rid uint32, old map[string]int) {
	if int(rid) >= len(x.docLen) || x.docPrint[rid] == 0 {
		return
	}
	n := 0
	ids, ok := x.idsOf(old, nil)
	if old != nil && ok && termPrint(ids) == x.docPrint[rid] {
		missed := false
		t := x.tenantOf(rid)
		for _, id := range ids {
			if tm := &x.tms[id]; tm.kill(rid) {
				if tm.dense {
					x.setDense(tm, rid, 0)
				}
				tm.df--
				tm.stale++
				tm.ver++
				x.countTerm(t, id, -1)
				n++
			} else {
				missed = true // only if two term sets shared a fingerprint
			}
		}
		if missed {
			n += x.removeScan(rid)
			x.scanned.Add(1)
		}
	} else {
		n = x.removeScan(rid)
		x.scanned.Add(1)
	}
	x.dead += n
	x.live -= n
	x.forget(rid)
}

// forget drops document rid's counts (its postings are stale).
func (x *lexIndex) forget(rid uint32) {
	x.nDocs--
	x.totalLen -= int64(x.docLen[rid])
	x.countDoc(x.tenantOf(rid), x.docLen[rid], -1)
	x.setTenant(rid, 0)
	x.docPrint[rid] = 0
	x.docLen[rid] = 0
}

// set (re)indexes a document (a re-indexed one is looked up in every
// list: see reset).
func (x *lexIndex) set(rid uint32, text string) {
	counts := map[string]int{}
	tokens(text, counts)
	x.setCounts(rid, 0, counts, nil)
}

// reset re-indexes a document indexed with the text old.
func (x *lexIndex) reset(rid uint32, text, old string) {
	counts, was := map[string]int{}, map[string]int{}
	tokens(text, counts)
	tokens(old, was)
	x.setCounts(rid, 0, counts, was)
}

// setCounts is set for a text already tokenised (tokens), of a document
// of tenant tenant (its number in the store's string table; tenants.go); old
// is the counts of the text the document was indexed with (nil: not
// known).
func (x *lexIndex) setCounts(rid, tenant uint32, counts, old map[string]int) {
	x.grow(rid)
	x.remove(rid, old)
	x.setTenant(rid, tenant)
	if len(counts) == 0 {
		x.docPrint[rid] = termPrint(nil)
		x.nDocs++
		x.countDoc(tenant, 0, 1)
		return
	}
	ids := make([]uint32, 0, len(counts))
	pack := x.packing()
	var length uint32
	for _, c := range counts {
		length += uint32(c)
	}
	for t, c := range counts {
		id, ok := x.ids[t]
		if !ok {
			id = x.newTerm(t)
		}
		tm := &x.tms[id]
		tf := uint16(min(c, math.MaxUint16))
		tm.add(rid, tf, length, pack)
		if tm.dense {
			x.setDense(tm, rid, tf)
		} else {
			x.keepDense(tm)
		}
		if tenant != 0 {
			x.countTerm(tenant, id, 1)
		}
		ids = append(ids, id)
	}
	x.docPrint[rid] = termPrint(ids)
	x.docLen[rid] = length
	x.nDocs++
	x.totalLen += int64(length)
	x.countDoc(tenant, length, 1)
	x.live += len(ids)
	if len(x.recent) > recentMax {
		x.mergeRecent()
	}
	if x.dead > 1024 && x.dead > x.live/2 {
		x.compact()
	}
}

// packPostings is the distinct terms a document holds on average from
// which the lists are packed in blocks (blocks.go). Packed, a posting
// takes about 1.3 bytes instead of 6, but reading it costs a decoding
// (about 1.3 ns: at a million short memories, a third more CPU for the
// lexical channel). A short memory holds a few dozen terms: their postings
// are a small part of what it holds in memory (head, vector, gate: about
// 1 KB), and lists are kept plain; a LongMemEval-size memory (15 KB of
// text) holds about 1,100: 6.7 of its 10 KB, unpacked.
const packPostings = 256

// packing reports whether lists are packed (see packPostings); x.noPack
// (tests) keeps them plain, x.forcePack packs them.
func (x *lexIndex) packing() bool {
	return x.forcePack || !x.noPack && x.nDocs > 0 && x.live >= packPostings*x.nDocs
}

// newTerm adds the term t (not in the index) and returns its id.
func (x *lexIndex) newTerm(t string) uint32 {
	// t is a substring of the document's whole text (tokens): kept as it
	// is, it pinned that text, 15 KB a memory at LongMemEval size.
	t = strings.Clone(t)
	var id uint32
	if n := len(x.free); n > 0 {
		id, x.free = x.free[n-1], x.free[:n-1]
		// The version goes on from the freed term's: a cached union
		// count that named this id cannot be taken for the new term's.
		x.tms[id] = term{name: t, ver: x.tms[id].ver + 1, id: id}
	} else {
		id = uint32(len(x.tms))
		x.tms = append(x.tms, term{name: t, id: id})
	}
	x.ids[t] = id
	i, _ := slices.BinarySearch(x.recent, t)
	x.recent = slices.Insert(x.recent, i, t)
	return id
}

// recentMax bounds the small sorted dictionary of new terms: inserting into
// it is cheap, and it is merged into mid when it grows past this.
const recentMax = 2048

// mergeRecent merges recent into mid, and mid into dict once it holds an
// eighth of dict's terms. The dictionary is three sorted runs so that a
// new term is moved a bounded number of times: merging every 2,048 new
// terms into the whole dictionary cost a pass over all of it each time,
// quadratic in the vocabulary (a million memories naming their own
// components: 10 of the 18 s an index of them took to build).
func (x *lexIndex) mergeRecent() {
	x.mid, x.recent = mergeSorted(x.mid, x.recent), x.recent[:0]
	if len(x.mid) > max(len(x.dict)/8, recentMax) {
		x.dict, x.mid = mergeSorted(x.dict, x.mid), nil
	}
}

// mergeSorted returns the sorted union of a and b (sorted, disjoint) in a
// new slice.
func mergeSorted(a, b []string) []string {
	merged := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if a[i] < b[j] {
			merged = append(merged, a[i])
			i++
		} else {
			merged = append(merged, b[j])
			j++
		}
	}
	merged = append(merged, a[i:]...)
	return append(merged, b[j:]...)
}

func (x *lexIndex) compact() {
	var ps []posting
	pack := x.packing()
	for id := range x.tms {
		tm := &x.tms[id]
		if tm.name == "" {
			continue // a free slot
		}
		if tm.stale == 0 && tm.run == len(tm.rids) {
			continue // nothing to drop, nothing unsorted
		}
		ps = slices.DeleteFunc(tm.all(ps[:0]), func(p posting) bool { return p.tf == 0 })
		if len(ps) == 0 {
			delete(x.ids, tm.name)
			delete(x.dense, uint32(id))
			*tm = term{ver: tm.ver + 1}
			x.free = append(x.free, uint32(id))
			continue
		}
		slices.SortStableFunc(ps, byRid)
		tm.setAll(ps, pack)
		tm.stale = 0
	}
	x.dead = 0
	gone := func(t string) bool { _, ok := x.ids[t]; return !ok }
	x.dict = slices.DeleteFunc(x.dict, gone)
	x.mid = slices.DeleteFunc(x.mid, gone)
	x.recent = slices.DeleteFunc(x.recent, gone)
}

// expand returns the dictionary terms a query term matches: itself and, for
// terms of at least prefixMin runes, up to prefixMax longer terms it
// prefixes (the first in dictionary order).
func (x *lexIndex) expand(q string, t uint32) []*term {
	// Only terms the tenant's live documents hold (tenants.go): another
	// tenant's vocabulary does not take the places of its expansions, nor
	// the prefix's own token (a group of two lists scores apart from its
	// word, of one with it: the scores would tell); nor do terms whose
	// documents were all removed, which stay in the dictionary until
	// compact (their places went to nothing, and live terms after them
	// were not matched; the Redis store drops a term with its last
	// posting).
	keep := func(s string) bool { tm := x.term(s); return tm != nil && x.dfOf(tm, t) > 0 }
	var out []*term
	if tm := x.term(q); tm != nil && x.dfOf(tm, t) > 0 {
		out = append(out, tm)
	}
	if utf8.RuneCountInString(q) < prefixMin {
		return out
	}
	longer := prefixRange(x.dict, q, nil, keep)
	longer = prefixRange(x.mid, q, longer, keep)
	longer = prefixRange(x.recent, q, longer, keep)
	if len(x.mid) > 0 || len(x.recent) > 0 {
		slices.Sort(longer)
	}
	for _, t := range longer[:min(prefixMax, len(longer))] {
		out = append(out, x.term(t))
	}
	return out
}

// prefixRange appends up to prefixMax terms of sorted that q is a proper
// prefix of and keep takes (nil: every one).
func prefixRange(sorted []string, q string, into []string, keep func(string) bool) []string {
	i, found := slices.BinarySearch(sorted, q)
	if found {
		i++
	}
	for n := 0; i < len(sorted) && n < prefixMax && strings.HasPrefix(sorted[i], q); i++ {
		if keep == nil || keep(sorted[i]) {
			into = append(into, sorted[i])
			n++
		}
	}
	return into
}

// scratch holds per-query accumulators, reused between queries.
type scratch struct {
	mark       []uint64 // bit set of the touched documents, for the common terms
	tf         []float32
	score      []float32
	touchT     []uint32
	touched    []uint32
	best       []ranked
	seen       []uint64 // bit set for unionDF and touchedAtLeast (markLive)
	seenWords  []uint32 // the words of seen that markLive set
	cands      []uint32 // the documents a pruned search still scores, in rid order
	found      []posting
	blk        blockBuf // a block of postings decoded
	vis        []uint32 // the documents a filter sees (searchVisible), also set in mark
	merged     []merged // a group's documents, frequencies summed (mergeGroup), and the buffers it merges with
	merged2    []merged
	run        []merged
	tail       []merged
	groupOrder []*term
	groupRest  []*term
	tenant     uint32 // whose statistics the search weighs with (tenants.go): the filter's tenant
}

// commonShare is memory.CommonShare: when the rarer terms already matched
// at least 2 x want documents a common term brings no candidates: a common
// group is not scored at all, a common word's own token only for the
// candidates found (see search); otherwise every term is scored (exact
// BM25).
const commonShare = memory.CommonShare

// search scores the documents matching any query word (memory.LexTerms:
// a stem prefix counting as one term whose frequency sums its expansions,
// plus memory.ExactWeight x BM25 of each word's own token, both times the
// term's weight: memory.StopWordWeight for a stop word) and calls visit
// for each with its score. want (> 0) is how many candidates the caller
// needs: it allows skipping common terms (see commonShare) and visiting the
// best documents first, best first while visit returns true, the others
// only while more reports that the caller still needs some (see
// visitBest; a nil more visits all, in no particular order).
//
// accept is the caller's filter (nil: it takes every document): the
// common words score only the documents that can still be among the want
// best accepted ones (see commonCut). It reports whether common terms
// were left out (a caller whose filter then leaves it short of want may
// search again with want 0: every term scored).
func (x *lexIndex) search(words []string, sc *scratch, want int, accept func(rid uint32) bool, more func() bool, visit func(rid uint32, score float64) bool) (left bool) {
	return x.searchPruned(words, sc, want, accept, more, visit, want > 0 && more != nil && !x.noPrune)
}

// searchPruned is search, pruned (MaxScore, see prune.go) when prune is set.
func (x *lexIndex) searchPruned(words []string, sc *scratch, want int, accept func(rid uint32) bool, more func() bool, visit func(rid uint32, score float64) bool, prune bool) (left bool) {
	if x.nDocs == 0 {
		return false
	}
	n := len(x.docLen)
	N, idf, bm := x.prepare(sc)
	if N == 0 {
		return false // the tenant has no document
	}
	// A query term is scored as up to two kinds of unit: its group (the
	// prefix's tokens, the words' own among them, one idf from the summed
	// document frequency) and each word's own token (ExactWeight x its own
	// idf). Units are scored rarest first and each is judged common on its
	// own: "use" stays scored as a word when its family ("used", "user",
	// "useful", ...) is common enough to be left out.
	us := x.units(words, sc.tenant)
	sc.touched = sc.touched[:0]
	var top float32 // the best score so far (scores only grow; each is finite and positive, so a comparison keeps it)
	// k: the unit's weighted idf times k1 + 1 (a group that is also its
	// word's only token adds both weights at once).
	// Pruning (MaxScore, see prune.go): restDF[i] is the postings of
	// units i.. (a check is worth it when they outnumber the documents
	// found).
	var restDF []int
	tried := false
	if prune {
		restDF = make([]int, len(us)+1)
		for i := len(us) - 1; i >= 0; i-- {
			restDF[i] = restDF[i+1] + us[i].df
		}
	}
	// restricted: only the documents in sc.cands (and marked) are scored
	// from here on: those that can still be among the want best accepted
	// ones (pruned, or the common words' cut).
	restricted := false
	// common: the units left are common (see commonShare) and the rarer
	// ones found enough candidates. A common group is left out (the
	// prefix expansions of "the" or "what" are noise); a common word's
	// own token still counts, at its small idf, for the candidates found,
	// but brings in none (on the development set leaving those out too
	// cost R@1 0.475 -> 0.468 and R@10 0.904 -> 0.894).
	common := false
	fused := false // unit i was scored with unit i-1 (scorePair)
	for i, u := range us {
		if fused {
			fused = false
			continue
		}
		if !common && want > 0 && float64(u.df) > commonShare*N && x.touchedAtLeast(sc, us[:i], restricted, 2*want) {
			common = true // units are sorted by df: so are the rest
			if !restricted {
				// What the common words can add to a document at most
				// (tf / (tf + norm) < 1): their own tokens' weights.
				spare := 0.0
				for _, c := range us[i:] {
					w := c.we
					if !c.group {
						w = c.w
					}
					if df := x.dfOf(c.lists[0], sc.tenant); w > 0 && df > 0 {
						spare += w * idf(float64(df)) * (bm25K1 + 1)
					}
				}
				sc.restrict(n, x.commonCut(sc, top, want, spare, accept), 0)
				restricted = true
			}
		} else if prune && !tried && !restricted && i > 0 && restDF[i] > pruneShare*len(sc.touched) && len(sc.touched) >= want {
			// Tried once, where the units left first outnumber the
			// documents found (after the rarest, weightiest units).
			tried = true
			if x.worthPruning(sc, us, i, want, accept, idf, bm, N, top) {
				// MaxScore: the documents found are scored in full (the
				// units left looked up for them) and, as the want-th best
				// of them beats all that the units left can add to a
				// document they do not hold, that is the answer (prune.go).
				var done bool
				if done, common = x.finishFound(sc, us, restDF, i, want, accept, idf, bm, N, &top); !done {
					// Cannot happen (worthPruning checked it); should it,
					// everything is scored afresh.
					for _, rid := range sc.touched {
						sc.score[rid] = 0
					}
					sc.unmarkTouched()
					x.failed.Add(1)
					return x.searchPruned(words, sc, want, accept, more, visit, false)
				}
				restricted = true
				x.pruned.Add(1)
				break
			}
		}
		if common {
			tm, w, ok := u.commonToken()
			if !ok {
				continue
			}
			df := x.dfOf(tm, sc.tenant)
			if df == 0 {
				continue
			}
			k := w * idf(float64(df)) * (bm25K1 + 1)
			if tm.dense {
				top = x.scoreDense(sc, tm, k, bm, top)
				continue
			}
			if tm.seekable(len(sc.cands)) {
				sc.found = x.candidates(tm, sc.cands, sc.mark, sc.found[:0], &sc.blk)
				for _, p := range sc.found {
					v := sc.score[p.rid] + bm.score(k, float64(p.tf), x.docLen[p.rid])
					sc.score[p.rid] = v
					if v > top {
						top = v
					}
				}
				continue
			}
			// Many candidates: one read of the list against their bit set
			// (a few kilobytes, in the cache), scoring as it goes.
			// The blocks' tfs are read for the candidates only.
			for b := range tm.nblocks() {
				tfs := tm.blockRids(b, &sc.blk)
				for i, rid := range &sc.blk.rids {
					if sc.mark[rid>>6]&(1<<(rid&63)) == 0 {
						continue
					}
					tf := tfs.at(i)
					if tf == 0 {
						continue
					}
					v := sc.score[rid] + bm.score(k, float64(tf), x.docLen[rid])
					sc.score[rid] = v
					if v > top {
						top = v
					}
				}
			}
			tfs := tm.tfs[:len(tm.rids)]
			for i, rid := range tm.rids {
				if sc.mark[rid>>6]&(1<<(rid&63)) == 0 || tfs[i] == 0 {
					continue
				}
				v := sc.score[rid] + bm.score(k, float64(tfs[i]), x.docLen[rid])
				sc.score[rid] = v
				if v > top {
					top = v
				}
			}
			continue
		}
		if i+1 < len(us) && !restricted && !x.noPair {
			if t, ok := x.scorePair(sc, u, us[i+1], idf, bm, N, top); ok {
				top, fused = t, true
				continue
			}
		}
		if len(u.lists) == 1 && u.lists[0].stale == 0 {
			// One list, every posting live and of its own document: df is
			// the list's length (the tenant's part of it), and each
			// posting's contribution is final. One pass, the same sums in
			// the same order as the general case below.
			tm := u.lists[0]
			df := x.dfOf(tm, sc.tenant)
			if df == 0 {
				continue
			}
			k := (u.w + u.we) * idf(float64(df)) * (bm25K1 + 1)
			for p := range tm.parts() {
				rids, tfs := tm.part(p, &sc.blk)
				tfs = tfs[:len(rids)]
				for i, rid := range rids {
					if v := sc.add(rid, bm.score(k, float64(tfs[i]), x.docLen[rid])); v > top {
						top = v
					}
				}
			}
			continue
		}
		if x.groupRef != nil {
			top = x.groupRef(sc, u, idf, bm, top)
			continue
		}
		top = x.scoreGroup(sc, u, idf, bm, top)
	}
	x.visitBest(sc, top, want, more, visit, restricted)
	if restricted {
		sc.unmarkTouched()
	}
	return common
}

// prepare sizes sc's accumulators for the index (x.nDocs > 0) and returns
// the query's BM25 statistics, its tenant's (sc.tenant): the document
// count (0: the tenant has none), the idf of a document frequency and the
// length normalisation.
func (x *lexIndex) prepare(sc *scratch) (N float64, idf func(df float64) float64, bm bm25) {
	if n := len(x.docLen); len(sc.tf) < n {
		sc.tf = make([]float32, n+n/4)
		sc.score = make([]float32, n+n/4)
	}
	n, total := x.docsOf(sc.tenant)
	avg := float64(total) / float64(n)
	if !(avg > 0) {
		avg = 1
	}
	N = float64(n)
	idf = func(df float64) float64 { return math.Log(1 + (N-df+0.5)/(df+0.5)) }
	return N, idf, bm25{c1: bm25K1 * (1 - bm25B), c2: bm25K1 * bm25B / avg}
}

// accumulateGroup sums the tfs of lists' postings of the documents cands
// (sorted, also set in sc.mark) into sc.tf, noting each document once in
// sc.touchT.
func (x *lexIndex) accumulateGroup(sc *scratch, lists []*term, cands []uint32) {
	sc.touchT = sc.touchT[:0]
	for _, tm := range lists {
		sc.found = x.candidates(tm, cands, sc.mark, sc.found[:0], &sc.blk)
		for _, p := range sc.found {
			if sc.tf[p.rid] == 0 {
				sc.touchT = append(sc.touchT, p.rid)
			}
			sc.tf[p.rid] += float32(p.tf)
		}
	}
}

// units are the lexical units of a query's words (see searchPruned) for
// tenant t's statistics (tenants.go), rarest first.
func (x *lexIndex) units(words []string, t uint32) []lexUnit {
	lts := memory.LexTerms(words)
	us := make([]lexUnit, 0, 2*len(lts))
	for _, lt := range lts {
		exp := x.expand(lt.Prefix, t)
		var exact []*term
		for _, w := range lt.Words {
			if tm := x.term(w); tm != nil && x.dfOf(tm, t) > 0 {
				exact = append(exact, tm)
				if !slices.Contains(exp, tm) {
					exp = append(exp, tm) // past the prefix's first prefixMax expansions
				}
			}
		}
		if len(exp) == 0 {
			continue
		}
		g := lexUnit{lists: exp, w: lt.Weight, group: true}
		for _, tm := range exp {
			g.df += x.dfOf(tm, t)
		}
		if len(exp) == 1 && len(exact) == 1 {
			g.we = memory.ExactWeight * lt.Weight
			exact = nil
		}
		us = append(us, g)
		for _, tm := range exact {
			us = append(us, lexUnit{lists: []*term{tm}, w: memory.ExactWeight * lt.Weight, df: x.dfOf(tm, t)})
		}
	}
	slices.SortStableFunc(us, func(a, b lexUnit) int { return a.df - b.df })
	return us
}

// lexUnit is a query term as search scores it (see there).
type lexUnit struct {
	lists []*term
	w     float64 // the weight of the unit's idf: the term's weight for a group, ExactWeight x it for a word
	we    float64 // a one-list group that is also its word's token: ExactWeight x the term's weight (else 0)
	df    int     // upper bound: the sum over lists
	group bool    // the unit is a term's group, not a word's own token
}

// commonToken is what the unit counts once the common words are left out
// (see searchPruned): a group only its word's own token (a one-list group
// that is also its word's), a word its token, at that token's weight; ok
// false: nothing.
func (u *lexUnit) commonToken() (tm *term, w float64, ok bool) {
	w = u.w
	if u.group {
		if u.we == 0 {
			return nil, 0, false
		}
		w = u.we
	}
	tm = u.lists[0]
	return tm, w, tm.df > 0
}

// bm25 holds the query's length normalisation: a posting's contribution
// is k * tf / (tf + c1 + c2 * length).
type bm25 struct{ c1, c2 float64 }

func (b bm25) score(k, tf float64, length uint32) float32 {
	return float32(k * tf / (tf + b.c1 + b.c2*float64(length)))
}

// commonCut is the lowest score a touched document needs before the common
// words are scored to be among the want best documents accept accepts
// (nil: every one) once they are: the want-th best accepted score, less
// spare (the most the common words add to one document), with a margin
// for rounding. A document under it cannot reach those want, so its
// common words need no scoring: the channel's answer is the same, at a
// fraction of the work (most documents a common word holds are not near
// the top). 0 (score them all) when fewer than want documents are
// accepted among the 8^3 x want best.
func (x *lexIndex) commonCut(sc *scratch, top float32, want int, spare float64, accept func(uint32) bool) float32 {
	kth := x.kthAccepted(sc, top, want, accept)
	if kth < 0 {
		return 0
	}
	margin := 1e-6 * (float64(kth) + spare)
	return max(0, float32(float64(kth)-spare-margin))
}

// histogram counts the touched documents by score, in cutBuckets buckets
// from 0 to the best score: the documents at or above the k-th best score
// are found without sorting them all.
type histogram struct {
	scale  float32
	counts [cutBuckets]int
}

func (h *histogram) bucket(v float32) int { return min(int(v*h.scale), cutBuckets-1) }

// cutFor is the highest bucket at which the documents counted from the
// best reach need (-1: there are fewer).
func (h *histogram) cutFor(need int) int {
	seen := 0
	for b := cutBuckets - 1; b >= 0; b-- {
		if seen += h.counts[b]; seen >= need {
			return b
		}
	}
	return -1
}

// bestFrom returns the documents of docs in the buckets from cut up, best
// first (in sc.best, reused).
func (sc *scratch) bestFrom(docs []uint32, h *histogram, cut int) []ranked {
	best := sc.best[:0]
	for _, rid := range docs {
		if v := sc.score[rid]; h.bucket(v) >= cut {
			best = append(best, ranked{v, rid})
		}
	}
	slices.SortFunc(best, bestFirst)
	sc.best = best
	return best
}

// fillBest counts docs by score in h (top: the best score) and returns
// the documents of the buckets from the cut for need up (the highest
// bucket at which need documents are counted from the best; 0 when there
// are fewer), best first, and the cut: what bestFrom returns from a
// histogram of them all, in the same order, in one pass over docs instead
// of two. The cut of the documents counted so far is at most the cut of
// all (counts only grow), so a document under it is not kept, and those
// kept under it are dropped as it rises (TestFillBestIsFillThenBestFrom).
func (sc *scratch) fillBest(docs []uint32, h *histogram, top float32, need int) ([]ranked, int) {
	h.scale = float32(cutBuckets-1) / top
	best := sc.best[:0]
	low, next := 0, max(4*need, 1024)
	for _, rid := range docs {
		v := sc.score[rid]
		b := h.bucket(v)
		h.counts[b]++
		if b < low {
			continue
		}
		if best = append(best, ranked{v, rid}); len(best) >= next {
			if c := h.cutFor(need); c > low {
				low = c
				best = h.keepFrom(best, low)
			}
			next = max(next, 2*len(best))
		}
	}
	cut := max(0, h.cutFor(need))
	best = h.keepFrom(best, cut)
	slices.SortFunc(best, bestFirst)
	sc.best = best
	return best, cut
}

// keepFrom drops from rs, in place and in order, those under bucket cut.
func (h *histogram) keepFrom(rs []ranked, cut int) []ranked {
	kept := rs[:0]
	for _, r := range rs {
		if h.bucket(r.score) >= cut {
			kept = append(kept, r)
		}
	}
	return kept
}

// clearScores zeroes the touched documents' scores: the whole array at
// once when they are more than a tenth of it (a sequential clear of 4 MB
// at a million documents costs less than as many scattered writes).
func (sc *scratch) clearScores() {
	if len(sc.touched) > len(sc.score)/10 {
		clear(sc.score)
		return
	}
	for _, rid := range sc.touched {
		sc.score[rid] = 0
	}
}

// unmarkTouched clears the touched documents' bits in sc.mark (what
// restrict, finishFound and keepWithin set): the whole bit set at once
// when they outnumber its words (at a million documents it is 16 KB, less
// than a pass over a few thousand scattered documents).
func (sc *scratch) unmarkTouched() {
	if len(sc.touched) > len(sc.mark) {
		clear(sc.mark)
		return
	}
	for _, rid := range sc.touched {
		sc.mark[rid>>6] = 0
	}
}

// cutBuckets is the resolution of the score histogram visitBest cuts with.
const cutBuckets = 1024

// ranked is a touched document with its score, for the best-first visit.
type ranked struct {
	score float32
	rid   uint32
}

// bestFirst orders ranked documents by score, best first (ties in no
// order: the best-first visit's callers break them on the id).
func bestFirst(a, b ranked) int { return cmp.Compare(b.score, a.score) }

// visitBest calls visit for the touched documents (top is the best of
// their scores) and clears their scores.
//
// When many are touched, the documents at or above the want-th best score
// (found without sorting them all: over a floor judged on a sample, or
// from a histogram's cut, see below) are visited first,
// best first, until visit returns false (it can take nothing scoring less:
// its want places are full); the rest are visited, in no order, only when
// more says the caller still lacks candidates (its filter rejected some of
// the best). A caller keeping the want best accepted documents gets the
// same answer as from visiting them all, while most queries visit a few
// dozen documents instead of thousands: a common term leaves thousands of
// documents in the want-th best's bucket, nearly all of which lose to it.
// With few touched documents each is visited once, in no order, and
// visit's answer is ignored.
//
// restricted: the search narrowed its candidates to sc.cands (also set in
// sc.mark), which hold every document that can be among the want best
// accepted ones (pruned, or the common words' cut): those are ranked, not
// every document touched, and the others are visited after them only
// when more still says so.
func (x *lexIndex) visitBest(sc *scratch, top float32, want int, more func() bool, visit func(rid uint32, score float64) bool, restricted bool) {
	defer sc.clearScores()
	docs := sc.touched
	if restricted {
		docs = sc.cands
	}
	// others visits the touched documents not in docs.
	others := func() {
		if !restricted {
			return
		}
		for _, rid := range sc.touched {
			if sc.mark[rid>>6]&(1<<(rid&63)) == 0 {
				visit(rid, float64(sc.score[rid]))
			}
		}
	}
	if want <= 0 || more == nil || len(docs) <= 4*want || !(top > 0) {
		for _, rid := range docs {
			visit(rid, float64(sc.score[rid]))
		}
		if more == nil || more() {
			others() // a nil more visits every document
		}
		return
	}
	// The best documents: those over a floor judged on a sample (one
	// comparison a document; when too many are over it, those of them
	// from a histogram's cut), or when the sample misjudged it (fewer
	// than want reach it) those from a histogram's cut of all.
	var h histogram
	var best []ranked
	var under func(v float32) bool // a document not in best
	if floor := sc.floorFor(docs, top, want); floor > 0 {
		var cut int
		if best, cut = sc.above(docs, floor, top, want, &h); len(best) >= want {
			under = func(v float32) bool { return v < floor || h.bucket(v) < cut }
		}
	}
	if under == nil {
		h = histogram{}
		var cut int
		best, cut = sc.fillBest(docs, &h, top, want)
		under = func(v float32) bool { return h.bucket(v) < cut }
	}
	for _, r := range best {
		if !visit(r.rid, float64(r.score)) {
			break
		}
	}
	if !more() {
		return
	}
	for _, rid := range docs {
		if v := sc.score[rid]; under(v) {
			visit(rid, float64(v))
		}
	}
	others()
}

// sampleEvery: floorFor judges on every sampleEvery-th document.
const sampleEvery = 16

// floorFor returns a score that about 4 x need of docs reach, judged on
// every sampleEvery-th of them (top: the best score); 0 when they are too
// few to judge so.
func (sc *scratch) floorFor(docs []uint32, top float32, need int) float32 {
	m := 4*need/sampleEvery + 1
	if len(docs) < 4*sampleEvery*m {
		return 0
	}
	var h histogram
	h.scale = float32(cutBuckets-1) / top
	for i := 0; i < len(docs); i += sampleEvery {
		h.counts[h.bucket(sc.score[docs[i]])]++
	}
	cut := h.cutFor(m)
	if cut <= 0 {
		return 0
	}
	return float32(cut) / h.scale
}

// above returns the documents of docs scoring floor or more, best first
// (in sc.best, reused), and the histogram's cut it applied (0: none).
// When they are more than aboveMax allows for need (the sample misjudged
// the floor: a periodic pattern of scores, every 16th document low, puts
// it under nearly all of them), only those from the cut for need of a
// histogram of their scores in h (top: the best) are kept and sorted; the
// others of them are under the cut.
func (sc *scratch) above(docs []uint32, floor, top float32, need int, h *histogram) ([]ranked, int) {
	best := sc.best[:0]
	for _, rid := range docs {
		if v := sc.score[rid]; v >= floor {
			best = append(best, ranked{v, rid})
		}
	}
	cut := 0
	if len(best) > aboveMax(len(docs), need) {
		h.scale = float32(cutBuckets-1) / top
		for _, r := range best {
			h.counts[h.bucket(r.score)]++
		}
		cut = max(0, h.cutFor(need))
		best = h.keepFrom(best, cut)
	}
	slices.SortFunc(best, bestFirst)
	sc.best = best
	return best, cut
}

// aboveMax is the most documents of n that above sorts without a
// histogram's cut first for need: the floor aims at 4 x need; the ties of
// a common word's documents near the need-th best (thousands at one score
// on the bench's corpus) are kept by either.
func aboveMax(n, need int) int { return max(64*need, n/16) }

// scoreDense adds the contribution of a dense term (k: its weighted idf
// times k1 + 1) to each candidate's score (sc.cands) and returns the best
// score, top at least. A candidate the term misses adds BM25 of tf 0,
// which is 0: the sums are those of the candidates it holds, without a
// branch on whether it holds one (a coin toss on a term held by over a
// quarter of the documents: a branch mispredicted that often cost more
// than the division).
func (x *lexIndex) scoreDense(sc *scratch, tm *term, k float64, bm bm25, top float32) float32 {
	d := x.dense[tm.id]
	score, docLen := sc.score, x.docLen
	for _, rid := range sc.cands {
		var tf uint16
		if int(rid) < len(d) {
			tf = d[rid]
		}
		v := score[rid] + bm.score(k, float64(tf), docLen[rid])
		score[rid] = v
		top = max(top, v)
	}
	return top
}
