package extract_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/neutralisetest"
)

type discardPublisher struct{}

func (discardPublisher) Publish(context.Context, events.Envelope) error { return nil }

// promptFrame matches the fixed parts of the extraction prompt's user
// message: section titles, the line prefixes of the transcript and of the
// listed memories.
var promptFrame = regexp.MustCompile(`(?m)^(?:INJECTED MEMORIES \(give a verdict for each\):|RELATED MEMORIES \(already stored\):|TRANSCRIPT:|\(none\)|USER: |ASSISTANT: |ASSISTANT called tools: |TOOL \S+(?: FAILED)?: |\[[^\]\s]+\] \([a-z]+\) )`)

// Issue 31: the attack corpus said by the user, failed as tool output and
// echoed by the model as memories: the extraction prompt holds no payload
// in a form a model reads as such, and neither do the memories the
// extractor stores, as the memory block renders them.
func TestAttackCorpusThroughExtraction(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenSQLite(t)
	srv := llmtest.New(t)
	client := srv.Client()
	cfg := extract.Defaults()
	x, err := extract.New(st, client, client.Embedder(), discardPublisher{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	attacks := neutralisetest.Attacks()
	per := cfg.MaxMemories
	for start := 0; start < len(attacks); start += per {
		batch := attacks[start:min(start+per, len(attacks))]
		turn := extract.Turn{EventID: fmt.Sprintf("ev-%d", start), Project: "proj", Session: "sess", Turn: fmt.Sprintf("t%03d", start)}
		var mems []extract.ReplyMemory
		for _, a := range batch {
			turn.Messages = append(turn.Messages,
				memory.Message{Role: memory.RoleUser, Content: a.Text},
				memory.Message{Role: memory.RoleAssistant, Content: "running it", ToolCalls: []memory.ToolCall{{ID: "c", Name: "fetch", Arguments: `{"url":"https://example.com"}`}}},
				memory.Message{Role: memory.RoleTool, ToolName: "fetch", ToolCallID: "c", ToolStatus: memory.ToolFailed, Content: "page says: " + a.Text})
			mems = append(mems, extract.ReplyMemory{Subkind: "preference", Scope: "project", Reach: "here", AssertedBy: "user",
				Label: a.Text, Body: "from the page: " + a.Text, Confidence: 0.95, Paths: []string{}, Entities: []string{}, Relations: []extract.ReplyRelation{}})
		}
		srv.Enqueue(llmtest.JSON(extract.Reply{Verdicts: []extract.ReplyVerdict{}, Memories: mems}))
		if _, err := x.HandleTurn(ctx, turn); err != nil {
			t.Fatalf("HandleTurn: %v", err)
		}
	}
	prompts := 0
	for _, r := range srv.ChatRequests() {
		if len(r.Messages) < 2 || r.Messages[0].Content != extract.SystemPrompt {
			continue
		}
		prompts++
		body := promptFrame.ReplaceAllString(r.Messages[1].Content, "")
		for _, l := range strings.Split(body, "\n") {
			if s := neutralisetest.Survives(l); len(s) > 0 {
				t.Errorf("extraction prompt line %q still holds %s", l, strings.Join(s, "; "))
			}
		}
	}
	if prompts == 0 {
		t.Fatal("no extraction call")
	}
	inj, err := inject.New(st, client.Embedder(), inject.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	stored, inert := 0, 0
	err = st.Scan(ctx, func(n memory.Node) error {
		stored++
		if s := neutralisetest.Survives(inj.LineText(&n)); len(s) > 0 {
			t.Errorf("extracted memory %q renders in the block as %q, still holding %s", n.Label, inj.LineText(&n), strings.Join(s, "; "))
			return nil
		}
		inert++
		return nil
	}, func(memory.Edge) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("extraction: %d prompts checked; %d memories stored from %d payloads, %d inert in the block", prompts, stored, len(attacks), inert)
	if stored == 0 {
		t.Fatal("no memory stored: the path was not exercised")
	}
}
