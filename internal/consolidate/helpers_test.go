package consolidate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

const (
	project = "proj"
	session = "sess"
)

func ref() memory.SessionRef { return memory.SessionRef{Project: project, Session: session} }

// recorder is a Publisher that keeps what it was given.
type recorder struct {
	mu   sync.Mutex
	evs  []events.Envelope
	fail int // publishes still to fail (a NATS outage)
}

func (r *recorder) Publish(_ context.Context, e events.Envelope) error {
	if err := e.Validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		return errors.New("nats: connection closed (the test's outage)")
	}
	r.evs = append(r.evs, e)
	return nil
}

func (r *recorder) done(t testing.TB) []events.ConsolidationDone {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []events.ConsolidationDone
	for _, e := range r.evs {
		d, err := events.PayloadAs[events.ConsolidationDone](e)
		if err != nil {
			t.Fatalf("published %s: %v", e.Type, err)
		}
		out = append(out, d)
	}
	return out
}

// fixture is a consolidator on a real store and the real Ollama client
// talking to the scripted server.
type fixture struct {
	t      testing.TB
	ctx    context.Context
	st     memory.Store
	srv    *llmtest.Server
	client *llm.Client
	emb    consolidate.Embedder
	pub    *recorder
	c      *consolidate.Consolidator
	cfg    consolidate.Config
	turns  int
}

func newFixture(t testing.TB, st memory.Store, opts ...consolidate.Option) *fixture {
	t.Helper()
	return newFixtureConfig(t, st, consolidate.Defaults(), opts...)
}

// newFixtureWindow is newFixture with the consolidation model's context
// window set to window tokens (the client's setting, as
// ENGRAM_CONSOLIDATE_CONTEXT_LENGTH gives it).
func newFixtureWindow(t testing.TB, window int, opts ...consolidate.Option) *fixture {
	t.Helper()
	return newFixtureFull(t, sqliteStore(t), consolidate.Defaults(), func(c *llm.Config) { c.Consolidate.ContextLength = window }, opts...)
}

// newFixtureConfig is newFixture with the consolidator's constants.
func newFixtureConfig(t testing.TB, st memory.Store, cfg consolidate.Config, opts ...consolidate.Option) *fixture {
	t.Helper()
	return newFixtureFull(t, st, cfg, nil, opts...)
}

// newFixtureFull is newFixtureConfig with the model client's configuration
// changed by models (nil: the scripted server's).
func newFixtureFull(t testing.TB, st memory.Store, cfg consolidate.Config, models func(*llm.Config), opts ...consolidate.Option) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	f := &fixture{t: t, ctx: ctx, st: st, srv: llmtest.New(t), pub: &recorder{}}
	lc := f.srv.Config()
	if models != nil {
		models(&lc)
	}
	client, err := llm.New(lc)
	if err != nil {
		t.Fatal(err)
	}
	f.client = client
	f.emb = f.client.Embedder()
	f.cfg = cfg
	f.srv.SetDefault(llmtest.ToolCall(consolidate.ToolDone, map[string]any{"summary": "fallback"}))
	all := append([]consolidate.Option{consolidate.WithEmbedder(f.emb), consolidate.WithPublisher(f.pub)}, opts...)
	c, err := consolidate.New(f.st, f.client, f.cfg, all...)
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	return f
}

func sqliteStore(t testing.TB) memory.Store { return storetest.OpenSQLite(t) }

// say appends a user turn (and the assistant's answer) to the transcript.
func (f *fixture) say(user, assistant string) {
	f.t.Helper()
	f.turns++
	msgs := []memory.Message{{Role: memory.RoleUser, Content: user}}
	if assistant != "" {
		msgs = append(msgs, memory.Message{Role: memory.RoleAssistant, Content: assistant})
	}
	if _, _, err := f.st.AppendTranscript(f.ctx, ref(), "t"+strings.Repeat("x", f.turns), msgs); err != nil {
		f.t.Fatal(err)
	}
}

// seed stores a memory with its vector.
func (f *fixture) seed(n memory.Node) memory.Node {
	f.t.Helper()
	if n.ProjectID == "" {
		n.ProjectID = project
	}
	if n.Scope == "" {
		n.Scope = memory.ScopeProject
	}
	vecs, err := f.emb.Embed(f.ctx, []string{memory.EmbedText(&n)})
	if err != nil {
		f.t.Fatal(err)
	}
	n.Embedding, n.EmbeddingModel = vecs[0], f.emb.Model()
	res, err := f.st.Upsert(f.ctx, n)
	if err != nil {
		f.t.Fatal(err)
	}
	return res.Node
}

func (f *fixture) run() consolidate.Result {
	f.t.Helper()
	res, err := f.c.Run(f.ctx, consolidate.Request{Project: project, Session: session, Cause: "idle-1"})
	if err != nil {
		f.t.Fatalf("Run: %v", err)
	}
	return res
}

func (f *fixture) get(id string) memory.Node {
	f.t.Helper()
	n, err := f.st.Get(f.ctx, id)
	if err != nil {
		f.t.Fatalf("Get(%s): %v", id, err)
	}
	return n
}

func (f *fixture) live() []memory.Node {
	f.t.Helper()
	ns, err := f.st.Timeline(f.ctx, memory.TimelineQuery{Filter: memory.Filter{ProjectID: project, SessionID: session}})
	if err != nil {
		f.t.Fatal(err)
	}
	return ns
}

// liveTexts are the labels of the live facts (not topics).
func (f *fixture) liveTexts() map[string]string {
	out := map[string]string{}
	for _, n := range f.live() {
		if n.Subkind != memory.Topic {
			out[n.Label] = n.ID
		}
	}
	return out
}

func (f *fixture) cursor() int64 {
	f.t.Helper()
	c, err := f.st.Cursor(f.ctx, ref())
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// trailing is the last message of the i-th chat request (0-based): the
// step's time, memories, ledger and directive.
func (f *fixture) trailing(i int) string {
	f.t.Helper()
	reqs := f.srv.ChatRequests()
	if i >= len(reqs) {
		f.t.Fatalf("request %d of %d", i, len(reqs))
	}
	ms := reqs[i].Messages
	return ms[len(ms)-1].Content
}

func toolNames(req api.ChatRequest) []string {
	var out []string
	for _, t := range req.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

func call(name string, args map[string]any) llmtest.Reply { return llmtest.ToolCall(name, args) }

func remember(text, kind string) llmtest.Reply {
	return call(consolidate.ToolRemember, map[string]any{"text": text, "kind": kind, "said_by_user": true, "reason": "the user said so"})
}

func done() llmtest.Reply {
	return call(consolidate.ToolDone, map[string]any{"summary": "memory matches"})
}

// byLabel waits for nothing: it scripts a reply computed when the request
// comes, from the store (for ids made earlier in the pass).
func (f *fixture) byLabel(label string, build func(id string) llmtest.Reply) llmtest.Reply {
	return llmtest.Func(func(api.ChatRequest) llmtest.Reply {
		for _, n := range f.live() {
			if n.Label == label {
				return build(n.ID)
			}
		}
		f.t.Errorf("no live memory %q", label)
		return done()
	})
}

// short is the short id ("[f3]") by which a pass's model knew the memory
// id (the pass's ledger maps them).
func short(t testing.TB, p memory.Pass, id string) string {
	t.Helper()
	var l consolidate.Ledger
	if err := json.Unmarshal(p.State, &l); err != nil {
		t.Fatalf("pass %s: ledger: %v", p.ID, err)
	}
	for i, x := range l.IDs {
		if x == id {
			return fmt.Sprintf("[f%d]", i+1)
		}
	}
	t.Fatalf("pass %s never showed memory %s", p.ID, id)
	return ""
}

// named scripts a reply built when its request comes, from the short id
// ("f3") by which the request names the memory labelled label.
func named(t testing.TB, label string, build func(id string) llmtest.Reply) llmtest.Reply {
	re := regexp.MustCompile(`\[(f\d+)\] ` + regexp.QuoteMeta(label))
	return llmtest.Func(func(req api.ChatRequest) llmtest.Reply {
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if m := re.FindStringSubmatch(req.Messages[i].Content); m != nil {
				return build(m[1])
			}
		}
		t.Errorf("the request names no memory %q", label)
		return done()
	})
}

// callOn scripts a tool call whose "id" names the memory labelled label.
func callOn(t testing.TB, tool, label string, args map[string]any) llmtest.Reply {
	return named(t, label, func(id string) llmtest.Reply {
		a := map[string]any{"id": id}
		for k, v := range args {
			a[k] = v
		}
		return call(tool, a)
	})
}
