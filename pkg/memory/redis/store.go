package redis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// DefaultNamespace is the key prefix used when WithNamespace is not given.
const DefaultNamespace = "engram"

// idShards is how many small hashes the id -> project index is spread over.
const idShards = 1024

// maxTxRetries bounds the optimistic (WATCH) retries of one write.
const maxTxRetries = 64

// Store is the Redis 8 backend of memory.Store. It is safe for concurrent
// use; it keeps no state that another replica would need (only a bounded
// cache of the immutable id -> project mapping).
type Store struct {
	c     goredis.UniversalClient
	ns    string
	now   func() time.Time
	quant string

	projOf *projectCache // id -> project (immutable once written; locks itself)

	mu    sync.Mutex
	reg   map[string]time.Time // projects known to be in the registry, and when this process last checked
	held  map[string]time.Time // spaces known to be in the held registry (heldKey), and when
	dims  map[string]int       // model -> dimension (immutable once written)
	reach map[string]time.Time // spaces known to be in the reach registry (reach.go), and when
	// The registries as cross-project reads last saw them (see
	// recallProjects, crossSpaces).
	regList   spaceList
	reachList spaceList
	regTTL    time.Duration // registryTTL (tests shorten it)

	briefs memory.BriefMemo // sessions whose briefing flag is known to be taken (BriefOnce)

	// Vector sets whose last search returned all their elements, at most
	// smallSet: searched on the server's main thread (see noteSetSize).
	smallSets sync.Map // vector set key -> struct{}

	lexBudget, lexMinPer int  // postings a lexical query reads per project; at least per term
	noHeads              bool // read postings from the sorted sets only (tests: lexhead.go)
	noAnywhere           bool // cross-project reads as before FormatReach, whatever the format (tests: reach.go)
	anywhereMax          int  // the most reach-anywhere postings of a term read in a project (anywhereReadMax; tests lower it)
	dict                 dictCache
	stats                statsCache // statistics-only projects' dictionaries (statscache.go)
	noStatsCache         bool       // every statistics-only project read afresh (tests)
	noDictCache          bool       // ask lexDictScript for every dictionary (tests: lexdict.go)
	adjacentHook         func()     // called between Adjacent's two reads (tests)
	pendingHook          func()     // called between HasPendingEmbeddings' two reads (tests)
	scoreInScript        bool       // PutBatch scores postings in reindexLexScript, as single writes do (tests)
	closeCli             bool

	// The store's format as last read (format.go; nil: read it again) and
	// how long it is trusted.
	formatRead atomic.Pointer[formatRead]
	formatTTL  time.Duration

	replicaWait time.Duration // Durable's wait for a replica (durable.go); 0: off
	waitAllowed atomic.Bool   // Ping found the user may send WAIT
	durable     durability
}

var (
	_ memory.Store        = (*Store)(nil)
	_ memory.VectorScorer = (*Store)(nil)
	_ memory.TextStore    = (*Store)(nil)
)

// Option configures a Store.
type Option func(*Store) error

// WithClock sets the clock used for timestamps, leases, briefing flags and
// processed-event expiry (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(s *Store) error {
		if now == nil {
			return errors.New("WithClock: nil clock")
		}
		s.now = now
		return nil
	}
}

// WithNamespace sets the prefix of every key (default "engram"). Several
// stores can share one server under different namespaces; DeleteNamespace
// removes one.
func WithNamespace(prefix string) Option {
	return func(s *Store) error {
		if err := checkNamespace(prefix); err != nil {
			return err
		}
		s.ns = prefix
		return nil
	}
}

// WithVectorQuantization chooses how new vector sets store vectors: "q8"
// (int8, the default: 4x smaller than float32, a quarter to a third faster
// to search at 100,000 elements, scores within about 0.005 of the exact
// cosine), "noquant" (float32, exact cosine) or "bin" (one bit per
// dimension). A set keeps the quantization it was created with (see
// vaddScript): changing the option changes only sets created afterwards.
func WithVectorQuantization(q string) Option {
	return func(s *Store) error {
		if err := CheckQuantization(q); err != nil {
			return fmt.Errorf("WithVectorQuantization: %w", err)
		}
		s.quant = q
		return nil
	}
}

// CheckQuantization reports whether q names a vector quantization (see
// WithVectorQuantization), for configuration checked before a store opens.
func CheckQuantization(q string) error {
	switch q {
	case "q8", "noquant", "bin":
		return nil
	}
	return fmt.Errorf("unknown quantization %q (q8, noquant, bin)", q)
}

// WithCloseClient makes Close close the client too (default: the caller
// owns the client and closes it).
func WithCloseClient() Option {
	return func(s *Store) error { s.closeCli = true; return nil }
}

func checkNamespace(ns string) error {
	if ns == "" {
		return errors.New("namespace is empty")
	}
	if strings.ContainsAny(ns, "{}*?[]\\ \t\r\n") {
		return fmt.Errorf("namespace %q holds a character that is not allowed ({}*?[]\\ or space)", ns)
	}
	return nil
}

// New returns a Store on client. It checks nothing on the server; Ping does.
func New(client goredis.UniversalClient, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("redis memory store: %w: nil client", memory.ErrInvalid)
	}
	s := &Store{
		c:      client,
		ns:     DefaultNamespace,
		now:    time.Now,
		quant:  "q8",
		projOf: newProjectCache(200_000),
		reg:    map[string]time.Time{},
		held:   map[string]time.Time{},
		reach:  map[string]time.Time{},
		dims:   map[string]int{},
		regTTL: registryTTL,

		formatTTL:   FormatTTL,
		replicaWait: DefaultReplicaWait,

		lexBudget:   lexicalBudget,
		anywhereMax: anywhereReadMax,
		lexMinPer:   lexicalMinPerTerm,
	}
	var problems []string
	for _, o := range opts {
		if err := o(s); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("redis memory store: %w: %s", memory.ErrInvalid, strings.Join(problems, "; "))
	}
	return s, nil
}

// Ping checks that the server answers and has vector sets (Redis >= 8).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.c.Ping(ctx).Err(); err != nil {
		return s.wrap("ping", err)
	}
	// VCARD of a missing key answers 0 on a server with vector sets and an
	// unknown-command error on an older one.
	if err := s.c.VCard(ctx, s.ns+":{probe}:v").Err(); err != nil && !errors.Is(err, goredis.Nil) {
		if strings.Contains(strings.ToLower(err.Error()), "unknown command") {
			return fmt.Errorf("redis memory store: the server has no vector sets (Redis 8 is needed): %w", err)
		}
		// A node down or moving its slots (a failover), a refused
		// command: not a server without vector sets.
		return s.wrap("ping (VCARD)", err)
	}
	if s.replicaWait > 0 && !s.waitAllowed.Load() {
		// Durable sends WAIT; an ACL user without it would have every
		// event's acknowledgement fail. WAIT 0 answers at once; checked
		// until it passes once (Ping is also the store's health check).
		if err := s.c.Do(ctx, "wait", 0, 1).Err(); err != nil {
			return fmt.Errorf("redis memory store: WAIT refused (Durable needs it: add +wait to the user's ACL, see redis.ACLCommands, "+
				"or turn the replica wait off): %w", err)
		}
		s.waitAllowed.Store(true)
	}
	if cc, ok := s.c.(*goredis.ClusterClient); ok && s.replicaWait > 0 && !s.durable.listed() {
		// The failover count starts from the primaries listed first: at
		// start (the store's gate), not at the first Durable, so that a
		// failover under the first event's handler is counted.
		if _, err := s.primaries(ctx, cc); err != nil {
			return s.wrap("ping (list the primaries)", err)
		}
	}
	return nil
}

// Close closes the client when WithCloseClient was given.
func (s *Store) Close() error {
	if s.closeCli {
		return s.c.Close()
	}
	return nil
}

// Namespace returns the key prefix of the store.
func (s *Store) Namespace() string { return s.ns }

// Client returns the client the store uses (tests read the server with it).
func (s *Store) Client() goredis.UniversalClient { return s.c }

// DeleteNamespace removes every key under prefix ns (on every master of a
// cluster). Tests use it to drop the namespace of a fresh store.
func DeleteNamespace(ctx context.Context, client goredis.UniversalClient, ns string) error {
	if err := checkNamespace(ns); err != nil {
		return fmt.Errorf("delete namespace: %w: %v", memory.ErrInvalid, err)
	}
	del := func(ctx context.Context, c goredis.UniversalClient) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, ns+":*", 1000).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				// One key per command: keys of different slots never share a command.
				pipe := c.Pipeline()
				for _, k := range keys {
					pipe.Unlink(ctx, k)
				}
				if _, err := pipe.Exec(ctx); err != nil {
					return err
				}
			}
			if next == 0 {
				return nil
			}
			cursor = next
		}
	}
	var err error
	if cc, ok := client.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return del(ctx, c) })
	} else {
		err = del(ctx, client)
	}
	if err != nil {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	return nil
}

// ---- keys ----

// A space is the name under which the store files a tenant's project (or
// the tenant's global memories): the keys' hash tag, the id index, the
// registry and the vis fields all take it where they took a project id.
// The default tenant's space is the project id itself ("" for its global
// memories), so that everything written before tenants keeps its keys;
// another tenant's is 0xFF, the tenant, 0xFF, the project. 0xFF never
// occurs in valid UTF-8, and tenant and project ids are valid UTF-8
// (memory.PrepareNew, memory.CheckSession and memory.CheckTenant refuse
// others), so the encoding is unambiguous and unspace inverts it.
const spaceMark = "\xff"

func space(p memory.ProjectRef) string {
	if p.Tenant == "" {
		return p.Project
	}
	return spaceMark + p.Tenant + spaceMark + p.Project
}

// spaceOf is the space of a node.
func spaceOf(n *memory.Node) string { return space(memory.ProjectOf(n)) }

// unspace inverts space.
func unspace(sp string) memory.ProjectRef {
	if !strings.HasPrefix(sp, spaceMark) {
		return memory.ProjectRef{Project: sp}
	}
	rest := sp[len(spaceMark):]
	i := strings.Index(rest, spaceMark)
	if i < 0 {
		return memory.ProjectRef{Tenant: rest}
	}
	return memory.ProjectRef{Tenant: rest[:i], Project: rest[i+len(spaceMark):]}
}

// tag returns the hash tag of a space's keys: {p:<id>} (or {h:<sha256>}
// for an id that holds a brace), {g} for the default tenant's global
// memories, {t:<sha256>} for every space of another tenant (its projects
// and its global memories: each on a slot of its own).
func tagOf(project string) string {
	if project == "" {
		return "{g}"
	}
	if strings.HasPrefix(project, spaceMark) {
		sum := sha256.Sum256([]byte(project))
		return "{t:" + hex.EncodeToString(sum[:16]) + "}"
	}
	if strings.ContainsAny(project, "{}") {
		sum := sha256.Sum256([]byte(project))
		return "{h:" + hex.EncodeToString(sum[:16]) + "}"
	}
	return "{p:" + project + "}"
}

// keys builds the key names of one project (one hash tag, one slot).
type keys struct{ p string } // "<ns>:<tag>:"

func (s *Store) keys(project string) keys { return keys{p: s.ns + ":" + tagOf(project) + ":"} }

func (k keys) node(id string) string           { return k.p + "n:" + id }
func (k keys) digests() string                 { return k.p + "dg" }
func (k keys) all() string                     { return k.p + "all" }
func (k keys) live() string                    { return k.p + "lv" }
func (k keys) standing() string                { return k.p + "st" }
func (k keys) pending() string                 { return k.p + "pe" }
func (k keys) embedded(m string) string        { return k.p + "em:" + m }
func (k keys) models() string                  { return k.p + "models" }
func (k keys) vectors(m string) string         { return k.p + "v:" + m }
func (k keys) terms() string                   { return k.p + "terms" }
func (k keys) stats() string                   { return k.p + "bm" }
func (k keys) heads() string                   { return k.p + "hh" }
func (k keys) docFreqs() string                { return k.p + "df" }
func (k keys) head(term string) string         { return k.p + "th:" + term }
func (k keys) anywhere(t string) string        { return k.p + "at:" + t }
func (k keys) anywhereVectors(m string) string { return k.p + "va:" + m }
func (k keys) vis() string                     { return k.p + "vis" }
func (k keys) packedNodes() string             { return k.p + "pn" }
func (k keys) path(p string) string            { return k.p + "pa:" + p }
func (k keys) edgesOut(id string) string       { return k.p + "eo:" + id }
func (k keys) edgesIn(id string) string        { return k.p + "ei:" + id }
func (k keys) contradicting() string           { return k.p + "cx" }
func (k keys) session(sid string) string       { return k.p + "s:" + sid + ":" }
func (k keys) events(c string) string          { return k.p + "ev:" + c }

func (s *Store) registryKey() string { return s.ns + ":{r}:projects" }
func (s *Store) heldKey() string     { return s.ns + ":{r}:held" }

func (s *Store) idKey(id string) string {
	return fmt.Sprintf("%s:{i:%d}:ids", s.ns, crc32.ChecksumIEEE([]byte(id))%idShards)
}

// ---- id -> project index ----

// register records a space in the registry (cross-project reads, scans):
// every project of every tenant, and the global space of every tenant but
// the default one (whose global space "" every scan reads anyway).
func (s *Store) register(ctx context.Context, project string) error {
	if project == "" {
		return nil
	}
	s.mu.Lock()
	at, ok := s.reg[project]
	s.mu.Unlock()
	if ok && time.Since(at) < registryRecheck {
		return nil
	}
	added, err := s.c.SAdd(ctx, s.registryKey(), project).Result()
	if err != nil {
		return s.wrap("register project", err)
	}
	if added == 1 {
		// A new project has no edge yet: its contradiction hints are
		// complete from the start (see MayContradict).
		if err := s.c.SAdd(ctx, s.keys(project).contradicting(), hintsComplete).Err(); err != nil {
			return s.wrap("register project", err)
		}
		// Nor postings of an earlier lexical index version, nor memories
		// outside the conversation index.
		if err := s.c.HSet(ctx, s.keys(project).stats(), lexVersionField, lexVersion, convVersionField, 1).Err(); err != nil {
			return s.wrap("register project", err)
		}
	}
	s.mu.Lock()
	s.reg[project] = time.Now()
	s.mu.Unlock()
	if added == 1 {
		s.regList.invalidate() // this process's reads see the new project at once
	}
	return nil
}

// registryRecheck is how long a process trusts that a space it registered
// is still in a registry: an erasure removes erased spaces from the
// registries, and a write after it (another replica's included) registers
// the space again once this has passed.
const registryRecheck = 10 * time.Second

// hold records a space that holds per-session or per-project records (not
// only nodes and passes, which register) in the held registry, so that
// the erasure of a tenant finds every space of the tenant (the hash tags
// of a tenant's spaces are hashes: its keys cannot tell their tenant).
func (s *Store) hold(ctx context.Context, p memory.ProjectRef) error {
	sp := space(p)
	s.mu.Lock()
	at, ok := s.held[sp]
	s.mu.Unlock()
	if ok && time.Since(at) < registryRecheck {
		return nil
	}
	if err := s.c.SAdd(ctx, s.heldKey(), sp).Err(); err != nil {
		return s.wrap("register space", err)
	}
	s.mu.Lock()
	s.held[sp] = time.Now()
	s.mu.Unlock()
	return nil
}

// projects lists every registered project (global excluded).
func (s *Store) projects(ctx context.Context) ([]string, error) {
	ps, err := s.c.SMembers(ctx, s.registryKey()).Result()
	if err != nil {
		return nil, s.wrap("list projects", err)
	}
	return ps, nil
}

// registryTTL is how long cross-project recall trusts the project list it
// last read.
const registryTTL = time.Second

// recallProjects lists the registered projects, sorted, for cross-project
// recall, from a copy read at most registryTTL ago: each channel of each
// turn would otherwise pay a round trip before its first read. The
// registry only grows but for erasures (whose projects' reads then find
// nothing), so the copy names no project that is not there but an erased
// one; a project this process registers is seen at once, one that
// another process registers within registryTTL. Scans and maintenance
// read the registry itself (projects). The slice is shared: callers must
// not modify it.
func (s *Store) recallProjects(ctx context.Context) ([]string, error) {
	return s.regList.get(ctx, s.regTTL, s.projects)
}

// claimID writes id -> project in the index unless the id belongs to
// another project (ErrInvalid).
func (s *Store) claimID(ctx context.Context, id, project string) error {
	if p, ok := s.projOf.get(id); ok {
		if p != project {
			return errTaken(id, p, project)
		}
		return nil
	}
	key := s.idKey(id)
	set, err := s.c.HSetNX(ctx, key, id, project).Result()
	if err != nil {
		return s.wrap("claim id", err)
	}
	if !set {
		p, err := s.c.HGet(ctx, key, id).Result()
		if err != nil {
			return s.wrap("claim id", err)
		}
		if p != project {
			return errTaken(id, p, project)
		}
	}
	s.projOf.put(id, project)
	return nil
}

// claimIDs is claimID for many ids of one project in two pipelined round
// trips at most (an import claimed each id in a round trip of its own).
func (s *Store) claimIDs(ctx context.Context, ids []string, project string) error {
	var miss []string
	for _, id := range ids {
		p, ok := s.projOf.get(id)
		switch {
		case !ok:
			miss = append(miss, id)
		case p != project:
			return errTaken(id, p, project)
		}
	}
	if len(miss) == 0 {
		return nil
	}
	pipe := s.c.Pipeline()
	set := make([]*goredis.BoolCmd, len(miss))
	for i, id := range miss {
		set[i] = pipe.HSetNX(ctx, s.idKey(id), id, project)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("claim id", err)
	}
	var taken []string
	for i, id := range miss {
		if set[i].Val() {
			s.projOf.put(id, project)
		} else {
			taken = append(taken, id)
		}
	}
	if len(taken) == 0 {
		return nil
	}
	pipe = s.c.Pipeline()
	owner := make([]*goredis.StringCmd, len(taken))
	for i, id := range taken {
		owner[i] = pipe.HGet(ctx, s.idKey(id), id)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("claim id", err)
	}
	for i, id := range taken {
		if p := owner[i].Val(); p != project {
			return errTaken(id, p, project)
		}
		s.projOf.put(id, project)
	}
	return nil
}

// errTaken is the error of an id claimed by another space: it names the
// other project only when it is of the same tenant (another tenant's names
// are not the caller's to learn).
func errTaken(id, owner, claimant string) error {
	if o := unspace(owner); o.Tenant == unspace(claimant).Tenant {
		return fmt.Errorf("%w: id %s belongs to another project (%q)", memory.ErrInvalid, id, o.Project)
	}
	return fmt.Errorf("%w: id %s belongs to another tenant", memory.ErrInvalid, id)
}

// projectOf finds the project of a node id: ErrNotFound when unknown.
func (s *Store) projectOf(ctx context.Context, id string) (string, error) {
	if p, ok := s.projOf.get(id); ok {
		return p, nil
	}
	p, err := s.c.HGet(ctx, s.idKey(id), id).Result()
	if errors.Is(err, goredis.Nil) {
		return "", fmt.Errorf("%w: node %s", memory.ErrNotFound, id)
	}
	if err != nil {
		return "", s.wrap("find node", err)
	}
	s.projOf.put(id, p)
	return p, nil
}

// projectsOf resolves many ids; unknown ids are left out of the map.
func (s *Store) projectsOf(ctx context.Context, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	miss := s.projOf.getMany(ids, out)
	if len(miss) == 0 {
		return out, nil
	}
	pipe := s.c.Pipeline()
	cmds := make([]*goredis.StringCmd, len(miss))
	for i, id := range miss {
		cmds[i] = pipe.HGet(ctx, s.idKey(id), id)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, s.wrap("find nodes", err)
	}
	for i, id := range miss {
		p, err := cmds[i].Result()
		if errors.Is(err, goredis.Nil) {
			continue
		}
		if err != nil {
			return nil, s.wrap("find nodes", err)
		}
		out[id] = p
		s.projOf.put(id, p)
	}
	return out, nil
}

// ---- errors ----

// wrap turns a client error into a store error: connection problems are
// memory.ErrUnavailable; the original error stays in the chain.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, memory.ErrNotFound) || errors.Is(err, memory.ErrInvalid) ||
		errors.Is(err, memory.ErrRefused) || errors.Is(err, memory.ErrUnavailable) {
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, goredis.ErrClosed) || errors.Is(err, goredis.ErrPoolTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		isClusterDown(err) {
		return fmt.Errorf("redis %s: %w: %w", op, memory.ErrUnavailable, err)
	}
	return fmt.Errorf("redis %s: %w", op, err)
}

func isClusterDown(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "CLUSTERDOWN") || strings.HasPrefix(msg, "TRYAGAIN") ||
		strings.HasPrefix(msg, "LOADING") || strings.HasPrefix(msg, "MASTERDOWN")
}

// retryTx runs an optimistic transaction on keys of one slot until it
// commits (bounded).
func (s *Store) retryTx(ctx context.Context, op string, fn func(tx *goredis.Tx) error, watch ...string) error {
	for i := 0; i < maxTxRetries; i++ {
		err := s.c.Watch(ctx, fn, watch...)
		if errors.Is(err, goredis.TxFailedErr) {
			if ctx.Err() != nil {
				return s.wrap(op, ctx.Err())
			}
			time.Sleep(time.Duration(i) * 100 * time.Microsecond)
			continue
		}
		return s.wrap(op, err)
	}
	return fmt.Errorf("redis %s: %w: too much contention (%d retries)", op, memory.ErrUnavailable, maxTxRetries)
}
