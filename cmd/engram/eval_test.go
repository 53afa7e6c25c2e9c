package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalCommand runs engram eval on a small graph of two projects in a
// directory, as a user would: the user's data dir is never written, only
// the asked project is imported, the JSON answer carries the ranker, the
// reference BM25 and the block, and -compare runs a second configuration.
func TestEvalCommand(t *testing.T) {
	data := t.TempDir()
	t.Setenv("ENGRAM_DATA", data)
	t.Setenv("ENGRAM_STORE", "sqlite")
	dir := t.TempDir()
	graph := `{"type":"node","id":"a1","subkind":"observation","project_id":"a","label":"I adopted a greyhound named Biscuit","updated_at":"2023-05-01T10:00:00Z"}
{"type":"node","id":"a2","subkind":"observation","project_id":"a","label":"The weather in Lisbon was sunny all week","updated_at":"2023-05-02T10:00:00Z"}
{"type":"node","id":"a3","subkind":"observation","project_id":"a","label":"Thanks!"}
{"type":"node","id":"a4","subkind":"observation","project_id":"a","label":"Thanks!"}
{"type":"node","id":"b1","subkind":"observation","project_id":"b","label":"My greyhound is called Rocket"}
`
	questions := `{"project":"a","question":"What is the name of my greyhound?","evidence":["a1"],"category":"single","question_date":"2023-06-01T00:00:00Z","answer":"Biscuit"}
{"project":"a","question":"How was the weather in Lisbon?","evidence":["a2"],"category":"single"}
`
	if err := os.WriteFile(filepath.Join(dir, "graph.jsonl"), []byte(graph), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "questions.jsonl"), []byte(questions), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"eval", "-json", "-details", "-svg", filepath.Join(dir, "sweep.svg"), dir}, &out, &errOut); code != 0 {
		t.Fatalf("eval: exit %d: %s", code, errOut.String())
	}
	var r struct {
		Load    struct{ Nodes, Merged int }
		Overall struct {
			N      int `json:"questions"`
			Ranker struct {
				R1 float64 `json:"recall_at_1"`
			}
			BM25 struct {
				R1 float64 `json:"recall_at_1"`
			}
			Block struct {
				Recall float64 `json:"recall"`
			}
		}
		Questions []struct {
			Ranker []struct{ ID string }
		}
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	if r.Load.Nodes != 3 || r.Load.Merged != 1 {
		t.Errorf("load = %+v, want project a only (3 nodes, the repeated Thanks! merged)", r.Load)
	}
	if r.Overall.N != 2 || r.Overall.Ranker.R1 != 1 || r.Overall.BM25.R1 != 1 || r.Overall.Block.Recall != 1 {
		t.Errorf("overall = %+v, want both questions answered first by both rankings and in the block", r.Overall)
	}
	for _, q := range r.Questions {
		for _, h := range q.Ranker {
			if h.ID == "b1" {
				t.Errorf("project b's memory was ranked for a question of project a")
			}
		}
	}
	if svg, err := os.ReadFile(filepath.Join(dir, "sweep.svg")); err != nil || !strings.HasPrefix(string(svg), "<svg") {
		t.Errorf("sweep chart: %v", err)
	}
	if entries, _ := os.ReadDir(data); len(entries) != 0 {
		t.Errorf("eval wrote into the data dir: %v", entries)
	}

	out.Reset()
	if code := run([]string{"eval", "-compare", "ENGRAM_INJECT_RELATIVE_FLOOR=0.9", dir}, &out, &errOut); code != 0 {
		t.Fatalf("eval -compare: exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"A (as configured)", "B (ENGRAM_INJECT_RELATIVE_FLOOR=0.9)", "ranker R@10", "block recall", "bm25"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("compare output lacks %q:\n%s", want, out.String())
		}
	}
	if code := run([]string{"eval", "-compare", "NOT_AN_ASSIGNMENT", dir}, &out, &errOut); code != 2 {
		t.Errorf("a bad -compare: exit %d, want 2", code)
	}

	// Several sets in one run: each in its own store, printed side by
	// side; -compare runs both configurations on each; JSON by set name.
	other := filepath.Join(t.TempDir(), "second-set")
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"graph.jsonl": graph, "questions.jsonl": questions} {
		if err := os.WriteFile(filepath.Join(other, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	if code := run([]string{"eval", "-compare", "ENGRAM_INJECT_RELATIVE_FLOOR=0.9", dir, other}, &out, &errOut); code != 0 {
		t.Fatalf("eval of two sets: exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"== " + filepath.Base(dir) + " ==", "== second-set ==", "second-set (2)", "B-A", "under plain BM25"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("two-set output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"eval", "-json", dir, other}, &out, &errOut); code != 0 {
		t.Fatalf("eval -json of two sets: exit %d: %s", code, errOut.String())
	}
	var bySet struct {
		Sets map[string]struct {
			Overall struct {
				N int `json:"questions"`
			}
		}
	}
	if err := json.Unmarshal(out.Bytes(), &bySet); err != nil || len(bySet.Sets) != 2 || bySet.Sets["second-set"].Overall.N != 2 {
		t.Errorf("two-set JSON = %+v (%v), want both sets by name", bySet, err)
	}
	// Two files are one set (GRAPH QUESTIONS).
	out.Reset()
	if code := run([]string{"eval", "-json", filepath.Join(other, "graph.jsonl"), filepath.Join(other, "questions.jsonl")}, &out, &errOut); code != 0 {
		t.Fatalf("eval GRAPH QUESTIONS: exit %d: %s", code, errOut.String())
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Overall.N != 2 {
		t.Errorf("GRAPH QUESTIONS: %+v (%v)", r.Overall, err)
	}
}
