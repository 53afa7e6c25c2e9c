// Package rawcheck writes secrets through a store's real write paths and
// reads the store's raw files, for the backends' tests: no secret reaches
// the disk (the SQLite file and its WAL, Redis' append-only file).
package rawcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redacttest"
)

// WriteSecrets writes every Issue31 case and a sample of the secret corpus
// through st's real write paths (a node's label, body, paths and
// entities; a transcript's user message, tool-call arguments and tool
// result; a summary) and returns the secrets written, for a test that then
// reads the store's raw files.
func WriteSecrets(t testing.TB, ctx context.Context, st memory.Store) []string {
	t.Helper()
	type item struct{ text, secret string }
	var items []item
	for _, c := range redacttest.Issue31 {
		items = append(items, item{c.Text, c.Secret})
	}
	for _, c := range redacttest.Cases(31, 2026, 1) {
		items = append(items, item{c.Text, c.Secret})
	}
	ref := memory.SessionRef{Project: "raw", Session: "raw-session"}
	var secrets []string
	var summary string
	for i, it := range items {
		secrets = append(secrets, it.secret)
		n := memory.Node{Subkind: memory.Observation, Scope: memory.ScopeProject, ProjectID: ref.Project, SessionID: ref.Session,
			Label: fmt.Sprintf("case %d: %s", i, it.text), Body: "noted: " + it.text, Confidence: 0.8,
			Paths: []string{"deploy/" + it.text}, Entities: []memory.Entity{{Name: it.text}}}
		if _, err := st.Upsert(ctx, n); err != nil {
			t.Fatalf("upsert case %d: %v", i, err)
		}
		args, _ := json.Marshal(map[string]any{"command": it.text})
		msgs := []memory.Message{
			{Role: memory.RoleUser, Content: it.text},
			{Role: memory.RoleAssistant, Content: "running", ToolCalls: []memory.ToolCall{{ID: "c1", Name: "shell", Arguments: string(args)}}},
			{Role: memory.RoleTool, ToolName: "shell", ToolCallID: "c1", ToolStatus: memory.ToolOK, Content: "$ " + it.text},
		}
		if _, _, err := st.AppendTranscript(ctx, ref, fmt.Sprintf("t%d", i), msgs); err != nil {
			t.Fatalf("append case %d: %v", i, err)
		}
		summary += "- " + it.text + "\n"
	}
	if err := st.SaveSummary(ctx, ref, memory.Summary{Content: "## Active task\nNone\n\n## Critical context\n" + summary, UpTo: 3}); err != nil {
		t.Fatalf("save summary: %v", err)
	}
	return secrets
}

// FindInDir returns, for each secret found in a file under dir, the file
// and the secret ("" entries none).
func FindInDir(t testing.TB, dir string, secrets []string) []string {
	t.Helper()
	var found []string
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				found = append(found, fmt.Sprintf("%s holds %q", filepath.Base(path), s))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("no file under %s: nothing was checked", dir)
	}
	return found
}
