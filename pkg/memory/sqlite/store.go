package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/vecindex"
	gojson "github.com/goccy/go-json"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver
)

// Option configures Open.
type Option func(*options)

type options struct {
	now         func() time.Time
	busyTimeout time.Duration
	vecOpts     []vecindex.Option
	background  bool
	loadChunk   int
	loadHook    func(loaded int)
	bulk        bool
	projectWait time.Duration
	textCache   int
}

// WithClock makes the store read the time from now (tests drive a fake clock).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithBusyTimeout sets how long a statement waits for a lock (default 10 s).
func WithBusyTimeout(d time.Duration) Option { return func(o *options) { o.busyTimeout = d } }

// WithVectorIndex passes options to every per-model vector index.
func WithVectorIndex(opts ...vecindex.Option) Option {
	return func(o *options) { o.vecOpts = append(o.vecOpts, opts...) }
}

// WithBackgroundLoad makes Open return as soon as the schema is migrated and
// load the memories into the in-memory indexes in the background, in chunks
// in row order (reads and writes go on meanwhile).
// Until LoadStatus reports Nodes, reads served from memory see the memories
// loaded so far: the process answers at once instead of after the whole
// load (seconds per 100,000 memories). Without it Open returns once every
// memory is loaded; either way the vector graphs are built in the
// background afterwards.
func WithBackgroundLoad() Option { return func(o *options) { o.background = true } }

// WithLoadChunk sets how many memories are loaded per step (default 1,000:
// reads wait for the index lock while a chunk is mirrored, 10-50 ms).
func WithLoadChunk(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.loadChunk = n
		}
	}
}

// WithProjectWait sets how long a read waits at most, during a background
// load, for the memories of its project, which the load then loads first
// (default DefaultProjectWait).
func WithProjectWait(d time.Duration) Option { return func(o *options) { o.projectWait = d } }

// WithLoadHook calls fn on the loading goroutine after each chunk of
// memories is loaded, with the number loaded so far, outside every lock
// (tests hold the load at a known point with it).
func WithLoadHook(fn func(loaded int)) Option { return func(o *options) { o.loadHook = fn } }

// WithBulkWrites opens the store for writing many memories at once (seeding
// a large store, benchmark fixtures): vectors are kept for exact search only
// and no vector graph is built, so that a write costs what the database
// costs instead of a graph insertion per vector (at 100,000 vectors most of
// the time). Vector reads scan every vector. The next Open without it builds
// the graphs as usual.
func WithBulkWrites() Option { return func(o *options) { o.bulk = true } }

// Store is the SQLite backend of memory.Store.
type Store struct {
	db *sql.DB
	// stmts caches prepared statements by text (stmt): the per-turn writes
	// and reads parsed their SQL on every call.
	stmts  sync.Map
	now    func() time.Time
	idx    *index
	wmu    sync.Mutex // serialises write transactions so the index follows commit order
	unlock func()
	once   sync.Once
	closed atomic.Bool // set by Close: the reads served from memory fail too
	path   string

	texts       *textCache       // bodies read from the file (texts.go)
	briefs      memory.BriefMemo // sessions whose briefing flag is known to be taken (BriefOnce)
	order       *loadOrder       // the background load's plan by project (nil: not loading in the background)
	projectWait time.Duration    // WithProjectWait

	stop       chan struct{}  // closed by Close: stops the background load and index build
	bg         sync.WaitGroup // the background load and index build
	loaded     chan struct{}  // closed when every node is loaded (or loading failed: loadErr)
	indexed    chan struct{}  // closed when every vector index is built
	opened     time.Time
	ld         loadState
	chunk      int
	hook       func(loaded int)
	background bool // WithBackgroundLoad

	wal walSync // Durable (durable.go)
}

// loadState is what LoadStatus reports.
type loadState struct {
	mu          sync.Mutex
	loaded      int
	total       int
	nodesIn     time.Duration
	vectorsIn   time.Duration
	collections int           // run by the background load (collectNearGoal)
	collectedIn time.Duration // their time
	err         error
}

var (
	_ memory.Store        = (*Store)(nil)
	_ memory.VectorScorer = (*Store)(nil)
)

// ErrClosed is the error of a read served from memory after Close (the
// reads that query fail with database/sql's own error).
var ErrClosed = errors.New("store is closed")

// memRead is the check of a read served from the in-memory index: it fails
// like a query would on a closed store or a cancelled context.
func (s *Store) memRead(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// Open opens (creating when missing) the store at path, migrates its schema
// and loads the in-memory indexes. Only one process may open a path at a time.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	o := options{now: time.Now, busyTimeout: 10 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if path == "" {
		return nil, fmt.Errorf("sqlite: open: %w: empty path", memory.ErrInvalid)
	}
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	if err := private(path); err != nil {
		unlock()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.busyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Add("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		unlock()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	if o.loadChunk == 0 {
		o.loadChunk = 1000
	}
	if o.textCache == 0 {
		o.textCache = DefaultTextCache
	}
	s := &Store{db: db, now: o.now, idx: newIndex(append([]vecindex.Option{vecindex.WithCodesOnly()}, o.vecOpts...)), unlock: unlock, path: path,
		stop: make(chan struct{}), loaded: make(chan struct{}), indexed: make(chan struct{}),
		opened: time.Now(), chunk: o.loadChunk, hook: o.loadHook, background: o.background,
		texts: newTextCache(o.textCache)}
	s.idx.loading, s.idx.bulk = true, o.bulk
	if o.background {
		s.order, s.projectWait = newLoadOrder(), o.projectWait
		if s.projectWait <= 0 {
			s.projectWait = DefaultProjectWait
		}
	}
	if err := migrate(ctx, db); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if o.background {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			if s.loadNodes(context.Background()) && !o.bulk {
				s.buildAll()
			}
		}()
		return s, nil
	}
	if !s.loadNodes(ctx) {
		err := s.LoadStatus().Err
		_ = s.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if o.bulk {
		return s, nil // indexed stays open: no graph is built
	}
	s.idx.mu.RLock()
	none := len(s.idx.flat) == 0
	s.idx.mu.RUnlock()
	if none {
		// No vectors to index: the store is fully loaded on return (an
		// empty store's readiness is never "vector index loading").
		s.buildAll()
		return s, nil
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		s.buildAll()
	}()
	return s, nil
}

// Close closes the database and releases the data file. It is safe to call
// more than once.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		s.bg.Wait()
		s.stmts.Range(func(_, st any) bool {
			_ = st.(*sql.Stmt).Close()
			return true
		})
		err = s.db.Close()
		s.closeWAL()
		s.unlock()
	})
	return err
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// errStopped is the load's error when Close stopped it.
var errStopped = errors.New("stopped by Close")

// loadNodes fills the in-memory index from the database: the live edges
// (under the write lock), then the nodes in chunks in row order. A chunk is
// read, decoded and tokenised without any lock and mirrored under the index
// lock, 100 nodes per hold (a turn served meanwhile waits for no more),
// leaving out the rows a write mirrored since the load began (index.touched:
// a write to a node not loaded yet mirrors all of it), so a write lands
// either before the chunk is mirrored (and the chunk leaves its row alone)
// or after (and applies over the chunk's row as over any loaded node).
// Rows added after the load began are mirrored by their writes. Neither
// writes nor reads wait for a chunk's read. It reports false when loading
// failed or was stopped (LoadStatus().Err); loaded is closed either way.
func (s *Store) loadNodes(ctx context.Context) bool {
	defer close(s.loaded)
	fail := func(err error) bool {
		s.ld.mu.Lock()
		s.ld.err = err
		s.ld.mu.Unlock()
		return false
	}
	s.wmu.Lock()
	err := s.loadEdges(ctx)
	var total int
	var last int64
	if err == nil {
		err = s.db.QueryRowContext(ctx, `SELECT count(*), COALESCE(max(rid), 0) FROM nodes`).Scan(&total, &last)
	}
	s.wmu.Unlock()
	if err != nil {
		return fail(fmt.Errorf("load nodes: %w", err))
	}
	s.ld.mu.Lock()
	s.ld.total = total
	s.ld.mu.Unlock()
	s.idx.reserve(int(last))
	s.idx.mu.Lock()
	s.idx.scopes.beginLoad()
	s.idx.mu.Unlock()
	defer func() { // before the load is announced (s.loaded closed), failed or not
		s.idx.mu.Lock()
		s.idx.scopes.settle()
		s.idx.mu.Unlock()
	}()
	if s.background {
		// Only worth it when something is served before the load ends:
		// the rows by project, so that a read can ask for its project
		// first, then the standing instructions, then the projects.
		defer s.order.end()
		rows, err := s.projectRows(ctx, last)
		if err != nil {
			return fail(fmt.Errorf("load nodes: %w", err))
		}
		s.order.plan(rows)
		if err := s.loadStanding(ctx); err != nil {
			return fail(fmt.Errorf("load standing instructions: %w", err))
		}
		if !s.loadByProject(ctx, fail) {
			return false
		}
		last = 0 // loaded: the loop below has nothing to do
	}
	var after int64
	loaded := 0
	for after < last {
		select {
		case <-s.stop:
			return fail(errStopped)
		default:
		}
		if s.background {
			if d, ok := collectNearGoal(); ok {
				s.ld.mu.Lock()
				s.ld.collections++
				s.ld.collectedIn += d
				s.ld.mu.Unlock()
			}
		}
		n, next, err := s.loadChunk(ctx, after, last)
		if err != nil {
			return fail(fmt.Errorf("load nodes: %w", err))
		}
		if n == 0 {
			break
		}
		after = next
		loaded += n
		s.ld.mu.Lock()
		s.ld.loaded = loaded
		s.ld.mu.Unlock()
		if s.hook != nil {
			s.hook(loaded)
		}
	}
	s.idx.mu.Lock()
	s.idx.loading = s.idx.bulk // bulk writes: every vector stays in the exact-search sets
	s.idx.touched = nil
	s.idx.pruneStrings() // an erasure while the load ran, rows the load read and left
	s.idx.mu.Unlock()
	s.idx.trim()
	s.idx.sortConversations()
	s.ld.mu.Lock()
	s.ld.nodesIn = time.Since(s.opened)
	s.ld.mu.Unlock()
	return true
}

// loadByProject loads the planned rows project by project, the projects
// reads ask for first (loadOrder), in chunks of s.chunk.
func (s *Store) loadByProject(ctx context.Context, fail func(error) bool) bool {
	loaded := 0
	for {
		select {
		case <-s.stop:
			return fail(errStopped)
		default:
		}
		if d, ok := collectNearGoal(); ok {
			s.ld.mu.Lock()
			s.ld.collections++
			s.ld.collectedIn += d
			s.ld.mu.Unlock()
		}
		p, part := s.order.take(s.chunk, false)
		if part == nil {
			return true
		}
		if err := s.loadRids(ctx, int64s(part)); err != nil {
			return fail(fmt.Errorf("load nodes: %w", err))
		}
		s.chunkLoaded(p)
		loaded += len(part)
		s.ld.mu.Lock()
		s.ld.loaded = loaded
		s.ld.mu.Unlock()
		if s.hook != nil {
			s.hook(loaded)
		}
	}
}

// Markers of a standing-instruction candidate in a node's document (as
// encoding/json writes memory.Node): memory.IsStanding needs one of them.
var (
	markUser   = []byte(`"asserted_by":"user"`)
	markPinned = []byte(`"pinned":true`)
)

// loadStanding loads the candidate standing instructions first, so that
// every turn carries the user's rules while the rest loads: one read of
// every document without decoding it (a byte search for the markers, no
// lock held), then the candidates read and mirrored under the write lock,
// in chunks. A node that becomes standing after the search is mirrored by
// its write; its chunk loads every candidate again later, harmlessly.
func (s *Store) loadStanding(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT rid, doc FROM nodes`)
	if err != nil {
		return err
	}
	var rids []any
	seen := 0
	for rows.Next() {
		var rid int64
		var doc sql.RawBytes
		if err := rows.Scan(&rid, &doc); err != nil {
			rows.Close()
			return err
		}
		if seen++; seen%4096 == 0 && s.order != nil {
			// A read waiting for its project does not wait for the
			// search of every document.
			if _, err := s.loadAsked(ctx); err != nil {
				rows.Close()
				return err
			}
		}
		if bytes.Contains(doc, markUser) || bytes.Contains(doc, markPinned) {
			rids = append(rids, rid)
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return err
	}
	for len(rids) > 0 {
		part := rids[:min(chunk, len(rids))]
		rids = rids[len(part):]
		if err := s.loadRids(ctx, part); err != nil {
			return err
		}
	}
	return nil
}

// loadRids reads and mirrors the nodes of rids.
func (s *Store) loadRids(ctx context.Context, rids []any) error {
	rows, err := s.db.QueryContext(ctx, `SELECT n.rid, `+nodeCols+` FROM `+nodeFrom+` WHERE n.rid IN (`+placeholders(len(rids))+`)`, rids...)
	if err != nil {
		return err
	}
	defer rows.Close()
	changes := make([]change, 0, len(rids))
	for rows.Next() {
		var rid int64
		n, err := scanNode(rows, &rid)
		if err != nil {
			return err
		}
		changes = append(changes, change{rid: uint32(rid), n: n, text: true})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	s.idx.loadChunk(changes)
	return nil
}

// loadChunk reads and mirrors up to s.chunk nodes with rid in (after, last]
// It returns how many and the last rid read.
func (s *Store) loadChunk(ctx context.Context, after, last int64) (int, int64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT n.rid, `+nodeCols+` FROM `+nodeFrom+` WHERE n.rid > ? AND n.rid <= ? ORDER BY n.rid LIMIT ?`,
		after, last, s.chunk)
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	changes := make([]change, 0, s.chunk)
	var rid int64
	for rows.Next() {
		n, err := scanNode(rows, &rid)
		if err != nil {
			return 0, 0, err
		}
		changes = append(changes, change{rid: uint32(rid), n: n, text: true})
	}
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	s.idx.loadChunk(changes)
	return len(changes), rid, nil
}

// loadEdges fills the index's mirror of the live edges.
func (s *Store) loadEdges(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT `+edgeCols+` FROM edges WHERE valid_to = 0`)
	if err != nil {
		return fmt.Errorf("load edges: %w", err)
	}
	defer rows.Close()
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	for rows.Next() {
		e, err := scanEdge(rows)
		if err != nil {
			return fmt.Errorf("load edges: %w", err)
		}
		// Live edges are unique by ends and relation: no search needed.
		s.idx.edges[e.Src] = append(s.idx.edges[e.Src], e)
		if e.Dst != e.Src {
			s.idx.edges[e.Dst] = append(s.idx.edges[e.Dst], e)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load edges: %w", err)
	}
	return nil
}

// buildAll builds the graph index of every model loaded by exact search,
// then closes indexed.
func (s *Store) buildAll() {
	s.idx.mu.RLock()
	models := make([]string, 0, len(s.idx.flat))
	for m := range s.idx.flat {
		models = append(models, m)
	}
	s.idx.mu.RUnlock()
	slices.Sort(models)
	for _, model := range models {
		if !s.buildVectors(model) {
			return
		}
	}
	s.ld.mu.Lock()
	s.ld.vectorsIn = time.Since(s.opened)
	s.ld.mu.Unlock()
	close(s.indexed)
}

// buildVectors builds model's graph index from its exact-search set in
// chunks (stopping early when the store closes), replays the writes made
// meanwhile and swaps it in.
func (s *Store) buildVectors(model string) bool {
	s.idx.mu.Lock()
	fl := s.idx.flat[model]
	ids, rids, codes, scales := fl.snapshot()
	dim := fl.dim
	s.idx.mu.Unlock()
	ix := vecindex.New(dim, s.idx.vecOpts...)
	ix.Reserve(len(ids))
	const step = 2000
	vecs := make([][]float32, 0, step)
	for off := 0; off < len(ids); off += step {
		select {
		case <-s.stop:
			return false
		default:
		}
		end := min(off+step, len(ids))
		vecs = vecs[:0]
		for i := off; i < end; i++ {
			vecs = append(vecs, decode(codes[i], scales[i]))
		}
		_ = ix.AddBatchTagged(ids[off:end], rids[off:end], vecs) // checked when written
	}
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	for _, op := range s.idx.flat[model].log {
		if op.vec == nil {
			ix.Remove(op.id)
		} else {
			_ = ix.AddTagged(op.id, op.rid, op.vec)
		}
	}
	if erased := s.idx.flat[model].erased; len(erased) > 0 {
		ix.Erase(erased...) // the replay left them as tombstones
	}
	s.idx.vecs[model] = ix
	delete(s.idx.flat, model)
	return true
}

// WaitLoaded waits until every memory is loaded into the in-memory indexes
// (at once unless the store was opened WithBackgroundLoad); it returns the
// load's error if it failed.
func (s *Store) WaitLoaded(ctx context.Context) error {
	select {
	case <-s.loaded:
		return s.LoadStatus().Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitIndexed waits until the vector indexes loaded at Open are built (the
// vector channel answers by exact search until then).
func (s *Store) WaitIndexed(ctx context.Context) error {
	select {
	case <-s.indexed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// LoadStatus reports how far loading the in-memory indexes has got.
func (s *Store) LoadStatus() memory.LoadStatus {
	s.ld.mu.Lock()
	defer s.ld.mu.Unlock()
	st := memory.LoadStatus{Loaded: s.ld.loaded, Total: s.ld.total, NodesIn: s.ld.nodesIn, VectorsIn: s.ld.vectorsIn,
		Collections: s.ld.collections, CollectedIn: s.ld.collectedIn, Err: s.ld.err}
	select {
	case <-s.loaded:
		st.Nodes = s.ld.err == nil
	default:
	}
	select {
	case <-s.indexed:
		st.Vectors = true
	default:
	}
	return st
}

type scanner interface{ Scan(dest ...any) error }

// scanNode reads (rid,) doc, emb_model, emb.
func scanNode(r scanner, rid *int64) (memory.Node, error) {
	var doc, emb []byte
	var model string
	var err error
	if rid != nil {
		err = r.Scan(rid, &doc, &model, &emb)
	} else {
		err = r.Scan(&doc, &model, &emb)
	}
	if err != nil {
		return memory.Node{}, err
	}
	var n memory.Node
	if err := decodeNode(doc, &n); err != nil {
		return memory.Node{}, fmt.Errorf("decode node: %w", err)
	}
	if emb != nil { // list reads leave the vector out; the document names its model
		n.EmbeddingModel = model
		n.Embedding = decodeVec(emb)
	}
	return n, nil
}

// decodeNode decodes a stored node's document with goccy/go-json, which
// decodes ours 4-5x faster than encoding/json (a fifth of the CPU a
// million memories took to load was that decoding), and with
// encoding/json when it reports an error: the error is then the standard
// library's, and a document it refuses is not lost to the other's
// stricter or buggier reading. The documents are the store's own
// (encoding/json wrote them); TestDecodeNodeMatchesEncodingJSON compares
// both decoders on every field.
func decodeNode(doc []byte, n *memory.Node) error {
	if gojson.Unmarshal(doc, n) == nil {
		return nil
	}
	*n = memory.Node{}
	return json.Unmarshal(doc, n)
}

func encodeVec(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func decodeVec(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// ---- the write path ----

// wtx is one write transaction and the index changes it makes.
type wtx struct {
	s       *Store
	ctx     context.Context
	tx      *sql.Tx
	now     time.Time
	changes []change
	edges   []edgeChange         // live-edge writes, mirrored after the commit
	misses  []string             // statements run unprepared: prepared after the transaction
	txStmts map[string]*sql.Stmt // the cached statements bound to this transaction, by text
}

// write runs fn in a transaction and mirrors its node and edge changes in
// the index after the commit. Write transactions are serialised.
func (s *Store) write(ctx context.Context, fn func(w *wtx) error) error {
	w, err := s.writeLocked(ctx, fn)
	if w != nil {
		s.prepare(w.misses)
	}
	return err
}

func (s *Store) writeLocked(ctx context.Context, fn func(w *wtx) error) (*wtx, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlite: begin: %w", err)
	}
	w := &wtx{s: s, ctx: ctx, tx: tx, now: s.now().UTC()}
	if err := fn(w); err != nil {
		_ = tx.Rollback()
		return w, err
	}
	if err := tx.Commit(); err != nil {
		return w, fmt.Errorf("sqlite: commit: %w", err)
	}
	s.idx.commit(w.changes, w.edges)
	s.texts.dropChanged(w.changes)
	return w, nil
}

// stmt returns q prepared, preparing it on first use. Only constant
// statement texts may come here (the cache keeps every text it sees);
// statements built for a number of arguments go to the database directly.
func (s *Store) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := s.stmts.Load(q); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.stmts.LoadOrStore(q, st); loaded {
		_ = st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// prepare prepares statements a transaction ran unprepared, best effort and
// outside the write lock: preparing needs a connection of its own, which a
// transaction must not wait for while it holds one.
func (s *Store) prepare(qs []string) {
	if len(qs) == 0 || s.closed.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, q := range qs {
		if _, err := s.stmt(ctx, q); err != nil {
			return // parsed again next time
		}
	}
}

// exec runs a constant statement in the transaction: prepared when the
// statement was seen before (bound to the transaction's connection, where
// database/sql keeps it prepared), otherwise parsed and noted for prepare.
func (w *wtx) exec(q string, args ...any) (sql.Result, error) {
	var (
		r   sql.Result
		err error
	)
	if st := w.txStmt(q); st != nil {
		r, err = st.ExecContext(w.ctx, args...)
	} else {
		w.misses = append(w.misses, q)
		r, err = w.tx.ExecContext(w.ctx, q, args...)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return r, nil
}

// txStmt returns the cached statement of q bound to the transaction (nil:
// not prepared yet), binding it once per transaction.
func (w *wtx) txStmt(q string) *sql.Stmt {
	if st, ok := w.txStmts[q]; ok {
		return st
	}
	st, ok := w.s.stmts.Load(q)
	if !ok {
		return nil
	}
	if w.txStmts == nil {
		w.txStmts = map[string]*sql.Stmt{}
	}
	bound := w.tx.StmtContext(w.ctx, st.(*sql.Stmt))
	w.txStmts[q] = bound
	return bound
}

// queryRow runs a constant single-row query in the transaction, prepared
// once like exec's statements (a bulk write ran the same three queries per
// node and spent more CPU parsing them than running them).
func (w *wtx) queryRow(q string, args ...any) *sql.Row {
	if st := w.txStmt(q); st != nil {
		return st.QueryRowContext(w.ctx, args...)
	}
	w.misses = append(w.misses, q)
	return w.tx.QueryRowContext(w.ctx, q, args...)
}

// get loads a node by id (ErrNotFound).
func (w *wtx) get(id string) (memory.Node, int64, error) {
	var rid int64
	n, err := scanNode(w.queryRow(`SELECT n.rid, `+nodeCols+` FROM `+nodeFrom+` WHERE n.id = ?`, id), &rid)
	if errors.Is(err, sql.ErrNoRows) {
		return memory.Node{}, 0, fmt.Errorf("node %s: %w", id, memory.ErrNotFound)
	}
	if err != nil {
		return memory.Node{}, 0, fmt.Errorf("sqlite: get %s: %w", id, err)
	}
	return n, rid, nil
}

// byDigest loads the node of a digest in a tenant's project; ok false when none.
func (w *wtx) byDigest(p memory.ProjectRef, digest string) (memory.Node, int64, bool, error) {
	var rid int64
	n, err := scanNode(w.queryRow(`SELECT n.rid, `+nodeCols+` FROM `+nodeFrom+` WHERE n.tenant = ? AND n.project = ? AND n.digest = ?`,
		p.Tenant, p.Project, digest), &rid)
	if errors.Is(err, sql.ErrNoRows) {
		return memory.Node{}, 0, false, nil
	}
	if err != nil {
		return memory.Node{}, 0, false, fmt.Errorf("sqlite: digest lookup: %w", err)
	}
	return n, rid, true, nil
}

// put writes n: a new row when rid is 0, else the row rid whose previous
// content is old.
func (w *wtx) put(rid int64, old *memory.Node, n memory.Node) (int64, error) {
	emb := n.Embedding
	doc, err := json.Marshal(n)
	if err != nil {
		return 0, fmt.Errorf("sqlite: encode node %s: %w", n.ID, err)
	}
	// A row that takes another id re-files its vector too: the vector
	// index is keyed by id (and tagged with the rid).
	vecChanged := (old == nil && len(emb) > 0) ||
		(old != nil && (old.ID != n.ID || old.EmbeddingModel != n.EmbeddingModel || !slices.Equal(old.Embedding, emb)))
	if len(emb) > 0 && vecChanged {
		if err := w.s.idx.checkVector(n.EmbeddingModel, emb); err != nil {
			return 0, fmt.Errorf("node %s: %w", n.ID, err)
		}
	}
	if rid == 0 {
		err = w.queryRow(`INSERT INTO nodes(id, tenant, project, digest, doc) VALUES (?, ?, ?, ?, ?) RETURNING rid`,
			n.ID, n.TenantID, n.ProjectID, n.Digest, doc).Scan(&rid)
		if err != nil {
			return 0, fmt.Errorf("sqlite: insert node %s: %w", n.ID, err)
		}
	} else if _, err := w.exec(`UPDATE nodes SET id = ?, tenant = ?, project = ?, digest = ?, doc = ? WHERE rid = ?`,
		n.ID, n.TenantID, n.ProjectID, n.Digest, doc, rid); err != nil {
		return 0, err
	}
	if vecChanged {
		if len(emb) > 0 {
			_, err = w.exec(`INSERT OR REPLACE INTO node_vectors(rid, model, emb) VALUES (?, ?, ?)`, rid, n.EmbeddingModel, encodeVec(emb))
		} else {
			_, err = w.exec(`DELETE FROM node_vectors WHERE rid = ?`, rid)
		}
		if err != nil {
			return 0, err
		}
	}
	if old == nil || !slices.Equal(old.Paths, n.Paths) {
		if old != nil {
			if _, err := w.exec(`DELETE FROM node_paths WHERE rid = ?`, rid); err != nil {
				return 0, err
			}
		}
		for _, p := range n.Paths {
			if _, err := w.exec(`INSERT OR IGNORE INTO node_paths(path, rid) VALUES (?, ?)`, p, rid); err != nil {
				return 0, err
			}
		}
	}
	text := old == nil || docText(old) != docText(&n)
	var was map[string]int
	if text && old != nil {
		was = docCounts(old) // the terms the index removes, tokenised outside its lock
	}
	w.changes = append(w.changes, change{rid: uint32(rid), n: n, vec: vecChanged, text: text, was: was})
	return rid, nil
}

// upsert stores a prepared node or reinforces the node of its digest.
func (w *wtx) upsert(p memory.Node) (memory.UpsertResult, error) {
	old, rid, found, err := w.byDigest(memory.ProjectOf(&p), p.Digest)
	if err != nil {
		return memory.UpsertResult{}, err
	}
	if found {
		n := memory.Reinforce(old, p, w.now)
		if _, err := w.put(rid, &old, n); err != nil {
			return memory.UpsertResult{}, err
		}
		return memory.UpsertResult{Node: n}, nil
	}
	var exists int
	err = w.queryRow(`SELECT 1 FROM nodes WHERE id = ?`, p.ID).Scan(&exists)
	if err == nil {
		return memory.UpsertResult{}, fmt.Errorf("%w: id %s is taken by another memory", memory.ErrInvalid, p.ID)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return memory.UpsertResult{}, fmt.Errorf("sqlite: %w", err)
	}
	if _, err := w.put(0, nil, p); err != nil {
		return memory.UpsertResult{}, err
	}
	return memory.UpsertResult{Node: p, Created: true}, nil
}

// modify applies fn to the node id and stores the result.
func (s *Store) modify(ctx context.Context, id string, fn func(w *wtx, n memory.Node) (memory.Node, error)) (memory.Node, error) {
	var out memory.Node
	err := s.write(ctx, func(w *wtx) error {
		n, rid, err := w.get(id)
		if err != nil {
			return err
		}
		old := n
		n, err = fn(w, n)
		if err != nil {
			return err
		}
		out = n
		_, err = w.put(rid, &old, n)
		return err
	})
	return out, err
}

// ---- reads ----

// nodeCols and nodeFrom read a node with its vector (scanNode); listCols
// reads it without (lists never need the vector).
const (
	nodeCols = `n.doc, COALESCE(v.model, ''), v.emb`
	nodeFrom = `nodes n LEFT JOIN node_vectors v ON v.rid = n.rid`
	listCols = `n.doc, '', NULL`
)

// Get implements memory.Nodes.
func (s *Store) Get(ctx context.Context, id string) (memory.Node, error) {
	n, err := scanNode(s.db.QueryRowContext(ctx, `SELECT `+nodeCols+` FROM `+nodeFrom+` WHERE n.id = ?`, id), nil)
	if errors.Is(err, sql.ErrNoRows) {
		return memory.Node{}, fmt.Errorf("node %s: %w", id, memory.ErrNotFound)
	}
	if err != nil {
		return memory.Node{}, fmt.Errorf("sqlite: get %s: %w", id, err)
	}
	return n, nil
}

// GetMany implements memory.Nodes.
func (s *Store) GetMany(ctx context.Context, ids []string) ([]memory.Node, error) {
	// The index mirrors every committed node without its vector and, but
	// for the standing instructions, its body: the heads are copied from
	// memory and the bodies read from the text cache or the file
	// (texts.go). A closed store still fails like every read.
	if err := s.memRead(ctx); err != nil {
		return nil, fmt.Errorf("sqlite: get many: %w", err)
	}
	s.idx.mu.RLock()
	rids := s.idx.ridsOf(ids)
	out := s.idx.copyHeads(make([]memory.Node, 0, len(rids)), rids)
	for i, r := range rids {
		if s.idx.heads[r].standing() {
			rids[i] = noRid
		}
	}
	s.idx.mu.RUnlock()
	if err := s.fillTexts(ctx, out, rids); err != nil {
		return nil, fmt.Errorf("sqlite: get many: %w", err)
	}
	return out, nil
}

// ridsOf is the rids of the ids that have a head, each once, in the order
// of ids (x.mu held).
func (x *index) ridsOf(ids []string) []uint32 {
	rids := make([]uint32, 0, len(ids))
	seen := make(map[uint32]struct{}, len(ids))
	for _, id := range ids {
		rid, ok := x.byID[id]
		if !ok || int(rid) >= len(x.heads) || x.heads[rid] == nil {
			continue
		}
		if _, dup := seen[rid]; dup {
			continue
		}
		seen[rid] = struct{}{}
		rids = append(rids, rid)
	}
	return rids
}

// byRids fetches nodes by rid in the given order.
func (s *Store) byRids(ctx context.Context, rids []uint32) ([]memory.Node, error) {
	args := make([]any, len(rids))
	for i, r := range rids {
		args[i] = int64(r)
	}
	byRid, err := s.fetchRid(ctx, args)
	if err != nil {
		return nil, err
	}
	out := make([]memory.Node, 0, len(rids))
	for _, r := range rids {
		if n, ok := byRid[int64(r)]; ok {
			out = append(out, n)
		}
	}
	return out, nil
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

const chunk = 500

func (s *Store) fetch(ctx context.Context, col string, keys []any) (map[string]memory.Node, error) {
	out := make(map[string]memory.Node, len(keys))
	for len(keys) > 0 {
		part := keys[:min(chunk, len(keys))]
		keys = keys[len(part):]
		rows, err := s.db.QueryContext(ctx, `SELECT `+listCols+` FROM nodes n WHERE n.`+col+` IN (`+placeholders(len(part))+`)`, part...)
		if err != nil {
			return nil, fmt.Errorf("sqlite: fetch: %w", err)
		}
		for rows.Next() {
			n, err := scanNode(rows, nil)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlite: fetch: %w", err)
			}
			out[n.ID] = n
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("sqlite: fetch: %w", err)
		}
	}
	return out, nil
}

func (s *Store) fetchRid(ctx context.Context, keys []any) (map[int64]memory.Node, error) {
	out := make(map[int64]memory.Node, len(keys))
	for len(keys) > 0 {
		part := keys[:min(chunk, len(keys))]
		keys = keys[len(part):]
		rows, err := s.db.QueryContext(ctx, `SELECT n.rid, `+listCols+` FROM nodes n WHERE n.rid IN (`+placeholders(len(part))+`)`, part...)
		if err != nil {
			return nil, fmt.Errorf("sqlite: fetch: %w", err)
		}
		for rows.Next() {
			var rid int64
			n, err := scanNode(rows, &rid)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlite: fetch: %w", err)
			}
			out[rid] = n
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("sqlite: fetch: %w", err)
		}
	}
	return out, nil
}

// Checkpoint copies the write-ahead log into the database file and truncates
// it (backups, size measurements).
func (s *Store) Checkpoint(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("sqlite: checkpoint: %w", err)
	}
	return nil
}

// private creates the database file with mode 0600 when it does not exist
// (SQLite would create it 0644, and its -wal and -shm files take the
// database's mode), and takes group and other access away from an existing
// one and its companions: the memory holds what users said.
func private(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", path + ".lock"} {
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, st.Mode().Perm()&^0o077); err != nil {
				return err
			}
		}
	}
	return nil
}
