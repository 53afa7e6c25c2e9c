package mcptool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/mcptool"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/llm/hashembed"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/neutralisetest"
)

// strings of a JSON document, keys aside.
func jsonStrings(v any, out *[]string) {
	switch x := v.(type) {
	case string:
		*out = append(*out, x)
	case []any:
		for _, e := range x {
			jsonStrings(e, out)
		}
	case map[string]any:
		for _, e := range x {
			jsonStrings(e, out)
		}
	}
}

// Issue 31: every payload of the attack corpus stored as a memory (label
// and body) and asked for through the `memory` tool (recall by its own
// words, timeline, neighbours, an op named after it): no string of any
// answer holds it in a form a model reads as such.
func TestAttackCorpusThroughTheMemoryTool(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenSQLite(t)
	emb := hashembed.New(0)
	tool, err := mcptool.New(st, emb, mcptool.Config{MinConfidence: 0.3, CrossProject: true})
	if err != nil {
		t.Fatal(err)
	}
	attacks := neutralisetest.Attacks()
	for i, a := range attacks {
		if _, err := st.Upsert(ctx, memory.Node{Subkind: memory.Observation, Scope: memory.ScopeProject, ProjectID: fmt.Sprintf("p%03d", i),
			SessionID: "s", Label: a.Text, Body: "the page said: " + a.Text, Confidence: 0.8, Reach: memory.ReachHere}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := memory.EmbedPending(ctx, st, emb, 64); err != nil {
		t.Fatal(err)
	}
	inert, answered := 0, 0
	for i, a := range attacks {
		caller := mcptool.Caller{Project: fmt.Sprintf("p%03d", i), Session: "s", Principal: "test"}
		resp, err := tool.Run(ctx, caller, mcptool.Request{Ops: []mcptool.Op{
			{Op: mcptool.OpRecall, Query: a.Text},
			{Op: mcptool.OpTimeline},
			{Op: a.Text},
		}})
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		var strs []string
		jsonStrings(doc, &strs)
		ok := true
		for _, s := range strs {
			if f := neutralisetest.Survives(s); len(f) > 0 {
				ok = false
				t.Errorf("%s payload %q: the answer holds %q, still holding %s", a.Family, a.Text, s, strings.Join(f, "; "))
			}
		}
		if resp.Results[1].OK && len(resp.Results[1].Memories) > 0 {
			answered++
		}
		if ok {
			inert++
		}
	}
	t.Logf("memory tool: %d/%d answers inert (%d timelines listed the payload's memory)", inert, len(attacks), answered)
	if answered < len(attacks)/2 {
		t.Fatalf("only %d timelines listed a memory: the path was not exercised", answered)
	}
}
