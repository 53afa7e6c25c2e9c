package consolidate_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// passObserver records how passes ended (the metrics' view).
type passObserver struct {
	mu    sync.Mutex
	ended []string // "verdict:messages"
}

func (o *passObserver) ConsolidationPass(v string, messages int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = append(o.ended, fmt.Sprintf("%s:%d", v, messages))
}

// scripted answers the i-th chat request (from 0) with reply(i) and
// records the session's cursor when each request came.
type scripted struct {
	mu      sync.Mutex
	f       *fixture
	reply   func(i int) llmtest.Reply
	cursors []int64
}

func (s *scripted) install() {
	s.f.srv.OnChatAlways(llmtest.Any(), llmtest.Func(func(api.ChatRequest) llmtest.Reply {
		s.mu.Lock()
		defer s.mu.Unlock()
		c, err := s.f.st.Cursor(s.f.ctx, ref())
		if err != nil {
			s.f.t.Error(err)
		}
		s.cursors = append(s.cursors, c)
		return s.reply(len(s.cursors) - 1)
	}))
}

// sixMessages is a session of three turns: messages 1..6, "M0001".."M0006".
func sixMessages(f *fixture) {
	for i := 1; i <= 5; i += 2 {
		f.say(fmt.Sprintf("M%04d I said something.", i), fmt.Sprintf("M%04d The assistant answered.", i+1))
	}
}

// TestStuckPassIsReadAgainThenSkipped: a model that answers in prose
// only ends a pass stuck; the cursor does not move past what it failed on
// (the unread tail stays too): the next pass reads the window again,
// halved, up to Attempts (3) passes; the last one's window is skipped
// (the cursor moves past it), and the journal, consolidation_done and the
// metric say so. The passes after it read on normally.
func TestStuckPassIsReadAgainThenSkipped(t *testing.T) {
	cfg := consolidate.Defaults()
	cfg.WindowMessages = 4
	obs := &passObserver{}
	f := newFixtureConfig(t, sqliteStore(t), cfg, consolidate.WithObserver(obs))
	sixMessages(f)
	nudges := cfg.Limits.MaxNudges + 1 // prose answers that end a pass stuck
	s := &scripted{f: f, reply: func(i int) llmtest.Reply {
		if i < 3*nudges {
			return llmtest.Text("Here is a summary of the conversation.")
		}
		return done()
	}}
	s.install()
	res := f.run()

	passes := firstSteps(f.srv.ChatRequests())
	var windows [][]int64
	for _, p := range passes {
		windows = append(windows, windowIDs(t, p))
	}
	want := [][]int64{{1, 2, 3, 4}, {1, 2}, {1}, {2, 3, 4, 5}, {6}}
	if fmt.Sprint(windows) != fmt.Sprint(want) {
		t.Fatalf("windows %v, want %v (the same window again, halved, then on from the skipped one)", windows, want)
	}
	// The cursor at each request: unmoved through the three stuck passes.
	for i, c := range s.cursors[:3*nudges] {
		if c != 0 {
			t.Fatalf("request %d (a stuck attempt) saw cursor %d: the cursor moved past what no pass consolidated", i, c)
		}
	}
	if c := s.cursors[3*nudges]; c != 1 {
		t.Fatalf("after the skip the cursor is %d, want 1 (past the skipped window only)", c)
	}
	if f.cursor() != 6 {
		t.Fatalf("cursor %d at the end", f.cursor())
	}
	var verdicts []string
	for _, p := range res.Passes {
		verdicts = append(verdicts, p.Verdict)
	}
	if strings.Join(verdicts, ",") != "stuck,stuck,skipped,done,done" {
		t.Fatalf("verdicts %v", verdicts)
	}
	ds := f.pub.done(t)
	if len(ds) != 5 || ds[0].Reason != "stuck" || ds[0].UpTo != 0 || ds[0].From != 1 ||
		ds[2].Reason != "skipped" || ds[2].UpTo != 1 || ds[3].UpTo != 5 || ds[4].UpTo != 6 {
		t.Fatalf("consolidation_done %+v", ds)
	}
	if got := strings.Join(obs.ended, ","); got != "stuck:4,stuck:2,skipped:1,done:4,done:1" {
		t.Fatalf("observed %s", got)
	}
	var out strings.Builder
	consolidate.WriteJournal(&out, res.Passes[2])
	if !strings.Contains(out.String(), "finished (skipped)") || !strings.Contains(out.String(), "read message 1 ") ||
		!strings.Contains(out.String(), "skipped: 3 passes over these messages ended without memory_done") {
		t.Errorf("journal of the skipping pass:\n%s", out.String())
	}
	out.Reset()
	consolidate.WriteJournal(&out, res.Passes[0])
	if !strings.Contains(out.String(), "read messages 1-4") || !strings.Contains(out.String(), "the next pass reads these messages again") {
		t.Errorf("journal of the first stuck pass:\n%s", out.String())
	}
}

// TestBudgetPassLeavesTheTail: a pass over budget (12 steps of stores,
// never memory_done) keeps the cursor where it was: the next pass reads the
// window again, halved; the tail the budget pass never saw is read by the
// passes after it.
func TestBudgetPassLeavesTheTail(t *testing.T) {
	cfg := consolidate.Defaults()
	cfg.WindowMessages = 4
	f := newFixtureConfig(t, sqliteStore(t), cfg)
	sixMessages(f)
	lim := cfg.Limits
	s := &scripted{f: f, reply: func(i int) llmtest.Reply {
		if i <= lim.Budget {
			return remember(fmt.Sprintf("The user's garden has plant number %d, a %s.", i, []string{"rose", "fern", "tulip", "oak", "ivy",
				"mint", "sage", "lily", "iris", "moss", "pine", "yew", "elm"}[i]), "observation")
		}
		return done()
	}}
	s.install()
	res := f.run()
	var windows [][]int64
	for _, p := range firstSteps(f.srv.ChatRequests()) {
		windows = append(windows, windowIDs(t, p))
	}
	if fmt.Sprint(windows) != fmt.Sprint([][]int64{{1, 2, 3, 4}, {1, 2}, {3, 4, 5, 6}}) {
		t.Fatalf("windows %v", windows)
	}
	if res.Passes[0].Verdict != "budget" || res.Passes[0].Steps != lim.Budget+1 {
		t.Fatalf("first pass %s after %d steps", res.Passes[0].Verdict, res.Passes[0].Steps)
	}
	for i := 0; i <= lim.Budget+1; i++ {
		if s.cursors[i] != 0 {
			t.Fatalf("request %d saw cursor %d: the budget pass moved it", i, s.cursors[i])
		}
	}
	if ds := f.pub.done(t); len(ds) != 3 || ds[0].Reason != "budget" || ds[0].UpTo != 0 || ds[0].Stored != lim.Budget+1 ||
		ds[1].UpTo != 2 || ds[2].UpTo != 6 {
		t.Fatalf("consolidation_done %+v", ds)
	}
	// What the budget pass stored stays stored.
	if n := len(f.liveTexts()); n != lim.Budget+1 {
		t.Fatalf("%d facts live, want %d", n, lim.Budget+1)
	}
}

// TestAttemptsSurviveARestart: the retry count is in the journal: a new
// run (a redelivery, another replica) after a stuck pass goes on with the
// next attempt over the same window, not the first.
func TestAttemptsSurviveARestart(t *testing.T) {
	cfg := consolidate.Defaults()
	cfg.WindowMessages = 4
	f := newFixtureConfig(t, sqliteStore(t), cfg)
	sixMessages(f)
	nudges := cfg.Limits.MaxNudges + 1
	// The model is stuck for the first pass, then goes away.
	s := &scripted{f: f, reply: func(i int) llmtest.Reply {
		if i < nudges {
			return llmtest.Text("Nothing to do.")
		}
		return llmtest.ServerError("model runner crashed")
	}}
	s.install()
	if _, err := f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session}); err == nil {
		t.Fatal("a run whose model failed succeeded")
	}
	ps, err := f.st.Passes(f.ctx, memory.PassQuery{Project: project, Session: session})
	if err != nil || len(ps) != 2 || ps[1].Verdict != "stuck" || ps[0].Status != memory.PassRunning {
		t.Fatalf("journal after the outage: %+v %v", ps, err)
	}
	// The cut-off second attempt is resumed with its window (1-2), and the
	// third attempt follows it.
	f.srv.Reset()
	s2 := &scripted{f: f, reply: func(i int) llmtest.Reply {
		if i < 2*nudges {
			return llmtest.Text("Nothing to do.")
		}
		return done()
	}}
	s2.install()
	res := f.run()
	var windows [][]int64
	for _, r := range f.srv.ChatRequests() {
		if w := windowIDs(t, r); len(windows) == 0 || fmt.Sprint(windows[len(windows)-1]) != fmt.Sprint(w) {
			windows = append(windows, w)
		}
	}
	if fmt.Sprint(windows) != fmt.Sprint([][]int64{{1, 2}, {1}, {2, 3, 4, 5}, {6}}) {
		t.Fatalf("windows after the restart %v", windows)
	}
	if res.Passes[1].Verdict != "skipped" {
		t.Fatalf("the third attempt ended %q, want skipped", res.Passes[1].Verdict)
	}
}

// TestFromRereads: Request.From (engram consolidate -from N) finishes the
// session's open pass first, then sets the cursor back and reads from
// message N on; a message id past the transcript is refused.
func TestFromRereads(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	sixMessages(f)
	// A pass cut off by the model: open, holding one stored fact.
	f.srv.Enqueue(remember("The user said something.", "observation"), llmtest.ServerError("model runner crashed"))
	if _, err := f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session}); err == nil {
		t.Fatal("a run whose model failed succeeded")
	}
	f.srv.Reset()
	f.srv.OnChatAlways(llmtest.Any(), done())
	res, err := f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session, From: 3})
	if err != nil {
		t.Fatal(err)
	}
	var windows [][]int64
	for _, p := range firstSteps(f.srv.ChatRequests()) {
		windows = append(windows, windowIDs(t, p))
	}
	// The open pass resumes at its second step (no first step to see),
	// then the re-read from 3.
	reqs := f.srv.ChatRequests()
	if len(res.Passes) != 2 || res.Passes[0].Steps != 2 || fmt.Sprint(windowIDs(t, reqs[0])) != "[1 2 3 4 5 6]" ||
		fmt.Sprint(windows) != "[[3 4 5 6]]" || f.cursor() != 6 {
		t.Fatalf("%d passes, first %d steps, windows %v (first request %v), cursor %d", len(res.Passes), res.Passes[0].Steps, windows, windowIDs(t, reqs[0]), f.cursor())
	}
	if res.Passes[1].From != 3 || res.Passes[1].UpTo != 6 {
		t.Fatalf("the re-read pass read %d-%d", res.Passes[1].From, res.Passes[1].UpTo)
	}
	if _, err := f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session, From: 7}); !errors.Is(err, memory.ErrInvalid) {
		t.Fatalf("from past the end: %v", err)
	}
	if f.cursor() != 6 {
		t.Fatalf("a refused -from moved the cursor to %d", f.cursor())
	}
}
