package extract_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

func TestSpanFolding(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		entered := make(chan struct{})
		release := make(chan struct{})
		f.srv.Enqueue(
			llmtest.Func(func(api.ChatRequest) llmtest.Reply {
				close(entered)
				<-release
				return reply(nil, rule("Always run gofmt before committing.", "project"))
			}),
			reply(nil, rule("Never push directly to main.", "project")),
		)
		var wg sync.WaitGroup
		var first extract.Result
		var firstErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			first, firstErr = f.x.HandleTurn(f.ctx, userTurn("t1", "Always run gofmt before committing, please."))
		}()
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			t.Fatal("the first span never reached the model")
		}
		// Turns that end while the span is being extracted are stored and
		// left to the lease holder.
		for _, id := range []string{"t2", "t3", "t4"} {
			res := f.handle(userTurn(id, "Turn "+id+": never push directly to main, open a pull request."))
			if !res.Busy || res.Spans != 0 || !res.Appended {
				t.Fatalf("%s while the lease is held: %+v, want appended and busy", id, res)
			}
		}
		close(release)
		wg.Wait()
		if firstErr != nil {
			t.Fatal(firstErr)
		}
		if first.Spans != 2 {
			t.Errorf("the holder extracted %d spans, want 2 ([t1], [t2 t3 t4])", first.Spans)
		}
		if n := f.extractCalls(); n != 2 {
			t.Fatalf("extraction calls = %d for 4 turns, want 2 (one per span)", n)
		}
		second := f.userMessages()[1]
		second = second[strings.Index(second, "TRANSCRIPT:"):]
		for _, id := range []string{"t2", "t3", "t4"} {
			if !contains(second, "Turn "+id+":") {
				t.Errorf("second span lacks %s", id)
			}
		}
		if contains(second, "gofmt") {
			t.Errorf("second span repeats the first span's turn")
		}
		// Redelivered events of covered turns are acknowledged without work.
		for _, id := range []string{"t1", "t3"} {
			res := f.handle(userTurn(id, "Turn "+id+": never push directly to main, open a pull request."))
			if res.Spans != 0 || res.Appended {
				t.Errorf("redelivered %s: %+v, want no work", id, res)
			}
		}
		if n := f.extractCalls(); n != 2 {
			t.Errorf("redelivery made model calls: %d", n)
		}
	})
}

var errCrash = errors.New("simulated crash")

// crashStore fails chosen operations a number of times, as a process dying
// at that point would leave things.
type crashStore struct {
	memory.Store
	upserts   atomic.Int32 // fail this many Upserts
	turnMarks atomic.Int32 // fail this many "turn done" records
}

func (c *crashStore) Upsert(ctx context.Context, n memory.Node) (memory.UpsertResult, error) {
	if c.upserts.Add(-1) >= 0 {
		return memory.UpsertResult{}, errCrash
	}
	return c.Store.Upsert(ctx, n)
}

func (c *crashStore) MarkEventProcessed(ctx context.Context, project memory.ProjectRef, consumer, id string, ttl time.Duration) error {
	if consumer == "extractor.turn" && c.turnMarks.Add(-1) >= 0 {
		return errCrash
	}
	return c.Store.MarkEventProcessed(ctx, project, consumer, id, ttl)
}

func TestRedeliveryAfterCrash(t *testing.T) {
	for _, point := range []string{"between model call and write", "after write and feedback"} {
		t.Run(strings.ReplaceAll(point, " ", "_"), func(t *testing.T) {
			eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
				f := newFixture(t, open)
				cs := &crashStore{Store: f.st}
				x, err := extract.New(cs, f.client, f.emb, f.pub, f.cfg)
				if err != nil {
					t.Fatal(err)
				}
				inj := f.seed(memory.Node{Subkind: memory.Decision, Label: "Releases are tagged by CI", Confidence: 0.6})
				if err := f.st.PutInjection(f.ctx, ref(), "t1", memory.Injection{IDs: []string{inj.ID}}, time.Hour); err != nil {
					t.Fatal(err)
				}
				r := reply([]extract.ReplyVerdict{{ID: inj.ID, Verdict: "used"}},
					rule("Never tag releases by hand.", "project"),
					extract.ReplyMemory{Subkind: "observation", Scope: "project", Reach: "here", AssertedBy: "assistant",
						Label: "Release tags follow semver with a v prefix", Confidence: 0.7})
				f.srv.Enqueue(r, r)
				if point == "between model call and write" {
					cs.upserts.Store(1)
				} else {
					cs.turnMarks.Store(1)
				}
				turn := userTurn("t1", "Never tag releases by hand; CI tags them with v-prefixed semver.")
				if _, err := x.HandleTurn(f.ctx, turn); !errors.Is(err, errCrash) {
					t.Fatalf("first delivery: err = %v, want the crash", err)
				} else if strings.Contains(err.Error(), "extract: extract:") {
					t.Errorf("first delivery: %q says where it failed twice", err)
				}
				if _, err := x.HandleTurn(f.ctx, turn); err != nil {
					t.Fatalf("redelivery: %v", err)
				}
				if n := f.extractCalls(); n != 2 {
					t.Errorf("model calls = %d, want 2 (the crashed one and the redo)", n)
				}
				nodes := f.all()
				if len(nodes) != 3 {
					t.Errorf("nodes = %d, want 3 (injected + 2 extracted, no duplicates)", len(nodes))
				}
				for _, n := range nodes {
					if n.ID != inj.ID && n.Weight != memory.MinWeight {
						t.Errorf("%q written twice (weight %v)", n.Label, n.Weight)
					}
				}
				if got := f.get(inj.ID); got.Useful != 1 {
					t.Errorf("useful = %d after redelivery, want exactly 1", got.Useful)
				}
				// A third delivery finds the turn done.
				if res, err := x.HandleTurn(f.ctx, turn); err != nil || res.Spans != 0 {
					t.Errorf("third delivery: %+v %v, want no work", res, err)
				}
				// Both publications of the span carry the same event id (the
				// stream's duplicate window drops the second).
				ids := map[string]bool{}
				for _, e := range f.pub.all() {
					ids[e.ID] = true
				}
				if len(ids) != 1 {
					t.Errorf("memory_changed ids = %v, want one id", ids)
				}
			})
		})
	}
}

func TestOutageThenRecovery(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		f.srv.Down()
		turns := []extract.Turn{
			userTurn("t1", "From now on never use the legacy API client."),
			userTurn("t2", "Also always write tests with testify-free plain Go."),
			userTurn("t3", "And answer in Indonesian please."),
		}
		for _, tu := range turns {
			_, err := f.x.HandleTurn(f.ctx, tu)
			if !errors.Is(err, llm.ErrUnavailable) {
				t.Fatalf("%s during the outage: err = %v, want llm.ErrUnavailable", tu.Turn, err)
			}
			c := extract.Classify(err)
			if !runner.IsUnavailable(c) || runner.IsPermanent(c) {
				t.Fatalf("outage classified as %v, want unavailable (delay), never dead-lettered", c)
			}
		}
		msgs, err := f.st.Messages(f.ctx, ref(), 0, 0)
		if err != nil || len(msgs) != 6 {
			t.Fatalf("transcript during the outage: %d messages, %v; want all 6 stored", len(msgs), err)
		}
		f.srv.Up()
		f.srv.Enqueue(reply(nil, rule("Never use the legacy API client.", "project"),
			rule("Always answer in Indonesian.", "global")))
		// The runner redelivers the three events after its delay.
		total := 0
		for _, tu := range turns {
			res, err := f.x.HandleTurn(f.ctx, tu)
			if err != nil {
				t.Fatalf("%s after recovery: %v", tu.Turn, err)
			}
			total += res.Spans
		}
		if total != 1 || f.extractCalls() != 1 {
			t.Errorf("after recovery: %d spans, %d calls; want the three turns in one span", total, f.extractCalls())
		}
		um := f.userMessages()[0]
		for _, tu := range turns {
			if !contains(um, tu.Messages[0].Content) {
				t.Errorf("recovered span lacks %s", tu.Turn)
			}
		}
		if _, ok := f.find("Always answer in Indonesian."); !ok {
			t.Error("memory of the recovered span missing")
		}
	})
}

func TestInvalidReplyDeadLettersAfterRetries(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		bad := llmtest.Text("I think the user wants pnpm, sorry no JSON today")
		f.srv.OnChatAlways(llmtest.SystemContains("long-term memory"), bad)
		turn := userTurn("t1", "Use pnpm, not npm, for everything in this repository.")
		var last error
		for i := 1; i <= f.cfg.MaxInvalid; i++ {
			_, err := f.x.HandleTurn(f.ctx, turn)
			var inv *extract.InvalidReplyError
			if !errors.As(err, &inv) {
				t.Fatalf("attempt %d: err = %v, want an InvalidReplyError", i, err)
			}
			if inv.Failures != i || inv.Final != (i == f.cfg.MaxInvalid) {
				t.Fatalf("attempt %d: failures %d final %v", i, inv.Failures, inv.Final)
			}
			c := extract.Classify(err)
			if runner.IsUnavailable(c) || runner.IsPermanent(c) != inv.Final {
				t.Fatalf("attempt %d classified %v", i, c)
			}
			if !inv.Final && inv.Delay != f.cfg.InvalidDelay<<(i-1) {
				t.Errorf("attempt %d: delay %v, want %v", i, inv.Delay, f.cfg.InvalidDelay<<(i-1))
			}
			last = err
		}
		if !strings.Contains(last.Error(), "sorry no JSON today") {
			t.Errorf("the dead-letter reason lacks the model's last reply: %v", last)
		}
		msgs, err := f.st.Messages(f.ctx, ref(), 0, 0)
		if err != nil || len(msgs) != 2 {
			t.Fatalf("transcript: %d messages, %v; want it stored", len(msgs), err)
		}
		calls := f.extractCalls()
		if calls != 2*f.cfg.MaxInvalid {
			t.Errorf("calls = %d, want %d (each attempt plus its repair)", calls, 2*f.cfg.MaxInvalid)
		}
		// The span was given up: the next turn starts after it.
		f.srv.Reset()
		f.srv.Enqueue(reply(nil))
		f.handle(userTurn("t2", "Now let us look at the CI configuration file."))
		if um := f.userMessages(); len(um) != 1 || contains(um[0], "pnpm") {
			t.Errorf("the next span re-extracts the given-up turn: %q", um)
		}
	})
}

// switchEmbedder is the real embedder behind an on/off switch.
type switchEmbedder struct {
	extract.Embedder
	down atomic.Bool
}

func (s *switchEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if s.down.Load() {
		return nil, llm.ErrUnavailable
	}
	return s.Embedder.Embed(ctx, texts)
}

func TestBacklogEmbedsWhenEmbedderReturns(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		emb := &switchEmbedder{Embedder: f.emb}
		emb.down.Store(true)
		x, err := extract.New(f.st, f.client, emb, f.pub, f.cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.srv.Enqueue(reply(nil, rule("Never use yarn.", "project"), rule("Prefer table-driven tests.", "project")))
		if _, err := x.HandleTurn(f.ctx, userTurn("t1", "Never use yarn, and prefer table-driven tests.")); err != nil {
			t.Fatal(err)
		}
		pending, err := f.st.PendingEmbeddings(f.ctx, emb.Model(), 10)
		if err != nil || len(pending) != 2 {
			t.Fatalf("pending = %d, %v; want the 2 memories written while the embedder was down", len(pending), err)
		}
		ctx, cancel := context.WithCancel(f.ctx)
		done := make(chan struct{})
		var errs atomic.Int32
		go func() {
			defer close(done)
			x.RunBacklog(ctx, func(error) { errs.Add(1) })
		}()
		deadline := time.Now().Add(30 * time.Second)
		for errs.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		emb.down.Store(false)
		x.Kick()
		for {
			pending, err = f.st.PendingEmbeddings(f.ctx, emb.Model(), 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(pending) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("backlog not embedded: %d pending", len(pending))
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		<-done
		for _, n := range f.all() {
			if len(n.Embedding) == 0 || n.EmbeddingModel != emb.Model() {
				t.Errorf("%q has no vector of %s", n.Label, emb.Model())
			}
		}
	})
}

// leaseStore reports every renewal as lost.
type leaseStore struct{ memory.Store }

func (leaseStore) RenewLease(context.Context, memory.SessionRef, string, string, time.Duration) (bool, error) {
	return false, nil
}

func TestLease(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		t.Run("renewed while the model works", func(t *testing.T) {
			f := newFixture(t, open, func(c *extract.Config) { c.LeaseTTL = 300 * time.Millisecond })
			f.srv.Enqueue(reply(nil).After(1500*time.Millisecond), reply(nil))
			done := make(chan error, 1)
			go func() {
				_, err := f.x.HandleTurn(f.ctx, userTurn("t1", "A turn whose extraction takes longer than the lease."))
				done <- err
			}()
			waitFor(t, "the model call", func() bool { return f.extractCalls() == 1 })
			time.Sleep(900 * time.Millisecond) // three lease lifetimes
			res := f.handle(userTurn("t2", "A turn that ends while the first is extracted."))
			if !res.Busy {
				t.Errorf("the lease expired under a live holder: %+v", res)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
		t.Run("lost", func(t *testing.T) {
			f := newFixture(t, open, func(c *extract.Config) { c.LeaseTTL = 150 * time.Millisecond })
			x, err := extract.New(leaseStore{f.st}, f.client, f.emb, f.pub, f.cfg)
			if err != nil {
				t.Fatal(err)
			}
			f.srv.Enqueue(reply(nil, rule("Never write to prod.", "project")).After(5 * time.Second))
			_, err = x.HandleTurn(f.ctx, userTurn("t1", "Never write to the production database directly."))
			if !errors.Is(err, extract.ErrLeaseLost) {
				t.Fatalf("err = %v, want ErrLeaseLost", err)
			}
			if c := extract.Classify(err); runner.IsPermanent(c) {
				t.Errorf("a lost lease is permanent: %v", c)
			}
			if len(f.all()) != 0 {
				t.Errorf("a holder that lost its lease wrote memories")
			}
		})
	})
}

func TestBudgetSpentWaits(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		cfg := f.srv.Config()
		cfg.ProjectBudgets = map[string]int64{project: 10}
		client, err := llm.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		x, err := extract.New(f.st, client, f.emb, f.pub, f.cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.srv.Enqueue(reply(nil), reply(nil))
		if _, err := x.HandleTurn(f.ctx, userTurn("t1", "The first turn spends the day's budget of this project.")); err != nil {
			t.Fatal(err)
		}
		_, err = x.HandleTurn(f.ctx, userTurn("t2", "The second turn finds the budget spent and has to wait."))
		if !errors.Is(err, llm.ErrBudgetExhausted) {
			t.Fatalf("err = %v, want the budget spent", err)
		}
		if c := extract.Classify(err); runner.IsPermanent(c) || runner.IsUnavailable(c) {
			t.Errorf("budget classified %v, want a delay until the reset", c)
		}
		if n := f.extractCalls(); n != 1 {
			t.Errorf("model calls = %d, want 1 (the budget check precedes the call)", n)
		}
		msgs, err := f.st.Messages(f.ctx, ref(), 0, 0)
		if err != nil || len(msgs) != 4 {
			t.Errorf("transcript: %d messages, %v; want both turns stored", len(msgs), err)
		}
	})
}

func TestSpanStartBeyondTheWindow(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open, func(c *extract.Config) { c.ScanWindow = 1 })
		f.srv.Enqueue(reply(nil))
		f.handle(userTurn("t1", "Turn one: set up the repository layout."))
		f.srv.Down()
		for _, id := range []string{"t2", "t3"} {
			if _, err := f.x.HandleTurn(f.ctx, userTurn(id, "Turn "+id+": keep working on the layout.")); !errors.Is(err, llm.ErrUnavailable) {
				t.Fatalf("%s: %v", id, err)
			}
		}
		f.srv.Up()
		f.srv.Enqueue(reply(nil))
		res := f.handle(userTurn("t3", "Turn t3: keep working on the layout.")) // redelivered first
		if res.Spans != 1 {
			t.Fatalf("spans = %d, want 1", res.Spans)
		}
		um := f.userMessages()
		last := um[len(um)-1]
		last = last[strings.Index(last, "TRANSCRIPT:"):]
		if !contains(last, "Turn t2:") || !contains(last, "Turn t3:") || contains(last, "Turn one") {
			t.Errorf("span found beyond a window of one message = %q, want t2 and t3 only", last)
		}
		if res := f.handle(userTurn("t2", "Turn t2: keep working on the layout.")); res.Spans != 0 {
			t.Errorf("t2 redelivered after its span: %+v", res)
		}
	})
}
