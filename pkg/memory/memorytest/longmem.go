package memorytest

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/llm/hashembed"
	"github.com/engram-memory/engram/pkg/memory"
)

// LongMemories returns count LongMemEval-size memories (about 15 KB of
// text each) in project "p", each with a 384-dimension vector of the
// built-in hashing embedder: twenty consecutive memories of the
// development set's graph joined (dir: the set, e.g.
// ../shared/eval/longmemeval-dev; ENGRAM_EVAL_DIR when set), and past the
// 1,242 such joins the set holds, twenty of its memories drawn at random
// (so the vocabulary stays the set's, as a big store's saturates). It
// skips tb without the set. The resident-bytes benchmarks of both stores
// measure these.
func LongMemories(tb testing.TB, dir string, count int) []memory.Node {
	tb.Helper()
	if env := os.Getenv("ENGRAM_EVAL_DIR"); env != "" {
		dir = env
	}
	f, err := os.Open(filepath.Join(dir, "graph.jsonl.gz"))
	if err != nil {
		tb.Skipf("no evaluation graph: %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	var texts []string
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var n struct{ Type, Label, Body string }
		if json.Unmarshal(sc.Bytes(), &n) == nil && n.Type == "node" {
			texts = append(texts, n.Label+"\n"+n.Body)
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	const per = 20
	emb := hashembed.New(384)
	rng := rand.New(rand.NewPCG(1, 2))
	pick := make([]string, per)
	nodes := make([]memory.Node, 0, count)
	for i := 0; len(nodes) < count; i++ {
		var body string
		if (i+1)*per <= len(texts) {
			body = strings.Join(texts[i*per:(i+1)*per], "\n")
		} else {
			for k := range pick {
				pick[k] = texts[rng.IntN(len(texts))]
			}
			body = strings.Join(pick, "\n")
		}
		n := memory.Node{ID: fmt.Sprintf("m%06d", i), Subkind: memory.Observation, Scope: memory.ScopeProject, ProjectID: "p",
			Label: fmt.Sprintf("session %d", i), Body: body}
		v, err := emb.Embed(context.Background(), []string{memory.EmbedText(&n)})
		if err != nil {
			tb.Fatal(err)
		}
		n.Embedding, n.EmbeddingModel = v[0], emb.Model()
		nodes = append(nodes, n)
	}
	return nodes
}

// LongMemoriesCount is how many LongMemories a benchmark seeds:
// ENGRAM_RESIDENT_N, default def.
func LongMemoriesCount(tb testing.TB, def int) int {
	tb.Helper()
	v := os.Getenv("ENGRAM_RESIDENT_N")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("ENGRAM_RESIDENT_N=%q: want a positive count", v)
	}
	return n
}
