package extract_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// outageTurns is the length of the conversation held during the outage.
const outageTurns = 20

// factLabel is the memory the scripted model extracts from turn n (odd n
// only, so that a span of 8 turns states 4 facts, under the 5 a reply may
// hold). Its words are n's own, so no two facts look alike.
func factLabel(n int) string {
	return fmt.Sprintf("Gateway zq%da routes through zq%db.", n, n)
}

func outageUserText(n int) string {
	if n%2 == 1 {
		return fmt.Sprintf("Turn %d: remember this. %s", n, factLabel(n))
	}
	return fmt.Sprintf("Turn %d: thanks, carry on with the next step.", n)
}

var (
	injectedRE = regexp.MustCompile(`(?m)^\[([^\]]+)\] \(`)
	turnRE     = regexp.MustCompile(`(?m)^USER: Turn (\d+):`)
)

// extraction is one extraction request the scripted model received: the
// turns its transcript holds, in order.
type extraction struct {
	turns []int
}

// outageModel scripts the extraction model: "used" for every injected
// memory, and one decision per fact of the transcript. A request whose
// transcript starts at turn blockAt waits (once) until release is closed.
type outageModel struct {
	mu      sync.Mutex
	calls   []extraction
	blockAt int
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (m *outageModel) reply(req api.ChatRequest) llmtest.Reply {
	var user string // the prompt (a repair request adds messages after it)
	for _, m := range req.Messages {
		if m.Role == "user" && strings.Contains(m.Content, "TRANSCRIPT:") {
			user = m.Content
			break
		}
	}
	injected, transcript, _ := strings.Cut(user, "TRANSCRIPT:")
	var call extraction
	for _, sm := range turnRE.FindAllStringSubmatch(transcript, -1) {
		n, _ := strconv.Atoi(sm[1])
		call.turns = append(call.turns, n)
	}
	if len(call.turns) > 0 && call.turns[0] == m.blockAt {
		blocked := false
		m.once.Do(func() { blocked = true })
		if blocked {
			close(m.entered)
			<-m.release // the extractor is restarted meanwhile; this reply reaches nobody
		}
	}
	m.mu.Lock()
	m.calls = append(m.calls, call)
	m.mu.Unlock()
	var verdicts []extract.ReplyVerdict
	for _, sm := range injectedRE.FindAllStringSubmatch(injected, -1) {
		verdicts = append(verdicts, extract.ReplyVerdict{ID: sm[1], Verdict: "used"})
	}
	var mems []extract.ReplyMemory
	for _, n := range call.turns {
		if n%2 == 1 {
			mems = append(mems, extract.ReplyMemory{Subkind: "decision", Scope: "project", Reach: "here", AssertedBy: "user",
				Label: factLabel(n), Confidence: 0.95})
		}
	}
	return reply(verdicts, mems...)
}

func (m *outageModel) all() []extraction {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

// TestTranscriptsStoredWhileModelDown: 20 turns end while the model is
// down. Each turn's transcript is stored at once (the transcript consumer
// needs no model) while the extractor consumer waits; when the model is
// back the judgements and extractions catch up oldest first, in spans, each
// exactly once, across a restart of the extractor in the middle of a span;
// nothing is dead-lettered. Before the transcript consumer, the extractor
// paused as a whole and nothing was stored until the model came back.
func TestTranscriptsStoredWhileModelDown(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		l := newLoop(t, open)
		model := &outageModel{blockAt: 9, entered: make(chan struct{}), release: make(chan struct{})}
		defer func() {
			select {
			case <-model.release:
			default:
				close(model.release)
			}
		}()
		l.srv.OnChatAlways(llmtest.SystemContains("long-term memory"), llmtest.Func(model.reply))

		// What the injector recorded for each turn: one memory of its own.
		injected := make([]memory.Node, outageTurns+1)
		for n := 1; n <= outageTurns; n++ {
			injected[n] = l.seed(memory.Node{Subkind: memory.Pattern, Label: fmt.Sprintf("Note zm%dp about zm%dq.", n, n), Confidence: 0.7})
			if err := l.st.PutInjection(l.ctx, ref(), "t"+strconv.Itoa(n), memory.Injection{IDs: []string{injected[n].ID}}, time.Hour); err != nil {
				t.Fatal(err)
			}
		}

		l.srv.Down()
		for n := 1; n <= outageTurns; n++ {
			l.turnEnded("t"+strconv.Itoa(n), outageUserText(n))
			// Visible at once, before the next turn ends, with the model down.
			waitFor(t, fmt.Sprintf("turn %d stored", n), func() bool {
				msgs, err := l.st.Messages(l.ctx, ref(), 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				return len(msgs) == 2*n
			})
		}
		msgs, err := l.st.Messages(l.ctx, ref(), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range msgs {
			if want := "t" + strconv.Itoa(i/2+1); m.TurnID != want {
				t.Fatalf("message %d belongs to turn %s, want %s", m.ID, m.TurnID, want)
			}
		}
		// Nothing judged or extracted yet: the extractor consumer holds
		// every turn, and the model was never called.
		cons, err := l.js.Consumer(l.ctx, l.topo.In.Name, events.ConsumerExtractor)
		if err != nil {
			t.Fatal(err)
		}
		info, err := cons.Info(l.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.NumPending + uint64(info.NumAckPending); got != outageTurns {
			t.Errorf("the extractor consumer holds %d turns during the outage, want %d", got, outageTurns)
		}
		if n := l.srv.Calls("/api/chat"); n != 0 {
			t.Errorf("%d chat calls with the model down", n)
		}
		if l.turnDone("t1") || l.get(injected[1].ID).Useful != 0 {
			t.Error("turn 1 judged with the model down")
		}

		// The model is back: spans of at most 8 turns, oldest first. The
		// second span's call hangs; the extractor is restarted meanwhile
		// (a fresh Extractor: nothing carried over in process memory).
		l.srv.Up()
		select {
		case <-model.entered:
		case <-time.After(60 * time.Second):
			t.Fatalf("the second span never reached the model; calls %v", model.all())
		}
		l.restartExtractor()
		close(model.release)

		waitFor(t, "every turn extracted", func() bool {
			for n := 1; n <= outageTurns; n++ {
				if !l.turnDone("t" + strconv.Itoa(n)) {
					return false
				}
			}
			return true
		})
		waitFor(t, "the extractor consumer drained", func() bool {
			info, err := cons.Info(l.ctx)
			return err == nil && info.NumPending == 0 && info.NumAckPending == 0
		})

		// In order: each call's turns are contiguous and start at most one
		// past the newest turn covered so far (oldest first, nothing
		// skipped); a call may repeat turns only when its reply reached
		// nobody (the interrupted one, redone from turn 9) or could not be
		// recorded (a store failure); the effects below are exactly once
		// either way.
		calls := model.all()
		covered := 0
		redone := false
		for _, c := range calls {
			if len(c.turns) == 0 || len(c.turns) > extract.Defaults().SpanTurns {
				t.Errorf("a span of %d turns: %v", len(c.turns), c.turns)
				continue
			}
			for i := 1; i < len(c.turns); i++ {
				if c.turns[i] != c.turns[i-1]+1 {
					t.Errorf("a span out of order: %v", c.turns)
				}
			}
			if c.turns[0] > covered+1 {
				t.Errorf("a span starts at turn %d while turn %d is not extracted: %v", c.turns[0], covered+1, c.turns)
			}
			if c.turns[0] <= covered {
				redone = true
			}
			covered = max(covered, c.turns[len(c.turns)-1])
		}
		if covered != outageTurns || !redone || len(calls) < 4 {
			t.Errorf("the extraction calls covered turns up to %d in %d calls (redone: %v); want %d, the interrupted span redone: %v",
				covered, len(calls), redone, outageTurns, calls)
		}
		t.Logf("extraction calls after the outage, turns covered: %v", calls)
		for n := 1; n <= outageTurns; n++ {
			if got := l.get(injected[n].ID); got.Useful != 1 || got.Unhelpful != 0 {
				t.Errorf("memory injected into turn %d: useful %d, unhelpful %d; want judged once", n, got.Useful, got.Unhelpful)
			}
		}
		labels := map[string]int{}
		for _, n := range l.all() {
			if n.Live() {
				labels[n.Label]++
			}
		}
		for n := 1; n <= outageTurns; n += 2 {
			if labels[factLabel(n)] != 1 {
				t.Errorf("fact of turn %d stored %d times, want once", n, labels[factLabel(n)])
			}
		}
		if n := l.streamCount(l.topo.DLQ.Name); n != 0 {
			t.Errorf("%d dead letters", n)
		}
	})
}

// restartExtractor stops the extractor consumer's runner at once (handlers
// in flight are cut short and their events redelivered) and starts a new
// one on a new Extractor, as a restarted process would.
func (l *loop) restartExtractor() {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_ = l.extractor.Stop(ctx) // "handlers cut short": the point
	l.stopped = append(l.stopped, l.extractor)
	x, err := extract.New(l.st, l.fixture.client, l.emb, l.client, l.cfg)
	if err != nil {
		l.t.Fatal(err)
	}
	l.x = x
	l.extractor = l.start(events.ConsumerExtractor, extract.NewHandler(x, nil).Handle, l.modelGate)
}

// TestBacklogSpansFitTheTranscript: turns stored while the model was down
// (StoreTurn calls no model) are extracted oldest first in spans whose
// transcript the model reads whole: three turns of 7,000 characters fit the
// 24,000-character transcript, so six make two spans, and no prompt has
// its head cut ("earlier messages omitted"), which one span of all six
// would.
func TestBacklogSpansFitTheTranscript(t *testing.T) {
	eachStore(t, func(t *testing.T, open func(t testing.TB) memory.Store) {
		f := newFixture(t, open)
		f.srv.OnChatAlways(llmtest.SystemContains("long-term memory"), reply(nil))
		long := func(n int) extract.Turn {
			return userTurn("t"+strconv.Itoa(n), fmt.Sprintf("Turn %d: %s", n, strings.Repeat("the build log says ", 7000/19)))
		}
		for n := 1; n <= 5; n++ {
			res, err := f.x.StoreTurn(f.ctx, long(n))
			if err != nil || !res.Appended {
				t.Fatalf("store turn %d: %+v, %v", n, res, err)
			}
		}
		if n := f.srv.Calls("/api/chat"); n != 0 {
			t.Fatalf("StoreTurn called the model %d times", n)
		}
		res := f.handle(long(6))
		if res.Spans != 2 {
			t.Errorf("spans = %d, want 2", res.Spans)
		}
		var covered []int
		for _, um := range f.userMessages() {
			if strings.Contains(um, "earlier messages omitted") {
				t.Errorf("a span's transcript was cut at its head")
			}
			for _, sm := range turnRE.FindAllStringSubmatch(um, -1) {
				n, _ := strconv.Atoi(sm[1])
				covered = append(covered, n)
			}
		}
		if !slices.Equal(covered, []int{1, 2, 3, 4, 5, 6}) {
			t.Errorf("spans covered turns %v, want 1..6 once, in order", covered)
		}
	})
}
