package vecindex

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// Errors returned by Add and AddBatch; check them with errors.Is.
var (
	// ErrDimension means a vector's length differs from the index dimension.
	ErrDimension = errors.New("vecindex: wrong vector dimension")
	// ErrBadVector means a vector has zero length or holds NaN or infinite
	// values, so it has no direction to compare by cosine.
	ErrBadVector = errors.New("vecindex: vector is zero or not finite")
	// ErrEmptyID means an empty id was given.
	ErrEmptyID = errors.New("vecindex: empty id")
)

// Hit is one search result.
type Hit struct {
	ID    string
	Tag   uint32  // the tag given with the vector (AddTagged), 0 otherwise
	Score float32 // cosine similarity in [-1, 1], higher is closer
}

// Defaults for the tunable parameters (see doc.go for the trade-offs).
const (
	DefaultM              = 16
	DefaultEfConstruction = 100
	DefaultEfSearch       = 128
	DefaultExactThreshold = 2000
)

type config struct {
	m, efConstruction, efSearch int
	exactThreshold              int
	workers                     int
	seed                        uint64
	exactWalk                   bool
	codesOnly                   bool
}

// Option tunes an Index. Non-positive values keep the default.
type Option func(*config)

// WithM sets the number of graph links per node on the upper layers; the
// bottom layer keeps up to 2*M. More links raise recall and memory use.
func WithM(m int) Option { return func(c *config) { setPos(&c.m, m) } }

// WithEfConstruction sets the candidate list size used while inserting.
// Larger builds a better graph, slower.
func WithEfConstruction(ef int) Option { return func(c *config) { setPos(&c.efConstruction, ef) } }

// WithEfSearch sets the candidate list size used while searching (raised to
// k when k is larger). Larger raises recall and latency.
func WithEfSearch(ef int) Option { return func(c *config) { setPos(&c.efSearch, ef) } }

// WithExactThreshold sets the number of live vectors below which Search scans
// every vector instead of walking the graph (exact and, at that size, fast).
// Use a very large value to always search exactly.
func WithExactThreshold(n int) Option { return func(c *config) { setPos(&c.exactThreshold, n) } }

// WithBuildWorkers sets how many goroutines AddBatch uses to link new
// vectors into the graph (default GOMAXPROCS).
func WithBuildWorkers(n int) Option { return func(c *config) { setPos(&c.workers, n) } }

// WithExactWalk makes Search walk the graph on the float32 vectors. By
// default the walk compares int8 codes of the vectors (a quarter of the
// memory to read per node, see quantize) and only the beam it ends with is
// scored on the float32 vectors: about a third faster at 100,000 vectors
// for the same recall, for dim bytes more per vector.
func WithExactWalk() Option { return func(c *config) { c.exactWalk = true } }

// WithCodesOnly keeps only the int8 codes of the vectors (and their
// scales), not the float32 vectors: 4*dim bytes less per vector (1,536 at
// 384 dimensions, of about 2,380). Every similarity is then computed on the
// codes: to a query, the float32 unit query times the code and its scale
// (the query is not quantised: the beam's final scores, the exact scan,
// Similarities); between stored vectors (inserts, cleanup), code times
// code. Scores differ from the exact cosines by the quantisation error (the
// scale is the largest magnitude / 127: about 1e-3 on 384-dimension
// embeddings); TestCodesOnlyRecall measures the recall. Ignored with
// WithExactWalk, which keeps no codes.
func WithCodesOnly() Option { return func(c *config) { c.codesOnly = true } }

// WithSeed fixes the random source that draws node levels, for reproducible
// graphs (parallel AddBatch still varies with scheduling).
func WithSeed(seed uint64) Option { return func(c *config) { c.seed = seed } }

func setPos(dst *int, v int) {
	if v > 0 {
		*dst = v
	}
}

// Index is an in-memory approximate nearest-neighbour index for cosine
// similarity. All methods are safe for concurrent use: searches run in
// parallel with each other, writes are exclusive.
type Index struct {
	dim int
	cfg config

	mu    sync.RWMutex
	vecs  []float32 // unit vectors, slot*dim
	nodes []*node   // per slot
	// Per slot, beside the nodes: the walk's filter reads these for every
	// node it meets, and dense arrays spare it a pointer chase each.
	state []slotState
	tags  []uint32
	// The int8 codes of the unit vectors (slot*dim) and their scales, for
	// the walk (nil with WithExactWalk).
	codes  []int8
	scales []float32
	// Every slot's layer-0 links, m0 entries per slot (graph.m0), unused
	// ones noLink: the walk reads a slot's row (two cache lines) instead of
	// following node -> layer lists -> links, three dependent reads. Each
	// node's friends[0] is a slice of its row with capacity m0, which no
	// list exceeds, so the writers of friends keep the row current
	// (setLinks and the resets refill the tail with noLink). Rows move
	// when the slab grows; reserveRows points the lists at the new one.
	links0 []uint32
	byID   map[string]uint32
	free   []uint32 // slots ready for reuse
	live   int      // vectors that can be returned
	tombs  int      // removed vectors still linked in the graph

	g graph
}

type slotState uint8

const (
	slotFree slotState = iota
	slotLive
	slotTomb // removed, still linked in the graph until cleanup
)

type node struct {
	mu      sync.Mutex // guards friends during parallel AddBatch
	id      string
	level   int
	friends [][]uint32  // per layer 0..level: linked slots
	sims    [][]float32 // per layer: similarity to each linked slot
}

// New returns an empty index for vectors of dim dimensions. It panics when
// dim is not positive (a programming error).
func New(dim int, opts ...Option) *Index {
	if dim <= 0 {
		panic(fmt.Sprintf("vecindex: dimension %d, want > 0", dim))
	}
	cfg := config{
		m:              DefaultM,
		efConstruction: DefaultEfConstruction,
		efSearch:       DefaultEfSearch,
		exactThreshold: DefaultExactThreshold,
		workers:        runtime.GOMAXPROCS(0),
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.m < 2 {
		cfg.m = 2
	}
	seed := cfg.seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	ix := &Index{dim: dim, cfg: cfg, byID: make(map[string]uint32)}
	ix.g.init(cfg, seed)
	return ix
}

// Dim returns the vector dimension the index was created with.
func (ix *Index) Dim() int { return ix.dim }

// Len returns the number of vectors that Search can return.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.live
}

// Footprint estimates the heap bytes the index holds, by part: the
// vectors (float32 unit vectors unless WithCodesOnly, int8 codes and
// their scales), the graph (per slot its node, layer lists and cached
// similarities, the layer-0 rows, state and tag), and the ids (the id ->
// slot map at about 1.5 entries of a string header and a slot each, the
// nodes' id strings are the caller's). Capacities, not lengths: what is
// allocated. For resident-memory accounting (BenchmarkResidentBytes).
func (ix *Index) Footprint() (vectors, graph, ids int) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	vectors = cap(ix.vecs)*4 + cap(ix.codes) + cap(ix.scales)*4
	graph = cap(ix.links0)*4 + cap(ix.state) + cap(ix.tags)*4 + cap(ix.nodes)*8 + cap(ix.free)*4
	for _, nd := range ix.nodes {
		if nd == nil {
			continue
		}
		graph += int(unsafe.Sizeof(*nd)) + cap(nd.friends)*24 + cap(nd.sims)*24
		for l := range nd.friends {
			if l > 0 { // layer 0's list is a row of links0
				graph += cap(nd.friends[l]) * 4
			}
			graph += cap(nd.sims[l]) * 4
		}
	}
	ids = len(ix.byID) * (16 + 4) * 3 / 2
	return vectors, graph, ids
}

// Add stores vec under id, replacing any vector already stored under id.
// The vector is copied and normalised; its length must equal Dim.
func (ix *Index) Add(id string, vec []float32) error { return ix.AddTagged(id, 0, vec) }

// AddTagged is Add with a tag: a number of the caller's (the SQLite store
// gives its row id) that SearchTagged's filter receives instead of the id,
// so that a filter needs no string look-up per node.
func (ix *Index) AddTagged(id string, tag uint32, vec []float32) error {
	if id == "" {
		return ErrEmptyID
	}
	if _, err := ix.unit(vec); err != nil {
		return fmt.Errorf("add %q: %w", id, err)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.removeLocked(id)
	slot := ix.allocLocked(id, tag, vec)
	ix.g.insert(ix, slot)
	ix.maybeCleanupLocked()
	return nil
}

// AddBatch adds many vectors at once, linking them into the graph with
// several goroutines (see WithBuildWorkers); it is the fast path for loading
// a store at start-up. ids and vecs are parallel slices; a later duplicate id
// wins, as with repeated Add. Every vector is checked before any is added, so
// on error the index is unchanged; the error names every bad entry (up to a
// few) by position.
func (ix *Index) AddBatch(ids []string, vecs [][]float32) error {
	return ix.AddBatchTagged(ids, nil, vecs)
}

// AddBatchTagged is AddBatch with a tag per vector (see AddTagged); tags
// is parallel to ids, or nil for tag 0 throughout.
func (ix *Index) AddBatchTagged(ids []string, tags []uint32, vecs [][]float32) error {
	if len(ids) != len(vecs) {
		return fmt.Errorf("vecindex: add batch: %d ids but %d vectors", len(ids), len(vecs))
	}
	if tags != nil && len(tags) != len(ids) {
		return fmt.Errorf("vecindex: add batch: %d ids but %d tags", len(ids), len(tags))
	}
	check := make([]float32, ix.dim)
	var errs []error
	for i, v := range vecs {
		var err error
		if ids[i] == "" {
			err = ErrEmptyID
		} else {
			err = ix.unitInto(check, v)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("entry %d (%q): %w", i, ids[i], err))
			if len(errs) == 10 {
				errs = append(errs, errors.New("further entries not checked"))
				break
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("add batch: %w", errors.Join(errs...))
	}
	// Later duplicates win.
	last := make(map[string]int, len(ids))
	for i, id := range ids {
		last[id] = i
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.growLocked(len(last) - len(ix.free))
	slots := make([]uint32, 0, len(last))
	for i, id := range ids {
		if last[id] != i {
			continue
		}
		ix.removeLocked(id)
		var tag uint32
		if tags != nil {
			tag = tags[i]
		}
		slots = append(slots, ix.allocLocked(id, tag, vecs[i]))
	}
	ix.g.insertMany(ix, slots)
	ix.maybeCleanupLocked()
	return nil
}

// Reserve makes room for n more vectors than the index holds, so that
// adding them batch by batch (a store's load adds 2,000 at a time) grows
// its storage once and exactly: grown batch by batch, each array grows by
// a quarter when full and keeps what it has not used (about 65 bytes a
// vector at 384 dimensions), and is copied at every growth.
func (ix *Index) Reserve(n int) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.growLocked(n - len(ix.free))
}

// growLocked makes room for extra more slots, growing storage once,
// exactly, when it lacks room (the write lock held).
func (ix *Index) growLocked(extra int) {
	if extra <= 0 {
		return
	}
	if !ix.codesOnly() {
		ix.vecs = slices.Grow(ix.vecs, extra*ix.dim)
	}
	ix.nodes = slices.Grow(ix.nodes, extra)
	ix.reserveRows(extra)
	ix.state = slices.Grow(ix.state, extra)
	ix.tags = slices.Grow(ix.tags, extra)
	if !ix.cfg.exactWalk {
		ix.codes = slices.Grow(ix.codes, extra*ix.dim)
		ix.scales = slices.Grow(ix.scales, extra)
	}
}

// Remove deletes the vector stored under id; unknown ids are ignored.
func (ix *Index) Remove(id string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.removeLocked(id) {
		ix.maybeCleanupLocked()
	}
}

// Similarities returns the exact cosine similarity of query to the vector
// of each id, in the order of ids; an id without a vector is left out, and
// a query of the wrong dimension or with zero length gets nil. Hits carry
// their tags.
func (ix *Index) Similarities(query []float32, ids []string) []Hit {
	q, err := ix.unit(query)
	if err != nil || len(ids) == 0 {
		return nil
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]Hit, 0, len(ids))
	for _, id := range ids {
		if slot, ok := ix.byID[id]; ok && ix.state[slot] == slotLive {
			out = append(out, Hit{ID: id, Tag: ix.tags[slot], Score: ix.qdot(q, slot)})
		}
	}
	return out
}

// Search returns up to k hits closest to query by cosine similarity, best
// first (ties broken by id). When accept is not nil only ids for which it
// returns true are returned; Search keeps looking (and falls back to a full
// scan) until it has k accepted hits or has seen every vector. accept is
// called with the index read-locked: it must be fast and must not call back
// into the index. A query of the wrong dimension or with zero length has no
// neighbours: Search returns nil (check Dim first to tell the cases apart).
func (ix *Index) Search(query []float32, k int, accept func(id string) bool) []Hit {
	var f func(slot uint32) bool
	if accept != nil {
		f = func(slot uint32) bool { return accept(ix.nodes[slot].id) }
	}
	return ix.search(query, k, f)
}

// SearchTagged is Search with a filter on the vectors' tags (AddTagged):
// the cheap filter for callers that keep their own per-row state.
func (ix *Index) SearchTagged(query []float32, k int, accept func(tag uint32) bool) []Hit {
	var f func(slot uint32) bool
	if accept != nil {
		f = func(slot uint32) bool { return accept(ix.tags[slot]) }
	}
	return ix.search(query, k, f)
}

func (ix *Index) search(query []float32, k int, accept func(slot uint32) bool) []Hit {
	if k <= 0 {
		return nil
	}
	q, err := ix.unit(query)
	if err != nil {
		return nil
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.live == 0 {
		return nil
	}
	var res []scored
	if ix.live < ix.cfg.exactThreshold || !ix.g.ready() {
		res = ix.exactLocked(q, k, accept)
	} else {
		res = ix.g.search(ix, q, k, accept)
	}
	return ix.hits(res)
}

func (ix *Index) hits(res []scored) []Hit {
	if len(res) == 0 {
		return nil
	}
	out := make([]Hit, len(res))
	for i, r := range res {
		out[i] = Hit{ID: ix.nodes[r.slot].id, Tag: ix.tags[r.slot], Score: r.sim}
	}
	slices.SortFunc(out, func(a, b Hit) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// exactLocked scans every live vector; accept is asked before the distance
// is computed, so a selective filter makes the scan cheaper.
func (ix *Index) exactLocked(q []float32, k int, accept func(slot uint32) bool) []scored {
	if ix.codesOnly() {
		return ix.exactCodesLocked(q, k, accept)
	}
	// One vector at a time: a sequential scan streams well through the
	// prefetcher, and dot beats dot4 here (dot4 pays off on scattered
	// vectors, see dot.go).
	var top minHeap
	top.items = make([]scored, 0, k+1)
	for slot, st := range ix.state {
		if st != slotLive {
			continue
		}
		if accept != nil && !accept(uint32(slot)) {
			continue
		}
		s := ix.qdot(q, uint32(slot))
		if top.len() < k {
			top.push(scored{sim: s, slot: uint32(slot)})
		} else if s > top.peek().sim {
			top.replaceTop(scored{sim: s, slot: uint32(slot)})
		}
	}
	return top.items
}

// exactCodesLocked is exactLocked on the codes alone (WithCodesOnly), in
// two passes: the integer kernel (the query quantised too) over every
// accepted code keeps the best rescoreFactor*k+rescoreExtra, then those
// are scored with the float32 query (qdot) and the best k kept. The
// integer pass is eight times faster than qdot's Go loop; the candidates
// it keeps cover what the query's own quantisation error may reorder.
func (ix *Index) exactCodesLocked(q []float32, k int, accept func(slot uint32) bool) []scored {
	qcode := make([]int8, ix.dim)
	qscale := quantize(qcode, q)
	keep := rescoreFactor*k + rescoreExtra
	var top minHeap
	top.items = make([]scored, 0, keep+1)
	for slot, st := range ix.state {
		if st != slotLive {
			continue
		}
		if accept != nil && !accept(uint32(slot)) {
			continue
		}
		s := qscale * ix.scales[slot] * float32(dotI8(qcode, ix.code(uint32(slot))))
		if top.len() < keep {
			top.push(scored{sim: s, slot: uint32(slot)})
		} else if s > top.peek().sim {
			top.replaceTop(scored{sim: s, slot: uint32(slot)})
		}
	}
	cands := top.items
	for i := range cands {
		cands[i].sim = ix.qdot(q, cands[i].slot)
	}
	slices.SortFunc(cands, bySimDesc)
	return cands[:min(k, len(cands))]
}

// The exact scan on codes rescores the best rescoreFactor*k+rescoreExtra
// of its integer pass (exactCodesLocked).
const (
	rescoreFactor = 4
	rescoreExtra  = 16
)

func (ix *Index) unit(vec []float32) ([]float32, error) {
	u := make([]float32, ix.dim)
	if err := ix.unitInto(u, vec); err != nil {
		return nil, err
	}
	return u, nil
}

func (ix *Index) unitInto(dst, vec []float32) error {
	if len(vec) != ix.dim {
		return fmt.Errorf("%w: got %d, want %d", ErrDimension, len(vec), ix.dim)
	}
	if !normalize(dst, vec) {
		return ErrBadVector
	}
	return nil
}

func (ix *Index) code(slot uint32) []int8 {
	off := int(slot) * ix.dim
	return ix.codes[off : off+ix.dim : off+ix.dim]
}

func (ix *Index) vec(slot uint32) []float32 {
	off := int(slot) * ix.dim
	return ix.vecs[off : off+ix.dim : off+ix.dim]
}

// codesOnly reports whether the index keeps the codes alone (WithCodesOnly).
func (ix *Index) codesOnly() bool { return ix.cfg.codesOnly && !ix.cfg.exactWalk }

// qdot is the similarity of unit query q to slot's vector: exact, or the
// query times the code with WithCodesOnly.
func (ix *Index) qdot(q []float32, slot uint32) float32 {
	if ix.codesOnly() {
		return ix.scales[slot] * dotF32I8(q, ix.code(slot))
	}
	return dot(q, ix.vec(slot))
}

// pairDot is the similarity of two stored vectors: exact, or code times
// code with WithCodesOnly.
func (ix *Index) pairDot(a, b uint32) float32 {
	if ix.codesOnly() {
		return ix.scales[a] * ix.scales[b] * float32(dotI8(ix.code(a), ix.code(b)))
	}
	return dot(ix.vec(a), ix.vec(b))
}

// allocLocked stores vec (already checked) normalised in a free or new slot
// and marks it live. The caller links it into the graph.
func (ix *Index) allocLocked(id string, tag uint32, vec []float32) uint32 {
	var slot uint32
	if n := len(ix.free); n > 0 {
		slot = ix.free[n-1]
		ix.free = ix.free[:n-1]
	} else {
		slot = uint32(len(ix.nodes))
		ix.nodes = append(ix.nodes, &node{})
		ix.growRows(1)
		ix.state = append(ix.state, slotFree)
		ix.tags = append(ix.tags, 0)
		if !ix.codesOnly() {
			ix.vecs = append(ix.vecs, make([]float32, ix.dim)...)
		}
		if !ix.cfg.exactWalk {
			ix.codes = append(ix.codes, make([]int8, ix.dim)...)
			ix.scales = append(ix.scales, 0)
		}
	}
	if ix.codesOnly() {
		u := make([]float32, ix.dim)
		normalize(u, vec)
		ix.scales[slot] = quantize(ix.code(slot), u)
	} else {
		normalize(ix.vec(slot), vec)
		if !ix.cfg.exactWalk {
			ix.scales[slot] = quantize(ix.code(slot), ix.vec(slot))
		}
	}
	nd := ix.nodes[slot]
	nd.id = id
	ix.tags[slot] = tag
	ix.state[slot] = slotLive
	nd.level = 0
	nd.friends, nd.sims = nil, nil
	ix.clearRow(slot)
	ix.byID[id] = slot
	ix.live++
	return slot
}

// removeLocked turns id's slot into a tombstone and reports whether id was
// present.
func (ix *Index) removeLocked(id string) bool {
	slot, ok := ix.byID[id]
	if !ok {
		return false
	}
	delete(ix.byID, id)
	ix.state[slot] = slotTomb
	ix.nodes[slot].id = ""
	ix.live--
	ix.tombs++
	return true
}

// noLink marks the unused entries of a links0 row.
const noLink = ^uint32(0)

// row0 is slot's layer-0 row (ix.mu write-held, or read-held when nothing
// links concurrently).
func (ix *Index) row0(slot uint32) []uint32 {
	m0 := ix.g.m0
	o := int(slot) * m0
	return ix.links0[o : o+m0 : o+m0]
}

// links0Of is slot's layer-0 links, read from its row.
func (ix *Index) links0Of(slot uint32) []uint32 {
	row := ix.row0(slot)
	n := len(row)
	for n > 0 && row[n-1] == noLink {
		n--
	}
	return row[:n]
}

// clearRow empties slot's row.
func (ix *Index) clearRow(slot uint32) {
	row := ix.row0(slot)
	for i := range row {
		row[i] = noLink
	}
}

// growRows adds n empty rows (one per new slot).
func (ix *Index) growRows(n int) {
	ix.reserveRows(n)
	for range n * ix.g.m0 {
		ix.links0 = append(ix.links0, noLink)
	}
}

// reserveRows makes room for n more rows without moving them later.
func (ix *Index) reserveRows(n int) {
	if cap(ix.links0)-len(ix.links0) >= n*ix.g.m0 {
		return
	}
	ix.links0 = slices.Grow(ix.links0, max(n*ix.g.m0, len(ix.links0)/4))
	// The rows moved: point every layer-0 list at its new row.
	for s, nd := range ix.nodes {
		if len(nd.friends) > 0 {
			nd.friends[0] = ix.row0(uint32(s))[:len(nd.friends[0])]
		}
	}
}
