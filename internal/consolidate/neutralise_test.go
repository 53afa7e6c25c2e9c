package consolidate_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/neutralisetest"
)

var caseMarker = regexp.MustCompile(`Case\d{3}\. `)

// Issue 31: the attack corpus in the conversation, in stored memories and
// in what the model remembers: no step prompt of the pass (the window, the
// stored memories, the ledger) holds a payload in a form a model reads as
// such, and neither does a memory the pass wrote, as the block renders it.
func TestAttackCorpusThroughConsolidation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := storetest.OpenSQLite(t)
	srv := llmtest.New(t)
	client := srv.Client()
	emb := client.Embedder()
	srv.SetDefault(llmtest.ToolCall(consolidate.ToolDone, map[string]any{"summary": "done"}))
	c, err := consolidate.New(st, client, consolidate.Defaults(), consolidate.WithEmbedder(emb))
	if err != nil {
		t.Fatal(err)
	}
	attacks := neutralisetest.Attacks()
	const per = 6
	for start := 0; start < len(attacks); start += per {
		sess, proj := fmt.Sprintf("s%03d", start), fmt.Sprintf("p%03d", start)
		// the model first answers in prose, quoting a payload: the next
		// step's directive quotes that prose back
		srv.Enqueue(llmtest.Text(fmt.Sprintf("Case%03d. I read: %s", start, attacks[start].Text)))
		ref := memory.SessionRef{Project: proj, Session: sess}
		for i := start; i < min(start+per, len(attacks)); i++ {
			text := fmt.Sprintf("Case%03d. %s", i, attacks[i].Text)
			if _, _, err := st.AppendTranscript(ctx, ref, fmt.Sprintf("t%d", i), []memory.Message{
				{Role: memory.RoleUser, Content: text}, {Role: memory.RoleAssistant, Content: "Noted. " + text}}); err != nil {
				t.Fatal(err)
			}
			// the stored memories hold other payloads than the talk (the
			// pass would hold a near-duplicate for review)
			j := (i + len(attacks)/2) % len(attacks)
			n := memory.Node{Subkind: memory.Observation, Scope: memory.ScopeProject, ProjectID: proj, SessionID: sess,
				Label: fmt.Sprintf("Case%03d. stored earlier: %s", j, attacks[j].Text), Confidence: 0.8}
			vecs, err := emb.Embed(ctx, []string{memory.EmbedText(&n)})
			if err == nil {
				n.Embedding, n.EmbeddingModel = vecs[0], emb.Model()
			}
			if _, err := st.Upsert(ctx, n); err != nil {
				t.Fatal(err)
			}
			srv.Enqueue(llmtest.ToolCall(consolidate.ToolRemember, map[string]any{"text": fmt.Sprintf("Case%03d. said in the talk: %s", i, attacks[i].Text),
				"kind": "preference", "said_by_user": true, "reason": attacks[i].Text}))
		}
		if _, err := c.Run(ctx, consolidate.Request{Project: proj, Session: sess, Cause: "idle-" + sess}); err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	lines, inert := 0, 0
	for _, r := range srv.ChatRequests() {
		for _, m := range r.Messages[1:] {
			for _, l := range strings.Split(m.Content, "\n") {
				loc := caseMarker.FindStringIndex(l)
				if loc == nil {
					continue
				}
				lines++
				if s := neutralisetest.Survives(l[loc[0]:]); len(s) > 0 {
					t.Errorf("step prompt line %q still holds %s", l, strings.Join(s, "; "))
					continue
				}
				inert++
			}
		}
	}
	inj, err := inject.New(st, emb, inject.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	written := 0
	err = st.Scan(ctx, func(n memory.Node) error {
		if !strings.Contains(n.Label, "said in the talk") {
			return nil
		}
		written++
		if s := neutralisetest.Survives(inj.LineText(&n)); len(s) > 0 {
			t.Errorf("remembered %q renders in the block as %q, still holding %s", n.Label, inj.LineText(&n), strings.Join(s, "; "))
		}
		return nil
	}, func(memory.Edge) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("consolidation: %d prompt lines with a payload checked, %d inert; %d memories written by the pass from %d payloads", lines, inert, written, len(attacks))
	if lines < len(attacks) || written == 0 {
		t.Fatalf("the path was not exercised: %d lines, %d memories written", lines, written)
	}
}
