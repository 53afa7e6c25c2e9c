package compact_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

func TestThreshold(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		for _, tc := range []struct {
			name          string
			mod           func(*compact.Config)
			tokens, win   int64
			want          compact.Outcome
			wantThreshold int64
		}{
			{"half the window, below", nil, 63999, 128000, compact.BelowThreshold, 64000},
			{"half the window, reached", nil, 64000, 128000, compact.Compacted, 64000},
			{"no window: 64,000 fallback, below", nil, 63999, 0, compact.BelowThreshold, 64000},
			{"no window: 64,000 fallback, reached", nil, 64001, 0, compact.Compacted, 64000},
			{"absolute", func(c *compact.Config) { c.Threshold = compact.Threshold{Tokens: 1000} }, 1000, 128000, compact.Compacted, 1000},
			{"absolute, below", func(c *compact.Config) { c.Threshold = compact.Threshold{Tokens: 1000} }, 999, 128000, compact.BelowThreshold, 1000},
			{"per-project fraction", func(c *compact.Config) {
				c.Projects = compact.ProjectThresholds{project: {Fraction: 0.9}}
			}, 89999, 100000, compact.BelowThreshold, 90000},
			{"per-project absolute", func(c *compact.Config) {
				c.Projects = compact.ProjectThresholds{project: {Tokens: 500}, "other": {Tokens: 1}}
			}, 500, 100000, compact.Compacted, 500},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var mods []func(*compact.Config)
				if tc.mod != nil {
					mods = append(mods, tc.mod)
				}
				f := newFixture(t, open, mods...)
				f.srv.OnChatAlways(nil, llmtest.Text(summaryText("Fix the deploy")))
				for range 3 {
					f.turn("How do we deploy the web app?")
				}
				res := f.compact(f.report(tc.tokens, tc.win))
				if res.Outcome != tc.want || res.Threshold != tc.wantThreshold || res.Estimated {
					t.Fatalf("result %+v, want %s at threshold %d", res, tc.want, tc.wantThreshold)
				}
				if calls := f.srv.Calls("/api/chat"); (calls == 1) != (tc.want == compact.Compacted) {
					t.Fatalf("%d model calls for outcome %s", calls, res.Outcome)
				}
			})
		}
	})
}

func TestEstimatedTokens(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open, func(c *compact.Config) { c.Threshold = compact.Threshold{Tokens: 2000} })
		f.srv.OnChatAlways(nil, llmtest.Text(summaryText("Fix the deploy")))
		for range 3 {
			f.turn("short")
		}
		// Reported 0: the stored messages are estimated (characters / 4).
		res := f.compact(f.report(0, 0))
		if res.Outcome != compact.BelowThreshold || !res.Estimated || res.Effective <= 0 || res.Effective >= 2000 {
			t.Fatalf("small conversation: %+v", res)
		}
		msgs, err := f.st.Messages(f.ctx, sref(), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.Effective != compact.Tokens(msgs) {
			t.Fatalf("estimate %d, want %d", res.Effective, compact.Tokens(msgs))
		}
		f.turn(strings.Repeat("The deploy fails at the migration step. ", 250)) // ~10,000 characters
		res = f.compact(f.report(0, 0))
		if res.Outcome != compact.Compacted || !res.Estimated || res.Effective < 2000 {
			t.Fatalf("large conversation: %+v", res)
		}
		// After the compaction the estimate counts only the messages since
		// the summary's boundary.
		res2 := f.compact(f.report(0, 0))
		all, _ := f.st.Messages(f.ctx, sref(), 0, 0)
		if res2.Effective >= compact.Tokens(all) {
			t.Fatalf("estimate after compaction %d counts compacted messages (all: %d)", res2.Effective, compact.Tokens(all))
		}
	})
}

func TestEphemeralAndForce(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		f.srv.OnChatAlways(nil, llmtest.Text(summaryText("Fix the deploy")))
		for range 3 {
			f.turn("How do we deploy?")
		}
		r := f.report(200000, 128000)
		r.Session = "cron 1"
		r.Ephemeral, r.Force = true, true
		if res := f.compact(r); res.Outcome != compact.Ephemeral {
			t.Fatalf("ephemeral: %+v", res)
		}
		r = f.report(200000, 128000)
		r.StackID = "sub-agent"
		if res := f.compact(r); res.Outcome != compact.SubStack {
			t.Fatalf("stack: %+v", res)
		}
		if n := f.srv.Calls("/api/chat"); n != 0 {
			t.Fatalf("%d model calls for skipped reports", n)
		}
		// Forced: far below the threshold, and with no token count at all.
		r = f.report(0, 128000)
		r.Force = true
		if res := f.compact(r); res.Outcome != compact.Compacted || res.UpTo != 4 {
			t.Fatalf("forced: %+v", res)
		}
		// Forced with too few messages since the boundary: nothing to split.
		r = f.report(0, 0)
		r.Force = true
		if res := f.compact(r); res.Outcome != compact.NothingToSplit {
			t.Fatalf("forced again: %+v", res)
		}
	})
}

// engram compact sends a forced report without the ephemeral flag: the
// session's earlier report said it is ephemeral, and that is remembered.
func TestForcedCompactionOfEphemeralSessionIsRefused(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		f.srv.OnChatAlways(nil, llmtest.Text(summaryText("Fix the deploy")))
		for range 3 {
			f.turn("How do we deploy?")
		}
		r := f.report(1000, 128000)
		r.Ephemeral = true
		if res := f.compact(r); res.Outcome != compact.Ephemeral {
			t.Fatalf("ephemeral report: %+v", res)
		}
		force := f.report(0, 0)
		force.Force = true
		res, err := f.c.Compact(f.ctx, force)
		if !errors.Is(err, compact.ErrEphemeral) || res.Outcome != compact.Ephemeral ||
			!strings.Contains(err.Error(), "ephemeral") || !strings.Contains(err.Error(), "forced compaction is refused") {
			t.Fatalf("forced compaction of an ephemeral session: %+v, %v", res, err)
		}
		if !runner.IsPermanent(compact.Classify(err)) {
			t.Fatalf("refusal classified as %v, want permanent", compact.Classify(err))
		}
		if n := f.srv.Calls("/api/chat"); n != 0 {
			t.Fatalf("%d model calls for an ephemeral session", n)
		}
		if _, err := f.st.LatestSummary(f.ctx, sref()); !memory.IsNotFound(err) {
			t.Fatalf("an ephemeral session got a summary: %v", err)
		}
		// A sub-conversation's ephemeral report does not mark the session.
		other := f.report(1000, 128000)
		other.Session, other.StackID, other.Ephemeral = "chat 2", "sub-agent", true
		f.compact(other)
		other = f.report(0, 0)
		other.Session, other.Force = "chat 2", true
		if res := f.compact(other); res.Outcome != compact.NothingToSplit {
			t.Fatalf("forced compaction of another session: %+v", res)
		}
	})
}

func TestCompactionSavesPublishesAndPrompts(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		f.srv.OnChat(nil, llmtest.Text(summaryText("Fix the deploy")))
		f.turn("Please fix the deploy script, it fails on staging.")
		f.turn("Now also add a rollback step.")
		f.turn("And run the tests.")
		res := f.compact(f.report(100000, 128000))
		if res.Outcome != compact.Compacted || res.UpTo != 4 || res.Covered != 4 || res.Kept != 8 {
			t.Fatalf("result %+v", res)
		}
		sum := f.summary()
		if sum.UpTo != 4 || !strings.Contains(sum.Content, "Fix the deploy") || sum.TokensBefore != 100000 || sum.TokensAfter != res.TokensAfter {
			t.Fatalf("summary %+v", sum)
		}
		done := f.pub.done()
		if len(done) != 1 || done[0].UpTo != 4 || done[0].TokensBefore != 100000 || done[0].TokensAfter != res.TokensAfter || res.TokensAfter <= 0 {
			t.Fatalf("compaction_done %+v (result %+v)", done, res)
		}
		req := f.srv.LastChat()
		if len(req.Tools) != 0 || req.Format != nil {
			t.Fatal("the summary call has tools or a format")
		}
		if temp, _ := req.Options["temperature"].(float64); temp != 0.3 {
			t.Fatalf("temperature %v", req.Options["temperature"])
		}
		if np, _ := req.Options["num_predict"].(float64); np != 2000 {
			t.Fatalf("num_predict %v, want the 2,000 floor", req.Options["num_predict"])
		}
		promptTokens := 0
		for _, m := range req.Messages {
			promptTokens += len(m.Content) / 4
		}
		if nc, _ := req.Options["num_ctx"].(float64); int(nc) < promptTokens+2000 || int(nc)%1024 != 0 {
			t.Fatalf("num_ctx %v for a %d-token prompt and a 2,000-token reply", req.Options["num_ctx"], promptTokens)
		}
		if req.Messages[0].Role != "system" || !strings.Contains(req.Messages[0].Content, "[REDACTED]") {
			t.Fatalf("system prompt: %q", req.Messages[0].Content)
		}
		p := f.lastPrompt()
		for _, want := range []string{"Please fix the deploy script", "[USER]", "[ASSISTANT]", "-> tool call bash (id call-t1)",
			"[TOOL RESULT bash, call id call-t1, ok]", "## Active task", "## Critical context"} {
			if !strings.Contains(p, want) {
				t.Errorf("prompt lacks %q", want)
			}
		}
		if strings.Contains(p, "Now also add a rollback step") {
			t.Error("the prompt holds a kept message")
		}
		if strings.Contains(p, "PREVIOUS SUMMARY") {
			t.Error("a first compaction carries a previous summary")
		}
	})
}

func TestUpdatePromptNeverNests(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		f.srv.OnChat(nil, llmtest.Text(summaryText("Fix the deploy")))
		for range 3 {
			f.turn("How do we deploy?")
		}
		f.compact(f.report(100000, 128000))
		first := f.summary()
		// The model echoes the whole block around its update: the saved
		// summary keeps only the summary.
		f.srv.OnChat(nil, llmtest.Text(compact.Block(summaryText("Add the rollback step"))))
		f.turn("Add a rollback step.")
		f.turn("Thanks.")
		res := f.compact(f.report(100000, 128000))
		if res.Outcome != compact.Compacted || res.UpTo <= first.UpTo {
			t.Fatalf("second compaction %+v", res)
		}
		p := f.lastPrompt()
		if strings.Count(p, first.Content) != 1 || !strings.Contains(p, "<previous-summary>") ||
			!strings.Contains(p, "continue the numbered list") || !strings.Contains(p, "NEW MESSAGES") {
			t.Fatalf("update prompt does not carry the previous summary once:\n%s", p)
		}
		if strings.Contains(p, compact.Preamble) || strings.Contains(p, compact.SummaryOpen) {
			t.Fatal("the update prompt nests the previous block")
		}
		// Only the messages after the previous boundary are sent.
		if strings.Contains(p, "call-t1") {
			t.Fatal("the update prompt repeats messages the previous summary covers")
		}
		second := f.summary()
		if strings.Contains(second.Content, "COMPACTED CONTEXT") || strings.Contains(second.Content, "engram-summary") ||
			!strings.Contains(second.Content, "Add the rollback step") {
			t.Fatalf("saved summary nests: %q", second.Content)
		}
		if b := compact.Block(second.Content); strings.Count(b, compact.SummaryOpen) != 1 || strings.Count(b, compact.Preamble) != 1 {
			t.Fatalf("block nests:\n%s", b)
		}
	})
}

func TestReplyIsRedacted(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		f.srv.OnChat(nil, llmtest.Text(summaryText("Deploy")+"\n## Critical context\nDB_PASSWORD=hunter2hunter2 and token ghp_abcdefghijklmnopqrstuvwxyz0123456789\n"))
		for range 3 {
			f.turn("How do we deploy?")
		}
		f.compact(f.report(100000, 128000))
		s := f.summary().Content
		if strings.Contains(s, "hunter2") || strings.Contains(s, "ghp_abc") || !strings.Contains(s, memory.Redacted) {
			t.Fatalf("summary not redacted: %q", s)
		}
	})
}

func TestFailuresBackOff(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		f.srv.OnChatAlways(nil, llmtest.Text("   \n"))
		for range 3 {
			f.turn("How do we deploy?")
		}
		want := []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute}
		for i, d := range want {
			_, err := f.c.Compact(f.ctx, f.report(100000, 128000))
			var fe *compact.FailedError
			if !errors.As(err, &fe) || fe.Final || fe.Delay != d || fe.Failures != i+1 {
				t.Fatalf("attempt %d: %v (%+v), want a retry after %v", i+1, err, fe, d)
			}
			if cl := compact.Classify(err); runner.IsPermanent(cl) || runner.IsUnavailable(cl) || !strings.Contains(cl.Error(), "retry after "+d.String()) {
				t.Fatalf("attempt %d classified as %v", i+1, cl)
			}
		}
		_, err := f.c.Compact(f.ctx, f.report(100000, 128000))
		var fe *compact.FailedError
		if !errors.As(err, &fe) || !fe.Final || !runner.IsPermanent(compact.Classify(err)) {
			t.Fatalf("fourth attempt: %v, want final", err)
		}
		if _, err := f.st.LatestSummary(f.ctx, sref()); !memory.IsNotFound(err) {
			t.Fatalf("an empty reply was saved: %v", err)
		}
		if len(f.pub.done()) != 0 {
			t.Fatal("compaction_done without a summary")
		}
	})
}

func TestModelOutageIsUnavailable(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		for range 3 {
			f.turn("How do we deploy?")
		}
		f.srv.Down()
		_, err := f.c.Compact(f.ctx, f.report(100000, 128000))
		if !runner.IsUnavailable(compact.Classify(err)) {
			t.Fatalf("outage: %v, want unavailable", err)
		}
		f.srv.Up()
		f.srv.OnChat(nil, llmtest.ModelMissing())
		_, err = f.c.Compact(f.ctx, f.report(100000, 128000))
		if !runner.IsUnavailable(compact.Classify(err)) {
			t.Fatalf("missing model: %v, want unavailable", err)
		}
		// The outage counted no failure: the first empty reply retries
		// after the first backoff.
		f.srv.OnChat(nil, llmtest.Text(""))
		_, err = f.c.Compact(f.ctx, f.report(100000, 128000))
		var fe *compact.FailedError
		if !errors.As(err, &fe) || fe.Failures != 1 {
			t.Fatalf("after the outage: %v", err)
		}
		f.srv.OnChat(nil, llmtest.Text(summaryText("Deploy")))
		if res := f.compact(f.report(100000, 128000)); res.Outcome != compact.Compacted {
			t.Fatalf("after recovery: %+v", res)
		}
	})
}

// A model that answers 500s or times out while Ollama itself answers is a
// failure with backoff, not an outage: the model gate passes, so an
// Unavailable would have the runner redeliver at once until the report is
// dead-lettered.
func TestFailingModelBacksOff(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open, func(c *compact.Config) { c.CallTimeout = 300 * time.Millisecond })
		for range 3 {
			f.turn("How do we deploy?")
		}
		attempt := func(k int, d time.Duration) {
			t.Helper()
			_, err := f.c.Compact(f.ctx, f.report(100000, 128000))
			var fe *compact.FailedError
			if !errors.As(err, &fe) || fe.Final || fe.Failures != k || fe.Delay != d || !errors.Is(err, llm.ErrUnavailable) {
				t.Fatalf("attempt %d: %v (%+v), want failure %d retried after %v", k, err, fe, k, d)
			}
			if cl := compact.Classify(err); runner.IsUnavailable(cl) || runner.IsPermanent(cl) || !strings.Contains(cl.Error(), "retry after "+d.String()) {
				t.Fatalf("attempt %d classified as %v", k, cl)
			}
		}
		f.srv.OnChat(nil, llmtest.ServerError("llama runner process has terminated: signal: killed"))
		attempt(1, time.Minute)
		f.srv.OnChat(nil, llmtest.Busy())
		attempt(2, 5*time.Minute)
		f.srv.SetLatency(5 * time.Second) // beyond the call timeout
		attempt(3, 15*time.Minute)
		f.srv.SetLatency(0)
		// Every request failing (the gate fails too) is still an outage.
		f.srv.SetUnavailable(true)
		if _, err := f.c.Compact(f.ctx, f.report(100000, 128000)); !runner.IsUnavailable(compact.Classify(err)) {
			t.Fatalf("all requests 503: %v, want unavailable", err)
		}
		f.srv.SetUnavailable(false)
		f.srv.OnChat(nil, llmtest.Text(summaryText("Deploy")))
		if res := f.compact(f.report(100000, 128000)); res.Outcome != compact.Compacted {
			t.Fatalf("after recovery: %+v", res)
		}
	})
}

func TestLeaseAndCoveredReports(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		f.srv.OnChatAlways(nil, llmtest.Text(summaryText("Deploy")))
		for range 3 {
			f.turn("How do we deploy?")
		}
		// Another replica compacts the session: this report is covered by it.
		ok, err := f.st.AcquireLease(f.ctx, sref(), compact.LeaseName, "other-replica", time.Minute)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if res := f.compact(f.report(100000, 128000)); res.Outcome != compact.Busy {
			t.Fatalf("lease held: %+v", res)
		}
		if err := f.st.ReleaseLease(f.ctx, sref(), compact.LeaseName, "other-replica"); err != nil {
			t.Fatal(err)
		}
		stale := f.report(100000, 128000)
		stale.At = time.Now().Add(-time.Minute)
		if res := f.compact(f.report(100000, 128000)); res.Outcome != compact.Compacted {
			t.Fatalf("first: %+v", res)
		}
		// A report queued before that compaction describes the context
		// before it: covered, whatever it says.
		for range 2 {
			f.turn("More work.")
		}
		if res := f.compact(stale); res.Outcome != compact.Covered {
			t.Fatalf("stale report: %+v", res)
		}
		if n := f.srv.Calls("/api/chat"); n != 1 {
			t.Fatalf("%d model calls, want 1", n)
		}
		// The lease was released after each run.
		ok, err = f.st.AcquireLease(f.ctx, sref(), compact.LeaseName, "probe", time.Minute)
		if err != nil || !ok {
			t.Fatalf("lease not released: %v %v", ok, err)
		}
	})
}

func TestRepublishAfterCrash(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		// A summary saved by a run that died before it published.
		if err := f.st.SaveSummary(f.ctx, sref(), memory.Summary{Content: "## Active task\nNone", UpTo: 4, TokensBefore: 90000, TokensAfter: 3000}); err != nil {
			t.Fatal(err)
		}
		// A report under the threshold does not look at the store; the
		// next run under the lease publishes what was missed, once.
		f.compact(f.report(10, 128000))
		if len(f.pub.done()) != 0 {
			t.Fatal("a report under the threshold read the store")
		}
		force := f.report(0, 0)
		force.Force = true
		f.compact(force)
		f.compact(force)
		done := f.pub.done()
		if len(done) != 1 || done[0].UpTo != 4 || done[0].TokensBefore != 90000 || done[0].TokensAfter != 3000 {
			t.Fatalf("compaction_done %+v, want one for the saved summary", done)
		}
	})
}

func TestTokenBudgetWaitsForTheReset(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		cfg := f.srv.Config()
		cfg.DailyTokenBudget = 100 // spent by the first call's prompt
		client, err := llm.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c, err := compact.New(f.st, client, f.pub, f.cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.srv.OnChatAlways(nil, llmtest.Text(summaryText("Deploy")))
		for range 3 {
			f.turn("How do we deploy?")
		}
		if res, err := c.Compact(f.ctx, f.report(100000, 128000)); err != nil || res.Outcome != compact.Compacted {
			t.Fatalf("first: %+v %v", res, err)
		}
		for range 3 {
			f.turn("More.")
		}
		_, err = c.Compact(f.ctx, f.report(100000, 128000))
		cl := compact.Classify(err)
		if !errors.Is(err, llm.ErrBudgetExhausted) || runner.IsPermanent(cl) || runner.IsUnavailable(cl) || !strings.Contains(cl.Error(), "retry after") {
			t.Fatalf("budget spent: %v -> %v", err, cl)
		}
		// Not a failure: nothing counted against the boundary.
		f.srv.Reset()
		f.srv.OnChat(nil, llmtest.Text(""))
		_, err = f.c.Compact(f.ctx, f.report(100000, 128000))
		var fe *compact.FailedError
		if !errors.As(err, &fe) || fe.Failures != 1 {
			t.Fatalf("after the budget: %v", err)
		}
	})
}

func TestInvalidRequestIsPermanent(t *testing.T) {
	if !runner.IsPermanent(compact.Classify(fmt.Errorf("x: %w", llm.ErrInvalidRequest))) {
		t.Fatal("an invalid request is retried")
	}
	if !runner.IsUnavailable(compact.Classify(fmt.Errorf("x: %w", memory.ErrUnavailable))) {
		t.Fatal("a store outage is not unavailable")
	}
}

// TestConcurrentReports: a report that arrives while a compaction of its
// session runs is covered by it (Busy, no second model call), and the
// running one holds its lease past the TTL while the model works.
func TestConcurrentReports(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open, func(c *compact.Config) { c.LeaseTTL = 150 * time.Millisecond })
		f.srv.OnChat(nil, llmtest.Text(summaryText("Deploy")).After(600*time.Millisecond))
		for range 3 {
			f.turn("How do we deploy?")
		}
		done := make(chan compact.Result, 1)
		go func() {
			res, err := f.c.Compact(f.ctx, f.report(100000, 128000))
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		deadline := time.Now().Add(10 * time.Second)
		for f.srv.Calls("/api/chat") == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(400 * time.Millisecond) // past the lease TTL: renewed
		if res := f.compact(f.report(100000, 128000)); res.Outcome != compact.Busy {
			t.Fatalf("concurrent report: %+v", res)
		}
		if res := <-done; res.Outcome != compact.Compacted {
			t.Fatalf("running compaction: %+v", res)
		}
		if n := f.srv.Calls("/api/chat"); n != 1 {
			t.Fatalf("%d model calls", n)
		}
	})
}

// TestBusyReportIsNotAcknowledged: a report that finds the session's lease
// held is retried (ErrBusy, transient), not acknowledged: the holder may
// be a worker killed mid-run whose lease only expires, and the report the
// session's last. Once the lease is free the retry compacts.
func TestBusyReportIsNotAcknowledged(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		h := compact.NewHandler(f.c, nil)
		f.srv.OnChatAlways(nil, llmtest.Text(summaryText("Deploy")))
		for range 3 {
			f.turn("How do we deploy?")
		}
		const ttl = 1500 * time.Millisecond
		ok, err := f.st.AcquireLease(f.ctx, sref(), compact.LeaseName, "killed-worker", ttl)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		expires := time.Now().Add(ttl)
		ev := events.New(events.Ref{ProjectID: project, SessionID: session}, events.TokensReported{InputTokens: 100000, ContextWindow: 128000})
		err = h.Handle(f.ctx, ev)
		if !errors.Is(err, compact.ErrBusy) || runner.IsPermanent(err) || runner.IsUnavailable(err) {
			t.Fatalf("handled while another run holds the session: %v, want ErrBusy (transient)", err)
		}
		if n := f.srv.Calls("/api/chat"); n != 0 {
			t.Fatalf("%d model calls while busy", n)
		}
		time.Sleep(time.Until(expires) + 100*time.Millisecond)
		if err := h.Handle(f.ctx, ev); err != nil {
			t.Fatalf("the retry after the lease expired: %v", err)
		}
		if s := f.summary(); s.UpTo <= 0 || len(f.pub.evs) != 1 {
			t.Fatalf("after the retry: summary up to %d, %d events published", s.UpTo, len(f.pub.evs))
		}
	})
}
