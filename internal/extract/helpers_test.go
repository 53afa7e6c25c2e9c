package extract_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

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

func (r *recorder) all() []events.Envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]events.Envelope(nil), r.evs...)
}

const (
	project = "proj"
	session = "sess"
)

// fixture is an extractor on a real store and the real Ollama client
// talking to the scripted server.
type fixture struct {
	t      testing.TB
	ctx    context.Context
	st     memory.Store
	srv    *llmtest.Server
	client *llm.Client
	emb    extract.Embedder
	pub    *recorder
	x      *extract.Extractor
	cfg    extract.Config
}

func newFixture(t testing.TB, open func(t testing.TB) memory.Store, mod ...func(*extract.Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: context.Background(), st: open(t), srv: llmtest.New(t), pub: &recorder{}}
	f.client = f.srv.Client()
	f.emb = f.client.Embedder()
	f.cfg = extract.Defaults()
	f.cfg.InvalidDelay = time.Second
	for _, m := range mod {
		m(&f.cfg)
	}
	x, err := extract.New(f.st, f.client, f.emb, f.pub, f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.x = x
	return f
}

func ref() memory.SessionRef { return memory.SessionRef{Project: project, Session: session} }

func userTurn(id, text string) extract.Turn {
	return extract.Turn{EventID: "ev-" + id, Project: project, Session: session, Turn: id,
		Messages: []memory.Message{
			{Role: memory.RoleUser, Content: text},
			{Role: memory.RoleAssistant, Content: "Understood, I will keep that in mind for the rest of the work."},
		}}
}

// seed stores a memory with its vector and returns it.
func (f *fixture) seed(n memory.Node) memory.Node {
	f.t.Helper()
	if n.ProjectID == "" && n.Scope != memory.ScopeGlobal {
		n.ProjectID = project
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

func (f *fixture) handle(t extract.Turn) extract.Result {
	f.t.Helper()
	res, err := f.x.HandleTurn(f.ctx, t)
	if err != nil {
		f.t.Fatalf("HandleTurn(%s): %v", t.Turn, err)
	}
	return res
}

// all returns every live node of the project and global space.
func (f *fixture) all() []memory.Node {
	f.t.Helper()
	var out []memory.Node
	err := f.st.Scan(f.ctx, func(n memory.Node) error {
		out = append(out, n)
		return nil
	}, func(memory.Edge) error { return nil })
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) get(id string) memory.Node {
	f.t.Helper()
	n, err := f.st.Get(f.ctx, id)
	if err != nil {
		f.t.Fatalf("get %s: %v", id, err)
	}
	return n
}

func (f *fixture) find(label string) (memory.Node, bool) {
	for _, n := range f.all() {
		if n.Label == label {
			return n, true
		}
	}
	return memory.Node{}, false
}

// extractCalls counts the structured extraction calls the server received.
func (f *fixture) extractCalls() int {
	n := 0
	for _, r := range f.srv.ChatRequests() {
		if len(r.Messages) > 0 && r.Messages[0].Content == extract.SystemPrompt {
			n++
		}
	}
	return n
}

func (f *fixture) userMessages() []string {
	var out []string
	for _, r := range f.srv.ChatRequests() {
		if len(r.Messages) > 1 && r.Messages[0].Content == extract.SystemPrompt {
			out = append(out, r.Messages[1].Content)
		}
	}
	return out
}

// reply builds a scripted reply.
func reply(verdicts []extract.ReplyVerdict, mems ...extract.ReplyMemory) llmtest.Reply {
	if verdicts == nil {
		verdicts = []extract.ReplyVerdict{}
	}
	if mems == nil {
		mems = []extract.ReplyMemory{}
	}
	for i := range mems {
		if mems[i].Paths == nil {
			mems[i].Paths = []string{}
		}
		if mems[i].Entities == nil {
			mems[i].Entities = []string{}
		}
		if mems[i].Relations == nil {
			mems[i].Relations = []extract.ReplyRelation{}
		}
	}
	return llmtest.JSON(extract.Reply{Verdicts: verdicts, Memories: mems})
}

func rule(label string, scope string) extract.ReplyMemory {
	return extract.ReplyMemory{Subkind: "preference", Scope: scope, Reach: "anywhere", AssertedBy: "user",
		Label: label, Confidence: 0.95}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func contains(hay, needle string) bool { return strings.Contains(hay, needle) }
