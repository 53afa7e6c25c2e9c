package erase

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// Scope is what an erasure covers: a tenant, one of its projects, or one
// session of a project (memory.EraseScope).
type Scope = memory.EraseScope

// Store is what an erasure needs of the memory store (memory.Erasure).
type Store interface {
	Erase(ctx context.Context, scope memory.EraseScope, seen memory.Seen) (memory.Erased, error)
	Purge(ctx context.Context) (memory.PurgeReport, error)
	SessionIDs(ctx context.Context, p memory.ProjectRef) ([]string, error)
}

// RawScanner is a store that can show its persistence raw for a
// verification: the SQLite store its files (free pages included), the
// Redis store every key of its namespace.
type RawScanner interface {
	ScanRaw(ctx context.Context, fn func(where string, data []byte) error) error
}

// TextHolder is a store that can say whether a live record holds a text
// (a verification's finding may be the same words in another scope's
// memory).
type TextHolder interface {
	HoldsText(ctx context.Context, text string) (string, error)
}

// ErrInvalid wraps the errors of a request that can never succeed (an
// invalid scope): the CLI exits with a usage error, the bus replies so.
var ErrInvalid = memory.ErrInvalid

// MaxRounds bounds the rounds of an erasure: the streams and the store are
// erased, then again from where the first round stopped (a turn of the
// scope handled meanwhile wrote again), until a round finds nothing.
const MaxRounds = 3

// Eraser erases scopes from a store and, when given, from the event
// streams and the activity bucket. One erasure runs at a time. Safe for
// concurrent use.
type Eraser struct {
	store Store
	bus   *Bus
	shelf Shelf
	files []string
	now   func() time.Time
	mu    sync.Mutex
}

// Option configures New.
type Option func(*Eraser)

// WithBus erases the scope's copies in the streams and the activity
// bucket too (without it the receipt says they were not erased).
func WithBus(b *Bus) Option { return func(e *Eraser) { e.bus = b } }

// WithFiles adds files or directories (walked) that a verification reads
// raw, e.g. an unencrypted JetStream store directory. An encrypted one is
// pointless to read: the text is not there in the clear.
func WithFiles(paths ...string) Option {
	return func(e *Eraser) { e.files = append(e.files, paths...) }
}

// WithClock sets the clock of the receipt's times (default time.Now).
func WithClock(now func() time.Time) Option { return func(e *Eraser) { e.now = now } }

// New returns an Eraser of store.
func New(store Store, opts ...Option) *Eraser {
	e := &Eraser{store: store, now: time.Now}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Options are the choices of one erasure.
type Options struct {
	// Verify: after the erasure, read the store's persistence raw, every
	// stream message and the files given to WithFiles for any text of the
	// scope, and say what was found (Receipt.Verify).
	Verify bool
}

// Receipt says what an erasure did.
type Receipt struct {
	Scope      Scope     `json:"scope"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	// Store is what the store deleted, by kind.
	Store memory.Erased `json:"store"`
	// Streams is how many messages were deleted (and overwritten) from
	// each stream; the activity bucket's records count under its stream
	// (KV_ENGRAM_ACTIVITY).
	Streams map[string]int `json:"stream_messages"`
	// ParkedLetters is how many dead letters parked in the store (while
	// the dead-letter stream refused them) were dropped (WithShelf).
	ParkedLetters int `json:"parked_letters,omitempty"`
	// Rounds the erasure took (see MaxRounds).
	Rounds int `json:"rounds"`
	// Persistence is what was done so that the store's files keep nothing
	// of what was deleted (memory.Erasure.Purge).
	Persistence memory.PurgeReport `json:"persistence"`
	// Incomplete lists what could not be erased, and why.
	Incomplete []string `json:"incomplete,omitempty"`
	// Verify is the verification's result (Options.Verify).
	Verify *Verification `json:"verify,omitempty"`
}

// Total is the number of records and messages erased.
func (r Receipt) Total() int {
	n := r.Store.Total() + r.ParkedLetters
	for _, c := range r.Streams {
		n += c
	}
	return n
}

// Complete reports whether nothing was left undone and, when verified,
// nothing of the scope was found.
func (r Receipt) Complete() bool {
	return len(r.Incomplete) == 0 && len(r.Persistence.Incomplete) == 0 && (r.Verify == nil || r.Verify.FoundCount == 0)
}

// Erase erases scope: the streams' and the activity bucket's copies
// (selected by subject, or by body where the subject does not name the
// scope), then the store; again from where it stopped while a round still
// finds something (at most MaxRounds); then the store's persistence
// (Purge); then, with o.Verify, a verification. It returns the receipt
// with an error when a step failed: what the receipt counts was erased.
func (e *Eraser) Erase(ctx context.Context, sc Scope, o Options) (Receipt, error) {
	if err := sc.Check(); err != nil {
		return Receipt{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	r := Receipt{Scope: sc, StartedAt: e.now().UTC(), Streams: map[string]int{}}
	failovers := memory.FailoversOf(e.store)
	texts := newTexts()
	texts.ids(sc)
	if sc.Project != "" && sc.Session == "" {
		// The sessions of a project are looked for too (their ids are in
		// the streams' subjects and the store's keys).
		sids, err := e.store.SessionIDs(ctx, memory.ProjectRef{Tenant: sc.Tenant, Project: sc.Project})
		if err != nil {
			return r, fmt.Errorf("erase %s: %w", sc, err)
		}
		for _, sid := range sids {
			texts.id("a session id of the project", sid)
		}
	}
	err := e.rounds(ctx, sc, &r, texts)
	if err == nil {
		var rep memory.PurgeReport
		rep, err = e.store.Purge(ctx)
		r.Persistence.Done = append(r.Persistence.Done, rep.Done...)
		r.Persistence.Incomplete = append(r.Persistence.Incomplete, rep.Incomplete...)
		if err != nil {
			err = fmt.Errorf("erase %s: persistence: %w", sc, err)
		}
	}
	if d, ok := e.store.(durable); ok && err == nil {
		// Deletions not yet durable could come back: a Redis primary lost
		// before its replica had them is replaced by a replica that still
		// holds the records; a machine that loses power before SQLite's
		// log reaches the disk reopens with them.
		// A replica promoted during the erasure may hold records it
		// deleted on the primary it replaced (ErrFailedOver).
		if derr := memory.ConfirmDurable(ctx, d, failovers); derr != nil {
			r.Persistence.Incomplete = append(r.Persistence.Incomplete, "store: the deletions are not confirmed durable yet ("+
				derr.Error()+"): a server or machine lost now could bring the records back; erase again")
			err = fmt.Errorf("erase %s: durable: %w", sc, derr)
		} else {
			r.Persistence.Done = append(r.Persistence.Done, "store: the deletions are durable (SQLite: its log synced to disk; Redis: on a replica of every primary that has one)")
		}
	}
	if e.bus != nil {
		r.Persistence.Done = append(r.Persistence.Done, "streams: every message deleted was overwritten (JetStream secure delete)")
		if _, ok := r.Streams[e.bus.kvStream()]; ok && e.bus.Bucket != "" {
			r.Persistence.Done = append(r.Persistence.Done, "activity bucket: the sessions' records purged; a key-value bucket denies secure deletes, so their bytes (ids and times, no text) stay in the store's free space until JetStream compacts the block")
		}
	}
	if err == nil && o.Verify {
		v, verr := e.verify(ctx, sc, texts)
		r.Verify = v
		if verr != nil {
			err = fmt.Errorf("erase %s: verify: %w", sc, verr)
		}
	}
	r.FinishedAt = e.now().UTC()
	return r, err
}

// durable is a store that can confirm its writes durable (the SQLite
// store: its log synced; the Redis store: on its replicas).
type durable interface {
	Durable(ctx context.Context) error
}

// rounds erases the streams and the store until a round finds nothing.
func (e *Eraser) rounds(ctx context.Context, sc Scope, r *Receipt, texts *texts) error {
	var from map[string]uint64
	if e.bus == nil {
		r.Incomplete = append(r.Incomplete, "streams: not erased (no connection to the bus was given): the events, output events, dead letters and activity records of the scope may remain")
	}
	for round := 1; round <= MaxRounds; round++ {
		r.Rounds = round
		found := 0
		if e.bus != nil {
			counts, next, err := e.bus.erase(ctx, sc, from, texts.add)
			for name, n := range counts {
				r.Streams[name] += n
				found += n
			}
			from = next
			if err != nil {
				return fmt.Errorf("erase %s: streams: %w", sc, err)
			}
		}
		got, err := e.store.Erase(ctx, sc, texts.add)
		r.Store.Add(got)
		found += got.Total()
		if err != nil {
			return fmt.Errorf("erase %s: store: %w", sc, err)
		}
		if e.shelf != nil {
			n, err := e.eraseLetters(ctx, sc, texts.add)
			r.ParkedLetters += n
			found += n
			if err != nil {
				return fmt.Errorf("erase %s: %w", sc, err)
			}
		}
		if round > 1 && found == 0 {
			break
		}
	}
	return nil
}
