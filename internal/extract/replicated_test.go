package extract_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// The Redis store is what the extractor finds Replicated in production
// (app.StoreModule provides it as it is).
var _ memory.Replicated = (*redis.Store)(nil)

// failingOver is a store whose servers replicate asynchronously, as the
// extractor sees it (memory.Replicated, storetest.Replicas): the steps of a
// span are logged in order, and a global memory's write can be lost with a
// failover (it goes to a store nobody reads, and the failover count moves:
// a primary killed after it answered the write, its replica promoted
// without it).
type failingOver struct {
	memory.Store
	storetest.Replicas
	lost memory.Store // where a write lost with its primary went

	mu         sync.Mutex
	loseGlobal bool // the next global memory's write is lost with a failover
	steps      []string
}

func (s *failingOver) log(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, step)
}

func (s *failingOver) taken() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.steps
	s.steps = nil
	return out
}

func (s *failingOver) Upsert(ctx context.Context, n memory.Node) (memory.UpsertResult, error) {
	s.mu.Lock()
	lose := s.loseGlobal && n.Scope == memory.ScopeGlobal
	if lose {
		s.loseGlobal = false
		s.Failover()
	}
	s.mu.Unlock()
	s.log("upsert " + string(n.Scope))
	if lose {
		return s.lost.Upsert(ctx, n)
	}
	return s.Store.Upsert(ctx, n)
}

func (s *failingOver) MarkEventProcessed(ctx context.Context, p memory.ProjectRef, consumer, id string, ttl time.Duration) error {
	s.log("record " + consumer)
	return s.Store.MarkEventProcessed(ctx, p, consumer, id, ttl)
}

func newFailingOver(t *testing.T, open func(t testing.TB) memory.Store, mod ...func(*extract.Config)) (*fixture, *failingOver) {
	st := &failingOver{}
	st.OnDurable = func() { st.log("durable") }
	f := newFixture(t, func(t testing.TB) memory.Store {
		st.Store, st.lost = open(t), open(t)
		return st
	}, mod...)
	return f, st
}

// spanRecorded reports whether steps record a span's writes.
func spanRecorded(steps []string) bool { return slices.Contains(steps, "record extractor.written") }

// A span that wrote a memory (a global one; a project's created or
// reinforced: its id's entry is written on a slot of its own) records
// itself only once the store says its writes are on a replica; a span that
// wrote nothing waits for nothing.
func TestSpanRecordWaitsForWritesElsewhere(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f, st := newFailingOver(t, open)
		f.srv.Enqueue(reply(nil,
			rule("Never use yarn in this project; use pnpm.", "project"),
			rule("Always answer in Indonesian.", "global")))
		f.handle(userTurn("t1", "Never use yarn here, we use pnpm. And always answer in Indonesian."))
		steps := st.taken()
		last := slices.Index(steps, "upsert global")
		durable := slices.Index(steps, "durable")
		record := slices.Index(steps, "record extractor.written")
		if last < 0 || durable < last || record < durable {
			t.Fatalf("steps %q: want the global write, then durable, then the span's record", steps)
		}

		f.srv.Enqueue(reply(nil, rule("Never push directly to main.", "project")))
		f.handle(userTurn("t2", "Never push directly to main, please."))
		if steps := st.taken(); !spanRecorded(steps) || !slices.Contains(steps, "durable") {
			t.Fatalf("steps %q: a span that created a project memory waits for its id's entry too", steps)
		}
		f.srv.Enqueue(reply(nil, rule("Never push directly to main.", "project")))
		res := f.handle(userTurn("t3", "Again: never push directly to main."))
		if steps := st.taken(); !spanRecorded(steps) || !slices.Contains(steps, "durable") {
			t.Fatalf("steps %q: a span that reinforced a memory waits too (the id's entry is written again)", steps)
		}
		if len(res.Changes) != 1 || res.Changes[0].Kind != events.ChangeReinforced {
			t.Fatalf("changes %+v: want the project rule reinforced", res.Changes)
		}
		f.srv.Enqueue(reply(nil))
		f.handle(userTurn("t4", "Thanks, that is all for today."))
		if steps := st.taken(); !spanRecorded(steps) || slices.Contains(steps, "durable") {
			t.Fatalf("steps %q: a span that wrote nothing is recorded without waiting", steps)
		}
	})
}

// A failover during a span's writes (the global memory's primary killed
// after it answered, its replica promoted without the write) leaves the
// span unrecorded, and the span extracted again writes what was lost.
// Recorded, it would be skipped when run again: the project's record
// survived, the global memory did not.
func TestSpanWrittenAgainAfterAFailover(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f, st := newFailingOver(t, open)
		st.loseGlobal = true
		for range 2 {
			f.srv.Enqueue(reply(nil,
				rule("Never use yarn in this project; use pnpm.", "project"),
				rule("Always answer in Indonesian.", "global")))
		}
		turn := userTurn("t1", "Never use yarn here, we use pnpm. And always answer in Indonesian.")
		_, err := f.x.HandleTurn(f.ctx, turn)
		if !errors.Is(err, memory.ErrFailedOver) || !runner.IsWait(extract.Classify(err)) {
			t.Fatalf("HandleTurn = %v, want memory.ErrFailedOver, waited for as the same delivery", err)
		}
		if steps := st.taken(); spanRecorded(steps) {
			t.Fatalf("steps %q: the span was recorded over a lost write", steps)
		}
		if _, ok := f.find("Always answer in Indonesian."); ok {
			t.Fatal("the lost write is in the store: the test lost nothing")
		}

		f.handle(turn) // the same delivery, run again
		if steps := st.taken(); !spanRecorded(steps) {
			t.Fatalf("steps %q: the span run again was not recorded", steps)
		}
		if _, ok := f.find("Always answer in Indonesian."); !ok {
			t.Fatal("the global rule lost with the failover was not written again")
		}
		var rules int
		for _, n := range f.all() {
			if strings.HasPrefix(n.Label, "Never use yarn") {
				rules++
			}
		}
		if rules != 1 || f.extractCalls() != 2 {
			t.Fatalf("%d project rules after %d extractions, want 1 after 2 (written again, it reinforces)", rules, f.extractCalls())
		}
	})
}

// A replica that lags is waited for within the span (Durable asked again),
// not by extracting the span again; one that does not answer leaves the
// span unrecorded, waited for as the same delivery (a runner wait: no
// delivery spent, the consumer not paused; review: it was Unavailable).
func TestSpanWaitsForALaggingReplica(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f, st := newFailingOver(t, open)
		st.Refuse(2)
		f.srv.Enqueue(reply(nil, rule("Always answer in Indonesian.", "global")))
		f.handle(userTurn("t1", "Always answer in Indonesian, please."))
		steps := st.taken()
		var durables int
		for _, s := range steps {
			if s == "durable" {
				durables++
			}
		}
		if durables != 3 || !spanRecorded(steps) {
			t.Fatalf("steps %q: want Durable asked 3 times, then the span recorded", steps)
		}

		st.Refuse(100)
		f.srv.Enqueue(reply(nil, rule("Always write dates as ISO 8601.", "global")))
		turn := userTurn("t2", "Always write dates as ISO 8601 from now on.")
		_, err := f.x.HandleTurn(f.ctx, turn)
		if !errors.Is(err, memory.ErrNotReplicated) || !errors.Is(err, memory.ErrUnavailable) || !runner.IsWait(extract.Classify(err)) {
			t.Fatalf("HandleTurn = %v, want ErrNotReplicated with the store's unavailability, waited for as the same delivery", err)
		}
		if steps := st.taken(); spanRecorded(steps) {
			t.Fatalf("steps %q: the span was recorded before its writes were on a replica", steps)
		}
		// Extracted again, the model proposes nothing this time: the first
		// attempt's writes are still waited for before the span's record.
		st.Refuse(0)
		f.srv.Enqueue(reply(nil))
		f.handle(turn)
		steps = st.taken()
		if durable, record := slices.Index(steps, "durable"), slices.Index(steps, "record extractor.written"); durable < 0 || record < durable {
			t.Fatalf("steps %q: the first attempt's unconfirmed writes were not waited for before the record", steps)
		}
	})
}
