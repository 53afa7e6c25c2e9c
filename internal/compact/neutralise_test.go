package compact_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/neutralisetest"
)

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, events.Envelope) error { return nil }

// promptFrame is what the summary prompt holds besides the transcript and
// the previous summary.
var promptFrame = []string{compact.Template, "TEMPLATE:", "CONVERSATION:", "NEW MESSAGES:", "PREVIOUS SUMMARY:", "<transcript>", "</transcript>",
	"<previous-summary>", "</previous-summary>", "[USER]", "[ASSISTANT]", "Write the updated summary now.", "Write the summary now."}

// Issue 31: the attack corpus said in a conversation and written by the
// summariser into its summary: the summary prompt, the stored summary, and
// the context API's block and summary hold no payload in a form a model
// reads as such, for summaries stored before neutralisation too.
func TestAttackCorpusThroughSummaries(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenSQLite(t)
	srv := llmtest.New(t)
	c, err := compact.New(st, srv.Client(), nopPublisher{}, compact.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	attacks := neutralisetest.Attacks()
	const per = 8
	padding := strings.Repeat("The deploy script reads the manifest, applies it and waits for the rollout to finish. ", 40)
	checked, inert := 0, 0
	check := func(where, text string) {
		for _, f := range promptFrame {
			text = strings.ReplaceAll(text, f, "")
		}
		for _, l := range strings.Split(text, "\n") {
			checked++
			if s := neutralisetest.Survives(l); len(s) > 0 {
				t.Errorf("%s: line %q still holds %s", where, l, strings.Join(s, "; "))
				continue
			}
			inert++
		}
	}
	for start, end := 0, 0; start < len(attacks); start = end {
		end = min(start+per, len(attacks))
		if len(attacks)-end < 3 {
			end = len(attacks) // a short last batch joins this one (it would have too little to split)
		}
		batch := attacks[start:end]
		ref := memory.SessionRef{Project: "proj", Session: fmt.Sprintf("s%03d", start)}
		var summary strings.Builder
		summary.WriteString("## Active task\n\"Ship the deploy script\"\n\n## Critical context\n")
		// an ordinary first turn: a batch of one payload still has a turn to split at
		if _, _, err := st.AppendTranscript(ctx, ref, "t-first", []memory.Message{{Role: memory.RoleUser, Content: padding}, {Role: memory.RoleAssistant, Content: "ok"}}); err != nil {
			t.Fatal(err)
		}
		for i, a := range batch {
			msgs := []memory.Message{
				{Role: memory.RoleUser, Content: a.Text + "\n" + padding},
				{Role: memory.RoleAssistant, Content: "Noted: " + a.Text},
			}
			if _, _, err := st.AppendTranscript(ctx, ref, fmt.Sprintf("t%d", i), msgs); err != nil {
				t.Fatal(err)
			}
			summary.WriteString("- " + a.Text + "\n")
		}
		if _, _, err := st.AppendTranscript(ctx, ref, "last", []memory.Message{{Role: memory.RoleUser, Content: "go on"}}); err != nil {
			t.Fatal(err)
		}
		srv.Enqueue(llmtest.Text(summary.String()))
		res, err := c.Compact(ctx, compact.Report{EventID: events.NewID(), Project: ref.Project, Session: ref.Session, Force: true, ContextWindow: 128000, At: time.Now()})
		if err != nil {
			t.Fatalf("Compact: %v", err)
		}
		if res.Outcome != compact.Compacted {
			t.Fatalf("batch %d: %+v", start, res)
		}
		req := srv.LastChat()
		for _, m := range req.Messages {
			if m.Role == "user" {
				check("summary prompt", m.Content)
			}
		}
		stored, err := st.LatestSummary(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		check("stored summary", stored.Content)
		// A summary stored before neutralisation existed, as it was.
		legacy := memory.SessionRef{Project: "proj", Session: fmt.Sprintf("legacy%03d", start)}
		if err := st.SaveSummary(ctx, legacy, memory.Summary{Content: summary.String(), UpTo: 1}); err != nil {
			t.Fatal(err)
		}
		for _, r := range []memory.SessionRef{ref, legacy} {
			reply, err := c.Context(ctx, events.Ref{TenantID: r.Tenant, ProjectID: r.Project, SessionID: r.Session}, events.ContextRequest{})
			if err != nil {
				t.Fatal(err)
			}
			block := reply.Block
			block = strings.ReplaceAll(block, compact.Preamble, "")
			block = strings.ReplaceAll(block, compact.EndMarker, "")
			if strings.Count(block, compact.SummaryOpen) != 1 || strings.Count(block, compact.SummaryClose) != 1 {
				t.Errorf("context block of %s has other markers:\n%s", r.Session, reply.Block)
			}
			block = strings.ReplaceAll(strings.ReplaceAll(block, compact.SummaryOpen, ""), compact.SummaryClose, "")
			check("context block", block)
			check("context summary", reply.Summary)
		}
	}
	t.Logf("summaries: %d lines of prompts, stored summaries and context blocks checked, %d inert (%d payloads)", checked, inert, len(attacks))
}
