package consolidate

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

type noChat struct{}

func (noChat) Chat(context.Context, llm.Request) (llm.Response, error) { return llm.Response{}, nil }

// FuzzToolCall feeds arbitrary tool calls (what a model may send) to the
// tools: nothing panics, a call that fails says why, and only the pass's
// own project is written.
func FuzzToolCall(f *testing.F) {
	for _, seed := range []struct{ name, args string }{
		{ToolRemember, `{"text":"The user likes tea.","kind":"preference"}`},
		{ToolRemember, `{"text":"","kind":"topic"}`},
		{ToolRecall, `{"as_of":"2026-13-45"}`},
		{ToolRecall, `{"from":"2026-01-01","to":"2026-02-01"}`},
		{ToolRecall, `{}`},
		{ToolRevise, `{"id":"[nope]","text":"x"}`},
		{ToolForget, `{"id":""}`},
		{ToolLink, `{"id":"x","topic":"","relation":"supersedes"}`},
		{ToolUnlink, `"{\"id\":\"x\"}"`},
		{ToolDone, `[1,2]`},
		{"memory_explode", `{}`},
		{"", `null`},
	} {
		f.Add(seed.name, seed.args)
	}
	st := storetest.OpenSQLite(f)
	ctx := context.Background()
	c, err := New(st, noChat{}, Defaults())
	if err != nil {
		f.Fatal(err)
	}
	other, err := st.Upsert(ctx, memory.Node{Subkind: memory.Observation, ProjectID: "other", Label: "Another project's fact."})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name, args string) {
		var l Ledger
		rec := &memory.Pass{ID: memory.NewID(), Project: "p", Session: "s", Status: memory.PassRunning, StartedAt: time.Now()}
		p := &pass{c: c, ref: memory.SessionRef{Project: "p", Session: "s"}, rec: rec, l: &l, now: time.Now()}
		// [f1] names another project's fact (a pass never shows one: the
		// tools must refuse it all the same), and its stored id is no name.
		l.ShortID(other.Node.ID)
		for _, a := range []string{args, `{"id":"f1"}`, `{"id":"` + other.Node.ID + `"}`} {
			_, r, err := p.call(ctx, llm.ToolCall{Name: name, Arguments: json.RawMessage(a)}, &l)
			if err != nil {
				t.Fatalf("%s(%s): store error %v", name, a, err)
			}
			if r.Summary == "" && name != ToolDone {
				t.Fatalf("%s(%s): no summary", name, a)
			}
		}
		for _, e := range rec.Entries {
			if e.Pending {
				t.Fatalf("%s(%s): an entry left pending without a store failure: %+v", name, args, e)
			}
			if e.After != nil && e.After.ProjectID != "p" {
				t.Fatalf("%s(%s) wrote into project %q", name, args, e.After.ProjectID)
			}
		}
		if n, err := st.Get(ctx, other.Node.ID); err != nil || !n.Live() {
			t.Fatalf("another project's fact changed: %+v %v", n, err)
		}
	})
}
