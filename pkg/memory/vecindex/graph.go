package vecindex

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
)

// graph is a hierarchical navigable small world (HNSW, Malkov & Yashunin
// 2016) over the index slots. Every node has links on layers 0..level; a
// node's level is drawn from a geometric distribution so each layer holds
// about 1/M of the one below. Search descends greedily from the entry point
// (the node with the highest level) and runs a best-first beam search of
// width ef on layer 0.
//
// Locking: the Index write lock covers every change. AddBatch links nodes from
// several goroutines under that lock; they coordinate through node.mu (a
// node's link lists) and epMu (entry point and top level). Searches hold the
// Index read lock, so no links change under them and they take no node locks.
type graph struct {
	m, m0     int // max links per node on upper layers / on layer 0
	efC, efS  int
	mult      float64 // level multiplier 1/ln(M)
	rng       *rand.Rand
	workers   int
	epMu      sync.Mutex
	entry     int64 // entry slot, -1 when the graph is empty
	maxLevel  int
	scratches sync.Pool // *scratch
}

const maxLevelCap = 16

func (g *graph) init(cfg config, seed uint64) {
	g.m = cfg.m
	g.m0 = 2 * cfg.m
	g.efC = max(cfg.efConstruction, cfg.m)
	g.efS = cfg.efSearch
	g.mult = 1 / math.Log(float64(cfg.m))
	g.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g.workers = max(cfg.workers, 1)
	g.entry = -1
}

func (g *graph) ready() bool { return g.entry >= 0 }

func (g *graph) maxLinks(layer int) int {
	if layer == 0 {
		return g.m0
	}
	return g.m
}

// prepare draws the level of a freshly allocated slot and allocates its link
// lists, layer 0's in the slot's row of the slab. Called with the Index
// write lock held, never concurrently.
func (g *graph) prepare(ix *Index, slot uint32) {
	nd := ix.nodes[slot]
	lvl := int(-math.Log(1-g.rng.Float64()) * g.mult)
	lvl = min(lvl, maxLevelCap)
	nd.level = lvl
	nd.friends = make([][]uint32, lvl+1)
	nd.sims = make([][]float32, lvl+1)
	for l := range nd.friends {
		if l == 0 {
			ix.clearRow(slot)
			nd.friends[0] = ix.row0(slot)[:0]
		} else {
			nd.friends[l] = make([]uint32, 0, g.maxLinks(l))
		}
		nd.sims[l] = make([]float32, 0, g.maxLinks(l))
	}
}

func (g *graph) insert(ix *Index, slot uint32) {
	g.prepare(ix, slot)
	sc := g.scratch(len(ix.nodes))
	g.link(ix, slot, false, sc)
	g.scratches.Put(sc)
}

// insertMany links freshly allocated slots, in parallel when there are
// enough of them to be worth it.
func (g *graph) insertMany(ix *Index, slots []uint32) {
	for _, s := range slots {
		g.prepare(ix, s)
	}
	workers := g.workers
	if len(slots) < 256 {
		workers = 1
	}
	if workers == 1 {
		sc := g.scratch(len(ix.nodes))
		for _, s := range slots {
			g.link(ix, s, false, sc)
		}
		g.scratches.Put(sc)
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := g.scratch(len(ix.nodes))
			defer g.scratches.Put(sc)
			for {
				i := next.Add(1) - 1
				if i >= int64(len(slots)) {
					return
				}
				g.link(ix, slots[i], true, sc)
			}
		}()
	}
	wg.Wait()
}

// link connects slot q (level already drawn) into the graph. locked says
// whether other goroutines are linking at the same time.
func (g *graph) link(ix *Index, q uint32, locked bool, sc *scratch) {
	qn := ix.nodes[q]
	lq := qn.level

	g.epMu.Lock()
	ep, top := g.entry, g.maxLevel
	if ep < 0 {
		g.entry, g.maxLevel = int64(q), lq
		g.epMu.Unlock()
		return
	}
	raise := lq > top
	if raise {
		// Hold epMu for the whole insertion, as hnswlib does: it is rare
		// (about one node in M) and keeps the entry point consistent.
		defer g.epMu.Unlock()
	} else {
		g.epMu.Unlock()
	}

	cur := uint32(ep)
	// The new vector is the query: on the vectors, or with WithCodesOnly
	// on its code (the walk's code-times-code similarity).
	qq := &query{}
	if ix.codesOnly() {
		qq.code, qq.scale = ix.code(q), ix.scales[q]
	} else {
		qq.v = ix.vec(q)
	}
	curSim := ix.sim(qq, cur)
	for l := top; l > lq; l-- {
		cur, curSim = g.greedy(ix, qq, cur, curSim, l, locked, sc)
	}
	eps := append(sc.eps[:0], scored{sim: curSim, slot: cur})
	for l := min(top, lq); l >= 0; l-- {
		found, _ := g.searchLayer(ix, qq, eps, g.efC, l, locked, nil, g.efC, 0, sc)
		// A concurrent insert may already have linked q: never link to self.
		found = slices.DeleteFunc(found, func(c scored) bool { return c.slot == q })
		if len(found) == 0 {
			continue // only tombstones nearby; keep the previous entry points
		}
		slices.SortFunc(found, bySimDesc)
		chosen := append(sc.mine[:0], g.selectNeighbours(ix, found, g.m, sc)...)
		sc.mine = chosen
		if locked {
			qn.mu.Lock()
		}
		qn.setLinks(l, chosen)
		if locked {
			qn.mu.Unlock()
		}
		for _, n := range chosen {
			g.addLink(ix, n.slot, q, n.sim, l, locked, sc)
		}
		eps = append(sc.eps[:0], found...)
		sc.eps = eps
	}
	if raise {
		g.entry, g.maxLevel = int64(q), lq
	}
}

func bySimDesc(a, b scored) int {
	switch {
	case a.sim > b.sim:
		return -1
	case a.sim < b.sim:
		return 1
	}
	return int(a.slot) - int(b.slot)
}

// addLink adds the link n -> q (similarity sim) on layer l. When n's list
// is full, q is dropped if it is farther than every current link; otherwise
// the list is re-selected with the neighbour heuristic, dropping tombstones.
func (g *graph) addLink(ix *Index, n, q uint32, sim float32, l int, locked bool, sc *scratch) {
	nd := ix.nodes[n]
	if locked {
		nd.mu.Lock()
		defer nd.mu.Unlock()
	}
	list, sims := nd.friends[l], nd.sims[l]
	if slices.Contains(list, q) {
		return // linked already by a concurrent insert
	}
	maxM := g.maxLinks(l)
	if len(list) < maxM {
		nd.friends[l] = append(list, q)
		nd.sims[l] = append(sims, sim)
		return
	}
	if sim <= slices.Min(sims) {
		return
	}
	cands := sc.prune[:0]
	for i, f := range list {
		if ix.state[f] == slotTomb {
			continue
		}
		cands = append(cands, scored{sim: sims[i], slot: f})
	}
	cands = append(cands, scored{sim: sim, slot: q})
	sc.prune = cands
	slices.SortFunc(cands, bySimDesc)
	nd.setLinks(l, g.selectNeighbours(ix, cands, maxM, sc))
}

// setLinks replaces the links of layer l. The list's spare capacity is
// refilled with noLink: on layer 0 it is the slot's row in the slab, which
// the walk reads up to the first noLink.
func (nd *node) setLinks(l int, links []scored) {
	list, sims := nd.friends[l][:0], nd.sims[l][:0]
	for _, c := range links {
		list = append(list, c.slot)
		sims = append(sims, c.sim)
	}
	for i, spare := 0, list[len(list):cap(list)]; i < len(spare); i++ {
		spare[i] = noLink
	}
	nd.friends[l], nd.sims[l] = list, sims
}

// selectNeighbours is the HNSW neighbour heuristic: walking candidates from
// closest to farthest, keep one only if it is closer to the base than to any
// already kept, so links spread in different directions instead of all
// pointing into one cluster. Like hnswlib it does not top the list up with
// rejected candidates: a list left short absorbs later links without another
// (costly) re-selection, which halves build time at no measurable recall
// cost. cands must be sorted best first; the result may alias cands or
// scratch memory.
func (g *graph) selectNeighbours(ix *Index, cands []scored, m int, sc *scratch) []scored {
	if len(cands) <= m {
		return cands
	}
	out := sc.chosen[:0]
	for _, c := range cands {
		if len(out) >= m {
			break
		}
		good := true
		for _, r := range out {
			if ix.pairDot(c.slot, r.slot) > c.sim {
				good = false
				break
			}
		}
		if good {
			out = append(out, c)
		}
	}
	sc.chosen = out
	return out
}

// greedy moves from cur to ever closer neighbours on layer l until none is
// closer.
func (g *graph) greedy(ix *Index, q *query, cur uint32, curSim float32, l int, locked bool, sc *scratch) (uint32, float32) {
	for changed := true; changed; {
		changed = false
		for _, f := range g.friends(ix, cur, l, locked, sc) {
			if s := ix.sim(q, f); s > curSim {
				cur, curSim, changed = f, s, true
			}
		}
	}
	return cur, curSim
}

// friends returns the links of slot n on layer l: the list itself when no
// other goroutine writes links, a copy taken under the node lock otherwise.
func (g *graph) friends(ix *Index, n uint32, l int, locked bool, sc *scratch) []uint32 {
	if !locked && l == 0 {
		return ix.links0Of(n)
	}
	nd := ix.nodes[n]
	if !locked {
		if l < len(nd.friends) {
			return nd.friends[l]
		}
		return nil
	}
	nd.mu.Lock()
	var out []uint32
	if l < len(nd.friends) {
		out = append(sc.links[:0], nd.friends[l]...)
		sc.links = out
	}
	nd.mu.Unlock()
	return out
}

// searchLayer is the beam search of width ef on layer l starting from eps.
// Tombstones and, when accept is set, rejected ids are walked through but
// never returned. With budget > 0 it gives up after computing that many
// distances and reports complete=false. The result aliases scratch memory,
// in no particular order.
//
// With a filter the beam counts accepted hits only, so the walk must reach
// about ef/p nodes when a fraction p of them is accepted. To keep that near
// the cost of an unfiltered search, the width shrinks with the acceptance
// rate seen so far, to ef*p*filterSlack but never below minEf.
func (g *graph) searchLayer(ix *Index, q *query, eps []scored, ef, l int, locked bool,
	accept func(slot uint32) bool, minEf, budget int, sc *scratch) (res []scored, complete bool) {
	vis := &sc.visit
	vis.next()
	cand, top := &sc.cand, &sc.top
	cand.reset()
	top.reset()
	width := ef
	asked, taken := 0, 0
	hopeless := false // the filter accepts too little for a walk to pay
	eligible := func(slot uint32) bool {
		if ix.state[slot] != slotLive {
			return false
		}
		if accept == nil {
			return true
		}
		asked++
		ok := accept(slot)
		if ok {
			taken++
		}
		if asked >= 32 {
			width = min(ef, max(minEf, ef*taken*filterSlack/asked))
			if asked >= 256 && taken*scanBelow < asked {
				hopeless = true
			}
		}
		return ok
	}
	for _, e := range eps {
		if vis.seen(e.slot) {
			continue
		}
		cand.push(e)
		if eligible(e.slot) {
			top.push(e)
		}
	}
	for top.len() > width {
		top.pop()
	}
	work := 0
	for cand.len() > 0 {
		c := cand.pop()
		if top.len() >= width && c.sim < top.peek().sim {
			break
		}
		fresh := sc.fresh[:0]
		for _, f := range g.friends(ix, c.slot, l, locked, sc) {
			if !vis.seen(f) {
				fresh = append(fresh, f)
			}
		}
		sims := slices.Grow(sc.sims[:0], len(fresh))[:len(fresh)]
		sc.fresh, sc.sims = fresh, sims
		sc.touch ^= ix.touch(q, fresh)
		ix.sims(q, fresh, sims)
		work += len(fresh)
		for i, f := range fresh {
			s := sims[i]
			if top.len() < width || s > top.peek().sim {
				cand.push(scored{sim: s, slot: f})
				if eligible(f) {
					top.push(scored{sim: s, slot: f})
					for top.len() > width {
						top.pop()
					}
				}
			}
		}
		// The exact scan that replaces an abandoned walk computes a
		// distance for each accepted vector, so the more the filter
		// accepts, the longer walking remains the cheaper option.
		if hopeless || (budget > 0 && work > budget+taken*ix.live/max(asked, 1)/2) {
			return top.items, false
		}
	}
	return top.items, true
}

// filterSlack is how much more walking than an unfiltered search a filtered
// one may do before its width shrinks (see searchLayer).
const filterSlack = 2

// scanBelow: when fewer than one in scanBelow of the nodes met so far are
// accepted, searchLayer gives up early and Search scans exactly instead
// (calling accept on every vector but computing few distances is cheaper
// than walking ~k*scanBelow nodes).
const scanBelow = 50

// search answers a query of k hits on a non-empty graph.
func (g *graph) search(ix *Index, q []float32, k int, accept func(slot uint32) bool) []scored {
	sc := g.scratch(len(ix.nodes))
	defer g.scratches.Put(sc)
	// The walk compares int8 codes (unless WithExactWalk); the beam it
	// ends with is scored on the vectors below.
	qq := &query{v: q}
	if ix.codes != nil {
		sc.qcode = slices.Grow(sc.qcode[:0], len(q))[:len(q)]
		qq.code, qq.scale = sc.qcode, quantize(sc.qcode, q)
	}
	ep := uint32(g.entry)
	cur, curSim := ep, ix.sim(qq, ep)
	for l := g.maxLevel; l > 0; l-- {
		cur, curSim = g.greedy(ix, qq, cur, curSim, l, false, sc)
	}
	ef := max(g.efS, k)
	budget := 0
	if accept != nil {
		// A very selective filter makes the beam walk far to fill up;
		// past this much work a filtered full scan is cheaper.
		budget = max(4096, ix.live/16)
	}
	eps := append(sc.eps[:0], scored{sim: curSim, slot: cur})
	sc.eps = eps
	res, complete := g.searchLayer(ix, qq, eps, ef, 0, false, accept, min(ef, 2*k), budget, sc)
	if !complete || (len(res) < k && len(res) < ix.live) {
		// The filter is so selective that the walk ran out of budget,
		// or too few hits were in reach (also the rare region cut off
		// by removals): answer exactly.
		return ix.exactLocked(q, k, accept)
	}
	if qq.scale != 0 {
		for i := range res {
			res[i].sim = ix.qdot(q, res[i].slot)
		}
	}
	slices.SortFunc(res, bySimDesc)
	if len(res) > k {
		res = res[:k]
	}
	return slices.Clone(res)
}

// scratch is per-goroutine working memory, pooled.
type scratch struct {
	visit  visitSet
	cand   maxHeap
	top    minHeap
	eps    []scored
	prune  []scored
	chosen []scored
	links  []uint32
	fresh  []uint32
	sims   []float32
	mine   []scored
	keep   []uint32
	qcode  []int8
	touch  byte // what touch read, kept so that the reads stay
}

func (g *graph) scratch(n int) *scratch {
	sc, _ := g.scratches.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	sc.visit.grow(n)
	return sc
}

// visitSet marks visited slots in a bitset (an eighth of a byte per slot:
// 12.5 KB at 100,000 slots, which stays in cache, where a mark per slot in
// a 400 KB array missed it on most of a walk's checks). next clears only
// the words that were set, so a reset costs what the walk visited.
type visitSet struct {
	bits  []uint64
	dirty []uint32 // indexes of the words with a bit set
}

func (v *visitSet) grow(n int) {
	if len(v.bits)*64 < n {
		v.bits = make([]uint64, (n+n/4)/64+1)
		v.dirty = v.dirty[:0]
	}
}

func (v *visitSet) next() {
	for _, w := range v.dirty {
		v.bits[w] = 0
	}
	v.dirty = v.dirty[:0]
}

// seen marks slot visited and reports whether it already was.
func (v *visitSet) seen(slot uint32) bool {
	w, b := slot>>6, uint64(1)<<(slot&63)
	x := v.bits[w]
	if x&b != 0 {
		return true
	}
	if x == 0 {
		v.dirty = append(v.dirty, w)
	}
	v.bits[w] = x | b
	return false
}
