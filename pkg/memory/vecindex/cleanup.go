package vecindex

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Removal leaves a tombstone: the node stays in the graph as a stepping stone
// (searches walk through it but never return it) until enough tombstones
// pile up, then cleanup unlinks them all at once:
//
//   - every live node that links to a tombstone on some layer replaces those
//     links with the tombstone's own live neighbours (looking through chains
//     of tombstones), re-selected with the neighbour heuristic when there are
//     more than fit;
//   - tombstoned slots are then freed and their vector memory reused by later
//     adds;
//   - if the entry point was removed, the live node with the highest level
//     becomes the entry point.
//
// Each live node only rewrites its own lists and reads tombstones' lists,
// which nobody writes, so nodes are repaired in parallel without locks.

// cleanupMin is the number of tombstones below which cleanup waits, unless
// they are a tenth of the index or nothing live remains.
const cleanupMin = 64

func (ix *Index) maybeCleanupLocked() {
	t := ix.tombs
	if t == 0 {
		return
	}
	if ix.live > 0 && (t < cleanupMin || t*10 < ix.live+t) {
		return
	}
	ix.cleanupLocked()
}

func (ix *Index) cleanupLocked() {
	g := &ix.g
	n := len(ix.nodes)
	workers := g.workers
	if n < 4096 {
		workers = 1
	}
	var next atomic.Int64
	const chunk = 256
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := g.scratch(n)
			defer g.scratches.Put(sc)
			for {
				start := int(next.Add(chunk) - chunk)
				if start >= n {
					return
				}
				for s := start; s < min(start+chunk, n); s++ {
					if ix.state[s] == slotLive {
						ix.repair(uint32(s), sc)
					}
				}
			}
		}()
	}
	wg.Wait()

	best, bestLevel := int64(-1), -1
	for s, nd := range ix.nodes {
		switch ix.state[s] {
		case slotTomb:
			ix.state[s] = slotFree
			nd.friends, nd.sims = nil, nil
			ix.clearRow(uint32(s))
			ix.wipeLocked(uint32(s))
			ix.free = append(ix.free, uint32(s))
		case slotLive:
			if nd.level > bestLevel {
				best, bestLevel = int64(s), nd.level
			}
		}
	}
	ix.tombs = 0
	if g.entry < 0 || ix.state[g.entry] != slotLive {
		g.entry, g.maxLevel = best, max(bestLevel, 0)
	}
}

// repair replaces slot's links to tombstones, on every layer.
func (ix *Index) repair(slot uint32, sc *scratch) {
	g := &ix.g
	nd := ix.nodes[slot]
	for l, list := range nd.friends {
		if !slices.ContainsFunc(list, func(f uint32) bool { return ix.state[f] == slotTomb }) {
			continue
		}
		sc.visit.next()
		sc.visit.seen(slot)
		keep := sc.keep[:0]
		var queue []uint32 = sc.links[:0]
		for _, f := range list {
			if sc.visit.seen(f) {
				continue
			}
			if ix.state[f] == slotLive {
				keep = append(keep, f)
			} else {
				queue = append(queue, f)
			}
		}
		// Walk through tombstones (and tombstones of tombstones) to
		// collect replacement candidates, within reason.
		limit := 4 * g.maxLinks(l)
		for i := 0; i < len(queue) && len(keep) < limit; i++ {
			for _, f := range ix.nodes[queue[i]].friends[l] {
				if sc.visit.seen(f) {
					continue
				}
				if ix.state[f] == slotLive {
					keep = append(keep, f)
				} else if ix.state[f] == slotTomb {
					queue = append(queue, f)
				}
			}
		}
		sc.links = queue
		sc.keep = keep
		// Similarities of kept links are cached; new ones are computed.
		cands := sc.prune[:0]
		for _, f := range keep {
			var s float32
			if i := slices.Index(list, f); i >= 0 {
				s = nd.sims[l][i]
			} else {
				s = ix.pairDot(slot, f)
			}
			cands = append(cands, scored{sim: s, slot: f})
		}
		sc.prune = cands
		slices.SortFunc(cands, bySimDesc)
		nd.setLinks(l, g.selectNeighbours(ix, cands, g.maxLinks(l), sc))
	}
}
