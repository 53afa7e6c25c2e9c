package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestCompactAndContextCommands runs `engram context` and `engram compact`
// against an embedded server with the compactor and its context service.
func TestCompactAndContextCommands(t *testing.T) {
	srv, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	js := eventstest.Setup(t, nc, topo)
	client, err := events.NewClient(nc, events.WithJetStream(js))
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.OpenSQLite(t)
	model := llmtest.New(t)
	// The model answers the user instead of summarising chat 2.
	model.OnChatAlways(llmtest.Contains("Deploy to production."), llmtest.Text("Sure! Run `make deploy`."))
	model.OnChatAlways(nil, llmtest.Text("## Active task\n\"Run the tests\""))
	cfg := compact.Defaults()
	cfg.Backoff = []time.Duration{10 * time.Millisecond}
	c, err := compact.New(st, model.Client(), client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(js, runner.ConfigFor(topo, events.ConsumerCompactor), compact.NewHandler(c, nil).Handle)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	svc, err := client.ServeContext(c.Context, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = svc.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.Stop(ctx)
	})
	ref := memory.SessionRef{Project: "acme/web", Session: "chat 1"}
	// A tool result of a realistic size: a turn smaller than a summary's
	// block cannot be compacted (compact.TooSmall).
	makeOutput := strings.Repeat("go build ./... && go test ./internal/deploy/... ok\n", 16)
	for _, ref := range []memory.SessionRef{ref, {Project: "acme/web", Session: "chat 2"}} {
		texts := []string{"Fix the deploy.", "Add a rollback.", "Run the tests."}
		if ref.Session == "chat 2" {
			texts[0] = "Deploy to production."
		}
		for i, text := range texts {
			turn := "t" + string(rune('1'+i))
			if _, _, err := st.AppendTranscript(context.Background(), ref, turn, []memory.Message{
				{Role: memory.RoleUser, Content: text},
				{Role: memory.RoleAssistant, Content: "On it.", ToolCalls: []memory.ToolCall{{ID: "c" + turn, Name: "bash", Arguments: `{"cmd":"make"}`}}},
				{Role: memory.RoleTool, ToolName: "bash", ToolCallID: "c" + turn, ToolStatus: memory.ToolOK, Content: makeOutput},
				{Role: memory.RoleAssistant, Content: "Done: " + text},
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	engram := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(append(args, "-nats-url", srv.ClientURL()), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errs := engram("context", "-project", "acme/web", "-session", "chat 1")
	if code != 0 || !strings.Contains(out, "(no summary") || !strings.Contains(out, "--- #1 user (turn t1)") ||
		!strings.Contains(out, "-> bash (ct1) {\"cmd\":\"make\"}") || !strings.Contains(out, "(12 messages after the summary") {
		t.Fatalf("engram context: %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = engram("compact", "-project", "acme/web", "-session", "chat 1", "-wait", "30s")
	if code != 0 || !strings.Contains(out, "requested compaction of acme/web/chat 1") || !strings.Contains(out, "compacted up to message 4") {
		t.Fatalf("engram compact: %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = engram("context", "-project", "acme/web", "-session", "chat 1", "-json")
	var got struct {
		Block    string `json:"block"`
		UpTo     int64  `json:"up_to"`
		Messages []events.ContextMessage
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || !strings.HasPrefix(got.Block, compact.Preamble) ||
		got.UpTo != 4 || len(got.Messages) != 8 || got.Messages[0].Content != "Add a rollback." {
		t.Fatalf("engram context -json: %d\n%s\n%s", code, out, errs)
	}
	// A refused compaction says why.
	code, out, errs = engram("compact", "-project", "acme/web", "-session", "chat 2", "-wait", "30s")
	if code != 1 || !strings.Contains(out, "compaction refused: ") || !strings.Contains(out, "summary refused (missing_section)") ||
		!strings.Contains(errs, "previous summary and the context stay as they were") {
		t.Fatalf("engram compact of a refused summary: %d\n%s\n%s", code, out, errs)
	}
	t.Logf("engram compact of a refused summary:\n%s%s", out, errs)
	if code, _, errs := engram("context", "-project", "acme/web"); code != 2 || !strings.Contains(errs, "-session is required") {
		t.Fatalf("missing session: %d %s", code, errs)
	}
}
