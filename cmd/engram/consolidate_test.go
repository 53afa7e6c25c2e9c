package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestConsolidateHistoryUndo runs a pass by hand on a data dir, lists it
// with memory history and reverts it with memory undo.
func TestConsolidateHistoryUndo(t *testing.T) {
	dir := t.TempDir()
	srv := llmtest.New(t)
	t.Setenv("ENGRAM_DATA", dir)
	t.Setenv("ENGRAM_STORE", "sqlite")
	t.Setenv("ENGRAM_OLLAMA_HOST", srv.URL())
	t.Setenv("ENGRAM_CHAT_MODEL", llmtest.ChatModel)
	ctx := context.Background()
	cfg := config.Default()
	cfg.DataDir = dir
	st, err := app.OpenStore(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ref := memory.SessionRef{Project: "acme", Session: "s1"}
	if _, _, err := st.AppendTranscript(ctx, ref, "t1", []memory.Message{{Role: memory.RoleUser, Content: "I brew my own beer every month."}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(llmtest.ToolCall(consolidate.ToolRemember, map[string]any{"text": "The user brews beer every month.", "kind": "pattern", "reason": "stated"}),
		llmtest.ToolCall(consolidate.ToolDone, map[string]any{}))

	var out, errOut bytes.Buffer
	if code := run([]string{"consolidate", "-project", "acme", "-session", "s1"}, &out, &errOut); code != 0 {
		t.Fatalf("consolidate: exit %d: %s", code, errOut.String())
	}
	s := out.String()
	if !strings.Contains(s, "acme/s1  finished (done)") || !strings.Contains(s, `added "The user brews beer every month."`) || !strings.Contains(s, "reason: stated") {
		t.Fatalf("consolidate printed:\n%s", s)
	}
	passID := strings.Fields(strings.TrimPrefix(s, "pass "))[0]

	out.Reset()
	if code := run([]string{"consolidate", "-project", "acme", "-session", "s1"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "nothing new") {
		t.Fatalf("second consolidate: exit %d: %s %s", code, out.String(), errOut.String())
	}

	out.Reset()
	if code := run([]string{"memory", "history", "-project", "acme"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "pass "+passID) {
		t.Fatalf("history: exit %d: %s %s", code, out.String(), errOut.String())
	}

	out.Reset()
	if code := run([]string{"memory", "undo", passID}, &out, &errOut); code != 0 {
		t.Fatalf("undo: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "reverted: [") || !strings.Contains(out.String(), "removed (added by the pass)") {
		t.Fatalf("undo printed:\n%s", out.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"memory", "undo", passID}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "already undone") {
		t.Fatalf("second undo: exit %d: %s", code, errOut.String())
	}
}

// TestConsolidateFrom: `engram consolidate -from N` re-reads a session
// from message N (an operator's repair), and `engram memory history`
// shows the messages each pass read.
func TestConsolidateFrom(t *testing.T) {
	dir := t.TempDir()
	srv := llmtest.New(t)
	t.Setenv("ENGRAM_DATA", dir)
	t.Setenv("ENGRAM_STORE", "sqlite")
	t.Setenv("ENGRAM_OLLAMA_HOST", srv.URL())
	t.Setenv("ENGRAM_CHAT_MODEL", llmtest.ChatModel)
	ctx := context.Background()
	cfg := config.Default()
	cfg.DataDir = dir
	st, err := app.OpenStore(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ref := memory.SessionRef{Project: "acme", Session: "s1"}
	if _, _, err := st.AppendTranscript(ctx, ref, "t1", []memory.Message{
		{Role: memory.RoleUser, Content: "I brew my own beer every month."},
		{Role: memory.RoleAssistant, Content: "Cheers!"},
		{Role: memory.RoleUser, Content: "And I keep bees."}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	srv.OnChatAlways(llmtest.Any(), llmtest.ToolCall(consolidate.ToolDone, map[string]any{}))
	var out, errOut bytes.Buffer
	if code := run([]string{"consolidate", "-project", "acme", "-session", "s1"}, &out, &errOut); code != 0 {
		t.Fatalf("consolidate: exit %d: %s", code, errOut.String())
	}
	if s := out.String(); !strings.Contains(s, "read messages 1-3") || !strings.Contains(s, "1 passes; acme/s1 is consolidated up to message 3") {
		t.Fatalf("consolidate printed:\n%s", s)
	}
	out.Reset()
	if code := run([]string{"consolidate", "-project", "acme", "-session", "s1", "-from", "2"}, &out, &errOut); code != 0 {
		t.Fatalf("consolidate -from 2: exit %d: %s", code, errOut.String())
	}
	if s := out.String(); !strings.Contains(s, "read messages 2-3") || !strings.Contains(s, "up to message 3") {
		t.Fatalf("consolidate -from 2 printed:\n%s", s)
	}
	if w := srv.ChatRequests(); len(w) != 2 || !strings.Contains(w[1].Messages[1].Content, "Cheers!") || strings.Contains(w[1].Messages[1].Content, "brew") {
		t.Fatalf("the re-read did not show messages 2-3: %d requests", len(w))
	}
	out.Reset()
	if code := run([]string{"memory", "history", "-project", "acme", "-session", "s1"}, &out, &errOut); code != 0 {
		t.Fatalf("history: exit %d: %s", code, errOut.String())
	}
	if s := out.String(); strings.Index(s, "read messages 2-3") > strings.Index(s, "read messages 1-3") || !strings.Contains(s, "read messages 1-3") {
		t.Fatalf("history (newest first) does not show each pass's messages:\n%s", s)
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"consolidate", "-project", "acme", "-session", "s1", "-from", "9"}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "has no message 9") {
		t.Fatalf("-from past the end: exit %d: %s", code, errOut.String())
	}
}
