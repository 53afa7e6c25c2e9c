package main

import (
	"bytes"
	"encoding/json"
	"github.com/engram-memory/engram/pkg/memory"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMemoryImportExportInject drives the memory and inject commands on a
// data dir: import seeds the graph (and embeds it), inject -direct previews
// a block with scores, export writes what import reads.
func TestMemoryImportExportInject(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("ENGRAM_DATA", dir)
	t.Setenv("ENGRAM_STORE", "sqlite")
	seed := filepath.Join(dir, "seed.jsonl")
	lines := `{"type":"node","id":"rule1","subkind":"preference","scope":"project","project_id":"acme","label":"Use pnpm, never npm","asserted_by":"user","source":"user","confidence":0.95}
{"type":"node","id":"dec1","subkind":"decision","project_id":"acme","label":"Deploys run through make release","body":"The release target tags the image.","paths":["Makefile"]}
{"type":"edge","src":"dec1","dst":"rule1","relation":"relates_to"}
`
	if err := os.WriteFile(seed, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"memory", "import", seed}, &out, &errOut); code != 0 {
		t.Fatalf("import: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "imported 2 nodes and 1 edges; merged 0 repeated texts into the first node holding each; embedded 2") {
		t.Errorf("import said %q", out.String())
	}

	out.Reset()
	if code := run([]string{"inject", "-direct", "-json", "-project", "acme", "-session", "s1", "how do deploys run?"}, &out, &errOut); code != 0 {
		t.Fatalf("inject: exit %d: %s", code, errOut.String())
	}
	var blk struct {
		Block    string   `json:"block"`
		IDs      []string `json:"ids"`
		Recalled []struct {
			ID    string  `json:"id"`
			Score float64 `json:"score"`
		} `json:"recalled"`
	}
	if err := json.Unmarshal(out.Bytes(), &blk); err != nil {
		t.Fatalf("inject -json: %v\n%s", err, out.String())
	}
	if len(blk.IDs) < 2 || blk.IDs[0] != "rule1" || len(blk.Recalled) == 0 || blk.Recalled[0].ID != "dec1" || blk.Recalled[0].Score <= 0 {
		t.Errorf("inject -direct: %+v", blk)
	}
	if !strings.Contains(blk.Block, "Use pnpm") || !strings.Contains(blk.Block, "make release") {
		t.Errorf("block:\n%s", blk.Block)
	}

	// -explain prints the same block, then why each line is there: the
	// standing rule, the recalled decision with its channels and prior,
	// and what the policy cut; the block itself is unchanged.
	out.Reset()
	if code := run([]string{"inject", "-direct", "-explain", "-project", "acme", "-session", "s1", "how do deploys run?"}, &out, &errOut); code != 0 {
		t.Fatalf("inject -explain: exit %d: %s", code, errOut.String())
	}
	text := out.String()
	blockText, whyText, ok := strings.Cut(text, "\nWHY EACH LINE IS THERE")
	if !ok || strings.TrimSpace(blockText) != strings.TrimSpace(blk.Block) {
		t.Errorf("inject -explain: the block differs from the one without it or no explanation:\n%s", text)
	}
	for _, want := range []string{"1. [rule1] standing instruction", "2. [dec1] best recalled hit", "lexical #1 (BM25 ", "prior (", "CUT BY THE BLOCK POLICY"} {
		if !strings.Contains(whyText, want) {
			t.Errorf("inject -explain lacks %q:\n%s", want, whyText)
		}
	}
	out.Reset()
	if code := run([]string{"inject", "-direct", "-explain", "-json", "-project", "acme", "-session", "s1", "how do deploys run?"}, &out, &errOut); code != 0 {
		t.Fatalf("inject -explain -json: exit %d: %s", code, errOut.String())
	}
	var withWhy struct {
		Block string          `json:"block"`
		Why   memory.BlockWhy `json:"why"`
	}
	if err := json.Unmarshal(out.Bytes(), &withWhy); err != nil || withWhy.Block != blk.Block || len(withWhy.Why.Lines) != len(blk.IDs) ||
		withWhy.Why.Lines[1].Why == nil || len(withWhy.Why.Lines[1].Why.Channels) == 0 {
		t.Errorf("inject -explain -json: %v\n%s", err, out.String())
	}
	errOut.Reset()
	if code := run([]string{"inject", "-explain", "-project", "acme", "-session", "s1", "how do deploys run?"}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "-explain needs -direct") {
		t.Errorf("inject -explain without -direct: exit %d: %s", code, errOut.String())
	}

	exported := filepath.Join(dir, "out.jsonl")
	out.Reset()
	if code := run([]string{"memory", "export", "-o", exported}, &out, &errOut); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut.String())
	}
	data, err := os.ReadFile(exported)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 3 || !strings.Contains(string(data), `"id":"dec1"`) {
		t.Errorf("export wrote %d lines:\n%s", n, data)
	}

	// A bad file is refused with its line number and writes nothing.
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"type":"node","id":"x1","subkind":"decision","project_id":"acme","label":"fine"}
{"type":"node","subkind":"nonsense","label":"broken"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if code := run([]string{"memory", "import", bad}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "line 2") {
		t.Errorf("bad import: exit %d: %s", code, errOut.String())
	}

	// The same question through a running serve: the injector answers over
	// the bus, and -json carries the ids with their scores.
	if testing.Short() {
		return
	}
	bin := buildEngram(t)
	s := startServe(t, bin, dir, nil)
	got := s.engram(t, bin, "inject", "-json", "-project", "acme", "-session", "s1", "how do deploys run?")
	var served struct {
		Block   string    `json:"block"`
		IDs     []string  `json:"ids"`
		Scores  []float64 `json:"scores"`
		EventID string    `json:"event_id"`
	}
	if err := json.Unmarshal([]byte(got), &served); err != nil {
		t.Fatalf("inject -json via serve: %v\n%s", err, got)
	}
	if len(served.IDs) < 2 || served.IDs[0] != "rule1" || served.IDs[1] != "dec1" || len(served.Scores) != len(served.IDs) ||
		served.Scores[0] != 0 || served.Scores[1] <= 0 || served.EventID == "" || !strings.Contains(served.Block, "make release") {
		t.Errorf("inject -json via serve: %s", got)
	}
}

// TestMemoryExportProject: export -project [-session] -transcripts writes
// the project's (session's) memories and transcripts only; -session and
// -transcripts need -project.
func TestMemoryExportProject(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("ENGRAM_DATA", dir)
	t.Setenv("ENGRAM_STORE", "sqlite")
	seed := filepath.Join(dir, "seed.jsonl")
	lines := `{"type":"node","subkind":"preference","project_id":"user-1","session_id":"s1","label":"user one likes tea"}
{"type":"node","subkind":"preference","project_id":"user-1","session_id":"s2","label":"user one likes maps"}
{"type":"node","subkind":"preference","project_id":"user-2","session_id":"s1","label":"user two likes coffee"}
{"type":"message","project_id":"user-1","session_id":"s1","turn_id":"t1","role":"user","content":"I like tea"}
{"type":"message","project_id":"user-1","session_id":"s2","turn_id":"t1","role":"user","content":"I like maps"}
{"type":"message","project_id":"user-2","session_id":"s1","turn_id":"t1","role":"user","content":"I like coffee"}
{"type":"summary","project_id":"user-1","session_id":"s1","content":"tea talk","up_to":1}
`
	if err := os.WriteFile(seed, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"memory", "import", seed}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "imported 3 transcript messages and 1 summaries") {
		t.Fatalf("import: exit %d: %s %s", code, out.String(), errOut.String())
	}
	file := filepath.Join(dir, "user-1.jsonl")
	out.Reset()
	if code := run([]string{"memory", "export", "-project", "user-1", "-session", "s1", "-transcripts", "-o", file}, &out, &errOut); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "exported 1 nodes, 0 edges, 1 messages and 1 summaries") {
		t.Errorf("export said %q", out.String())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"user one likes tea", "I like tea", "tea talk"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the export lacks %q:\n%s", want, b)
		}
	}
	for _, not := range []string{"maps", "coffee"} {
		if strings.Contains(string(b), not) {
			t.Errorf("the export of user-1/s1 holds %q:\n%s", not, b)
		}
	}
	if code := run([]string{"memory", "export", "-transcripts"}, &out, &errOut); code != 2 {
		t.Errorf("export -transcripts without -project: exit %d, want 2", code)
	}
}
