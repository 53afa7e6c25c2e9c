package compact_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

const (
	project = "acme/web"
	session = "chat 1"
)

func sref() memory.SessionRef { return memory.SessionRef{Project: project, Session: session} }

// eachStore runs f once per available backend (SQLite always, Redis 8 when
// ENGRAM_TEST_REDIS_URL is set; required under CI).
func eachStore(t *testing.T, f func(t *testing.T, open func(t testing.TB) memory.Store)) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f(t, func(t testing.TB) memory.Store { return b.Open(t) })
	})
}

// recorder is a Publisher that keeps what it was given.
type recorder struct {
	mu  sync.Mutex
	evs []events.Envelope
}

func (r *recorder) Publish(_ context.Context, e events.Envelope) error {
	if err := e.Validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, e)
	return nil
}

func (r *recorder) done() []events.CompactionDone {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []events.CompactionDone
	for _, e := range r.evs {
		if cd, ok := e.Payload.(events.CompactionDone); ok {
			out = append(out, cd)
		}
	}
	return out
}

// fixture is a compactor on a real store and the real Ollama client talking
// to the scripted server.
type fixture struct {
	t      testing.TB
	ctx    context.Context
	st     memory.Store
	srv    *llmtest.Server
	client *llm.Client
	pub    *recorder
	c      *compact.Compactor
	cfg    compact.Config
	turns  int
}

func newFixture(t testing.TB, open func(t testing.TB) memory.Store, mod ...func(*compact.Config)) *fixture {
	t.Helper()
	// Replies are held to num_predict, as Ollama holds them.
	f := &fixture{t: t, ctx: context.Background(), st: open(t), srv: llmtest.New(t, llmtest.WithOutputLimit()), pub: &recorder{}}
	f.client = f.srv.Client()
	f.cfg = compact.Defaults()
	for _, m := range mod {
		m(&f.cfg)
	}
	c, err := compact.New(f.st, f.client, f.pub, f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	return f
}

// grepOutput pads a turn's tool result to a realistic size (a summary
// must be smaller than what it covers).
var grepOutput = strings.Repeat("deploy.sh:12: kubectl rollout status deployment/web --timeout=120s\n", 16)

// turn stores one turn: the user's text, an assistant message with a tool
// call, its result and the assistant's answer.
func (f *fixture) turn(user string) {
	f.t.Helper()
	f.turns++
	id := fmt.Sprintf("t%d", f.turns)
	call := "call-" + id
	msgs := []memory.Message{
		{Role: memory.RoleUser, Content: user},
		{Role: memory.RoleAssistant, Content: "Let me look.", ToolCalls: []memory.ToolCall{{ID: call, Name: "bash", Arguments: `{"cmd":"grep -rn deploy ` + id + `"}`}}},
		{Role: memory.RoleTool, ToolName: "bash", ToolCallID: call, ToolStatus: memory.ToolOK, Content: "deploy.sh:3: kubectl apply -f k8s/ (" + id + ")\n" + grepOutput},
		{Role: memory.RoleAssistant, Content: "Done with " + id + "."},
	}
	if _, _, err := f.st.AppendTranscript(f.ctx, sref(), id, msgs); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) report(tokens, window int64) compact.Report {
	return compact.Report{EventID: events.NewID(), Project: project, Session: session, InputTokens: tokens,
		ContextWindow: window, At: time.Now()}
}

func (f *fixture) compact(r compact.Report) compact.Result {
	f.t.Helper()
	res, err := f.c.Compact(f.ctx, r)
	if err != nil {
		f.t.Fatalf("Compact: %v", err)
	}
	return res
}

func (f *fixture) summary() memory.Summary {
	f.t.Helper()
	s, err := f.st.LatestSummary(f.ctx, sref())
	if err != nil {
		f.t.Fatalf("LatestSummary: %v", err)
	}
	return s
}

// lastPrompt is the user message of the last summary call.
func (f *fixture) lastPrompt() string {
	f.t.Helper()
	req := f.srv.LastChat()
	var b strings.Builder
	for _, m := range req.Messages {
		if m.Role == "user" {
			b.WriteString(m.Content)
		}
	}
	return b.String()
}

// summaryText is a well-formed summary reply.
func summaryText(task string) string {
	return "## Active task\n\"" + task + "\"\n\n## Goal\nShip the deploy script.\n\n## Completed actions\n1. Read deploy.sh - found kubectl apply - bash\n"
}
