package memory_test

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/inject/injectbench"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/neutralisetest"
)

// The benchmarks run cold (the cache off: the rules every time, what a
// text costs the first time it is shown) and warm (answered from the
// cache, as the same memories are shown turn after turn).
func coldWarm(b *testing.B, run func(b *testing.B)) {
	b.Run("cold", func(b *testing.B) {
		memory.WithoutNeutraliseCache(b)
		run(b)
	})
	b.Run("warm", run)
}

// BenchmarkNeutraliseLine: one ordinary line of the corpus per op.
func BenchmarkNeutraliseLine(b *testing.B) {
	lines := neutralisetest.Ordinary()
	coldWarm(b, func(b *testing.B) {
		for i := range b.N {
			memory.Neutralise(lines[i%len(lines)])
		}
	})
}

// BenchmarkNeutraliseAttack: one attack payload per op.
func BenchmarkNeutraliseAttack(b *testing.B) {
	attacks := neutralisetest.Attacks()
	memory.WithoutNeutraliseCache(b)
	for i := range b.N {
		memory.Neutralise(attacks[i%len(attacks)].Text)
	}
}

// BenchmarkNeutraliseText: the whole ordinary corpus as one text (a long
// summary) per op.
func BenchmarkNeutraliseText(b *testing.B) {
	whole := strings.Join(neutralisetest.Ordinary(), "\n")
	memory.WithoutNeutraliseCache(b)
	b.SetBytes(int64(len(whole)))
	for range b.N {
		memory.NeutraliseText(whole)
	}
}

// BenchmarkNeutraliseBlock: the lines of one memory block per op, 15 lines
// rendered as the injector renders them (inject's LineText: label and
// first body line, neutralised, cut, neutralised again; provenance), of
// the memories `engram bench inject` seeds, and of LongMemEval memories
// (a user message and the start of the reply: about 750 bytes before the
// cut) when the development set is beside the repository
// (../shared/eval/longmemeval-dev, or ENGRAM_EVAL_DIR).
func BenchmarkNeutraliseBlock(b *testing.B) {
	inj, err := inject.New(nil, nil, inject.Defaults())
	if err != nil {
		b.Fatal(err)
	}
	sets := []struct {
		name  string
		nodes func(testing.TB) []memory.Node
	}{
		{"bench", func(testing.TB) []memory.Node {
			return append(injectbench.SeedNodes(), injectbench.Filler(2000, 1)...)
		}},
		{"longmemeval", longMemEvalNodes},
	}
	for _, set := range sets {
		b.Run(set.name, func(b *testing.B) {
			nodes := set.nodes(b)
			blocks := len(nodes) / 15
			coldWarm(b, func(b *testing.B) {
				for i := range b.N {
					var sb strings.Builder
					for _, n := range nodes[i%blocks*15:][:15] {
						sb.WriteString(inject.Line{ID: n.ID, Text: inj.LineText(&n), Provenance: memory.Provenance(&n, "p", nil)}.Render())
					}
				}
			})
		})
	}
}

// longMemEvalNodes are every 25th node of the LongMemEval development set.
func longMemEvalNodes(tb testing.TB) []memory.Node {
	dir := os.Getenv("ENGRAM_EVAL_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "eval")
	}
	f, err := os.Open(filepath.Join(dir, "longmemeval-dev", "graph.jsonl.gz"))
	if err != nil {
		tb.Skipf("no LongMemEval development set: %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var out []memory.Node
	for k := 0; sc.Scan(); {
		var n struct{ Type, ID, Label, Body string }
		if json.Unmarshal(sc.Bytes(), &n) != nil || n.Type != "node" {
			continue
		}
		if k++; k%25 == 0 {
			out = append(out, memory.Node{ID: n.ID, Label: n.Label, Body: n.Body, Subkind: memory.Observation, ProjectID: "p", Confidence: 0.8})
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}
