package sqlite

import (
	"encoding/hex"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/vecindex"
)

// index is the in-memory side of the store, rebuilt from the database at
// open and kept in step with every committed write: a head (the node without
// its text and vector) per rid for filtering and ordering, the BM25 index,
// one vector index per embedding model, the standing-instruction candidates
// and the counters behind HasLiveMemory and the embedding backlog.
type index struct {
	mu         sync.RWMutex
	heads      []*head  // by rid; nil: no node
	strs       strTable // the strings the heads and gates share, as numbers
	gates      []gate   // by rid: what the filters read of each head
	byID       map[string]uint32
	edges      map[string][]memory.Edge // live edges by node id (both ends; edges.go)
	lex        *lexIndex
	vecs       map[string]*vecindex.Index // by embedding model
	flat       map[string]*flatVecs       // models whose graph index is still being built
	loading    bool                       // the nodes are still being loaded (Open): new models go to flat too
	bulk       bool                       // WithBulkWrites: vectors only in flat, no graph, no replay log
	touched    map[uint32]struct{}        // rows mirrored by writes while loading: the load leaves them alone
	vecOpts    []vecindex.Option
	standing   map[memory.ProjectRef][]uint32 // per tenant's project (Project "": global): standing rids in memory.CompareStanding order
	convs      map[convKey]*convList          // per conversation: rids in memory.CompareConversation order (conversation.go)
	convFilled []*convList                    // lists the load appended to since they were last sorted (sortConversations)
	liveBy     map[memory.ProjectRef]int      // live nodes per tenant's project (Project "": global)
	scopes     scopeSets                      // the rids each filter can see (scopes.go)
	embeddedBy map[projectModel]int           // live nodes per tenant's project (Project "": global) and embedding model
	scratch    scratchPool
}

func newIndex(vecOpts []vecindex.Option) *index {
	return &index{
		byID:       map[string]uint32{},
		edges:      map[string][]memory.Edge{},
		lex:        newLexIndex(),
		vecs:       map[string]*vecindex.Index{},
		flat:       map[string]*flatVecs{},
		vecOpts:    vecOpts,
		touched:    map[uint32]struct{}{},
		standing:   map[memory.ProjectRef][]uint32{},
		convs:      map[convKey]*convList{},
		liveBy:     map[memory.ProjectRef]int{},
		embeddedBy: map[projectModel]int{},
	}
}

// scratchPool keeps the lexical channel's scratch (two float arrays as
// long as the index: 10 MB at a million memories) across garbage
// collections, unlike a sync.Pool, which drops its items at every
// collection: a query after one allocated them again, during the
// collector's mark when the index grows (its background load), and paid
// for them in mark assists on the turn's path. It holds at most
// scratchKept of them (concurrent queries beyond that allocate theirs).
type scratchPool struct {
	mu   sync.Mutex
	free []*scratch
}

const scratchKept = 8

func (p *scratchPool) get() *scratch {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		sc := p.free[n-1]
		p.free = p.free[:n-1]
		return sc
	}
	return &scratch{}
}

func (p *scratchPool) put(sc *scratch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) < scratchKept {
		p.free = append(p.free, sc)
	}
}

// change is one committed node write to mirror in the index.
type change struct {
	rid  uint32
	n    memory.Node
	vec  bool // the embedding changed
	text bool // the indexed text changed
	// counts are the token counts of the indexed text when they were
	// taken before the index lock (the load does); nil: taken under it.
	counts map[string]int
	// was is the token counts of the text the write replaced, taken
	// before the index lock (nil: a new node, or the text unchanged):
	// the terms to remove.
	was map[string]int
	// head and unit are the node's head and unit vector when they were
	// made before the index lock (the load does: what a batch allocates
	// under the lock, it pays for in mark assists while turns wait for
	// the lock); nil: made under it.
	head *head
	unit []float32
}

// reserve makes room for rids up to last in the per-rid slices, so that a
// load growing them to a million entries does not copy them again and
// again under the lock.
func (x *index) reserve(last int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := last + 1 // a write since last was read may have grown them past it
	x.heads = growTo(x.heads, n)
	x.gates = growTo(x.gates, n)
	x.lex.docLen = growTo(x.lex.docLen, n)
	x.lex.docPrint = growTo(x.lex.docPrint, n)
}

// growTo makes the capacity of s at least n.
func growTo[S ~[]E, E any](s S, n int) S {
	if n > len(s) {
		return slices.Grow(s, n-len(s))
	}
	return s
}

// copyHeads appends the nodes at rids to out (x.mu held; the heads exist),
// each with its own slices, so that the caller may change them. The slices
// of the batch share one backing array per kind (two allocations instead
// of two per node), each node's part capped so that an append to it
// reallocates instead of writing into the next node's.
func (x *index) copyHeads(out []memory.Node, rids []uint32) []memory.Node {
	np, ne := 0, 0
	for _, r := range rids {
		p, e := x.heads[r].slices()
		np += len(p)
		ne += len(e)
	}
	paths := make([]string, 0, np)
	ents := make([]memory.Entity, 0, ne)
	// The digests of the batch as one string (one allocation, not one a
	// node), each node's a part of it.
	var db strings.Builder
	db.Grow(len(rids) * 2 * digestBytes)
	var d [2 * digestBytes]byte
	for _, r := range rids {
		if h := x.heads[r]; h.flags&headOdd == 0 {
			hex.Encode(d[:], h.digest[:])
			db.Write(d[:])
		}
	}
	digests := db.String()
	for _, r := range rids {
		out = append(out, memory.Node{})
		n := &out[len(out)-1]
		h := x.heads[r]
		x.fillFields(n, h)
		if h.flags&headOdd == 0 {
			n.Digest, digests = digests[:2*digestBytes], digests[2*digestBytes:]
		}
		if n.Paths != nil {
			i := len(paths)
			paths = append(paths, n.Paths...)
			n.Paths = paths[i:len(paths):len(paths)]
		}
		if n.Entities != nil {
			i := len(ents)
			ents = append(ents, n.Entities...)
			n.Entities = ents[i:len(ents):len(ents)]
		}
	}
	return out
}

func (x *index) count(h *head, d int) {
	if h == nil || !h.live() {
		return
	}
	p := x.projectOf(h)
	x.liveBy[p] += d
	if h.model != 0 {
		x.embeddedBy[projectModel{p, x.strs.str(h.model)}] += d
	}
}

type projectModel struct {
	project memory.ProjectRef
	model   string
}

// pending reports whether a live node of project lacks a vector by model
// (x.mu held).
func (x *index) pending(project memory.ProjectRef, model string) bool {
	return x.liveBy[project]-x.embeddedBy[projectModel{project, model}] > 0
}

// apply mirrors committed changes. Vector errors cannot happen here: the
// write path checked the vectors (checkVector) before committing.
func (x *index) apply(changes []change) { x.commit(changes, nil) }

// commit mirrors a committed transaction's node and edge changes under one
// lock, so that no reader sees one without the other (a superseding node
// without its supersedes edge).
func (x *index) commit(changes []change, edges []edgeChange) {
	if len(changes) == 0 && len(edges) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.commitLocked(changes, edges, false)
}

// commitLocked mirrors changes (x.mu held); load is set for the rows the
// load read, which do not count as written meanwhile.
func (x *index) commitLocked(changes []change, edges []edgeChange, load bool) {
	x.applyEdges(edges)
	var batch map[string][]int          // model -> change indexes, for bulk vector adds
	olds := make([]*head, len(changes)) // the previous heads and gates, for the conversation index
	oldGates := make([]gate, len(changes))
	defer func() { x.convCommit(changes, olds, oldGates, load) }()
	for i := range changes {
		c := &changes[i]
		for int(c.rid) >= len(x.heads) {
			x.heads = append(x.heads, nil)
		}
		prev := x.heads[c.rid]
		if olds[i] = prev; prev != nil {
			oldGates[i] = x.gates[c.rid]
		}
		if x.loading && !load && x.touched != nil {
			x.touched[c.rid] = struct{}{}
			if prev == nil {
				// A node the load has not reached: mirror all of it, the
				// load will leave its row alone.
				c.text, c.vec = true, true
			}
		}
		x.count(prev, -1)
		if prev != nil && prev.standing() {
			pp := x.projectOf(prev)
			x.standing[pp] = slices.DeleteFunc(x.standing[pp], func(r uint32) bool { return r == c.rid })
		}
		if prev != nil && prev.id != c.n.ID {
			delete(x.byID, prev.id)
		}
		h := c.head
		if h == nil {
			h = x.head(&c.n)
		}
		x.heads[c.rid] = h
		x.setGate(c.rid, &c.n, h)
		now := x.scopeOfHead(h, &x.gates[c.rid])
		if prev != nil {
			old := x.scopeOfHead(prev, &oldGates[i])
			x.scopes.moveScope(c.rid, &old, &now)
		} else {
			x.scopes.moveScope(c.rid, nil, &now)
		}
		x.byID[c.n.ID] = c.rid
		x.count(h, +1)
		if h.standing() {
			hp := x.projectOf(h)
			list := x.standing[hp]
			at, _ := slices.BinarySearchFunc(list, h, func(r uint32, h *head) int { return x.compareStanding(x.heads[r], h) })
			x.standing[hp] = slices.Insert(list, at, c.rid)
		}
		if c.text {
			counts := c.counts
			if counts == nil {
				counts = docCounts(&c.n)
			}
			// The text indexed until now: the row this write replaced (its
			// terms are re-derived from it, see docterms.go); for the load,
			// a row already indexed is the same row read again (a standing
			// instruction, loaded first; a write since then changes the
			// fingerprint, and the lists are searched instead).
			var old map[string]int
			if prev != nil && c.was != nil {
				old = c.was
			} else if prev != nil && load {
				old = counts
			}
			x.lex.setCounts(c.rid, h.tenant, counts, old)
		}
		if c.vec {
			if prev != nil && prev.model != 0 {
				model := x.strs.str(prev.model)
				if fl := x.flat[model]; fl != nil {
					fl.remove(prev.id)
				} else if ix := x.vecs[model]; ix != nil {
					ix.Remove(prev.id)
				}
			}
			if len(c.n.Embedding) > 0 {
				fl := x.flat[c.n.EmbeddingModel]
				if fl == nil && x.loading && x.vecs[c.n.EmbeddingModel] == nil {
					// The graphs are built once every node is loaded.
					fl = newFlat(len(c.n.Embedding))
					x.flat[c.n.EmbeddingModel] = fl
				}
				if fl != nil {
					fl.add(c.n.ID, c.rid, c.n.Embedding, !x.bulk)
					continue
				}
				if batch == nil {
					batch = map[string][]int{}
				}
				batch[c.n.EmbeddingModel] = append(batch[c.n.EmbeddingModel], i)
			}
		}
	}
	for model, is := range batch {
		ix := x.vecs[model]
		if ix == nil {
			ix = vecindex.New(len(changes[is[0]].n.Embedding), x.vecOpts...)
			x.vecs[model] = ix
		}
		if len(is) == 1 {
			_ = ix.AddTagged(changes[is[0]].n.ID, changes[is[0]].rid, changes[is[0]].n.Embedding)
			continue
		}
		ids := make([]string, len(is))
		rids := make([]uint32, len(is))
		vs := make([][]float32, len(is))
		for j, i := range is {
			ids[j], rids[j], vs[j] = changes[i].n.ID, changes[i].rid, changes[i].n.Embedding
		}
		_ = ix.AddBatchTagged(ids, rids, vs)
	}
}

// loadChunk mirrors nodes read from the database while loading, but those
// a write mirrored since the load began (touched: their mirrored state is
// at least as new as the one read): as committed writes, and their vectors
// into the exact-search sets that the graphs are built from once every
// node is loaded. A node the load mirrors twice (a standing instruction,
// then its chunk) is applied again harmlessly.
func (x *index) loadChunk(changes []change) {
	// Tokenising is most of a node's cost: done before the lock, so that
	// reads (the turns served while the memories load) wait only for the
	// postings to be appended, and a batch at a time, so that no read waits
	// for a whole chunk.
	for i := range changes {
		c := &changes[i]
		c.counts = docCounts(&c.n)
		c.head = x.head(&c.n)
		if len(c.n.Embedding) > 0 {
			c.unit = unit(c.n.Embedding)
		}
	}
	for len(changes) > 0 {
		n := min(loadBatch, len(changes))
		x.loadBatch(changes[:n])
		changes = changes[n:]
		if len(changes) > 0 {
			runtime.Gosched() // a read waiting for the lock gets it first
		}
	}
}

// loadBatch is the mirroring of loadChunk, for up to loadBatch nodes under
// one hold of the write lock.
func (x *index) loadBatch(changes []change) {
	x.mu.Lock()
	defer x.mu.Unlock()
	keep := changes[:0]
	for _, c := range changes {
		if _, ok := x.touched[c.rid]; !ok {
			keep = append(keep, c)
		}
	}
	changes = keep
	x.commitLocked(changes, nil, true)
	for i := range changes {
		n := &changes[i].n
		if len(n.Embedding) == 0 {
			continue
		}
		fl := x.flat[n.EmbeddingModel]
		if fl == nil {
			fl = newFlat(len(n.Embedding))
			x.flat[n.EmbeddingModel] = fl
		}
		if len(n.Embedding) != fl.dim {
			continue // cannot happen: writes check dimensions
		}
		fl.addUnit(n.ID, changes[i].rid, changes[i].unit, nil)
	}
}

// loadBatch is how many loaded nodes are mirrored under one hold of the
// index lock (a chunk read from the database is 1,000 by default).
const loadBatch = 100

// checkVector reports ErrInvalid for a vector the index of model cannot take.
func (x *index) checkVector(model string, vec []float32) error {
	if model == "" {
		return fmt.Errorf("%w: an embedding needs the name of its model", memory.ErrInvalid)
	}
	if len(vec) == 0 {
		return fmt.Errorf("%w: empty embedding", memory.ErrInvalid)
	}
	var norm float64
	for _, v := range vec {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("%w: the embedding holds a value that is not a finite number", memory.ErrInvalid)
		}
		norm += float64(v) * float64(v)
	}
	if norm == 0 {
		return fmt.Errorf("%w: zero embedding", memory.ErrInvalid)
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if d := x.dim(model); d > 0 && d != len(vec) {
		return fmt.Errorf("%w: model %s makes %d-dimension vectors, got %d", memory.ErrInvalid, model, d, len(vec))
	}
	return nil
}

// dim is the dimension of model's vectors, 0 when none is indexed.
// checkQuery reports whether model has vectors to compare vec with, and
// refuses a query of another dimension (x.mu held).
func (x *index) checkQuery(model string, vec []float32) (bool, error) {
	d := x.dim(model)
	if d == 0 {
		return false, nil
	}
	if len(vec) != d {
		return false, fmt.Errorf("%w: model %s makes %d-dimension vectors, the query has %d", memory.ErrInvalid, model, d, len(vec))
	}
	return true, nil
}

func (x *index) dim(model string) int {
	if fl := x.flat[model]; fl != nil {
		return fl.dim
	}
	if ix := x.vecs[model]; ix != nil {
		return ix.Dim()
	}
	return 0
}
