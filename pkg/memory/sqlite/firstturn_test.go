package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// BenchmarkFirstTurnDuringLoad measures what the first read of a project
// gets while `engram serve`'s background load runs: a store of
// ENGRAM_BENCH_LOAD_MEMORIES memories (default 20,000) spread over
// ENGRAM_BENCH_LOAD_PROJECTS projects (default 100) is reopened with
// WithBackgroundLoad, and at once a lexical read (as a turn's) asks for the
// project the load would reach last. Reported: the read's wait (ms), the
// share of the loaded store's hits it answered (1: its full recall), the
// share of the store loaded when it answered, and the project's
// conversation neighbours found (1: all).
func BenchmarkFirstTurnDuringLoad(b *testing.B) {
	memories, projects := envInt(b, "ENGRAM_BENCH_LOAD_MEMORIES", 20000), envInt(b, "ENGRAM_BENCH_LOAD_PROJECTS", 100)
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "engram.db")
	s, err := Open(ctx, path, WithBulkWrites())
	if err != nil {
		b.Fatal(err)
	}
	words := []string{"deploy", "cache", "billing", "schema", "retry", "token", "queue", "index"}
	var batch []memory.Node
	for i := range memories {
		p := i % projects // projects interleaved in row order, as turns write them
		batch = append(batch, memory.Node{ID: fmt.Sprintf("m%07d", i), Subkind: memory.Observation, Scope: memory.ScopeProject,
			ProjectID: fmt.Sprintf("p%03d", p), SessionID: fmt.Sprintf("s%d", i/(projects*10)),
			Label: fmt.Sprintf("widget %s note %d", words[i%len(words)], i), Body: fmt.Sprintf("the %s of widget %d works after the %s change", words[(i/3)%len(words)], i, words[(i/7)%len(words)])})
		if len(batch) == 500 || i == memories-1 {
			if err := s.PutBatch(ctx, batch, nil); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	last := memory.ProjectRef{Project: fmt.Sprintf("p%03d", projects-1)}
	f := memory.Filter{ProjectID: last.Project}
	terms := []string{"widget", "cache"}
	var waited, recall, loadedShare, neighbours float64
	for b.Loop() {
		s, err := Open(ctx, path, WithBackgroundLoad())
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		during, err := s.Lexical(ctx, terms, f, 50)
		waited += float64(time.Since(t0).Microseconds()) / 1000
		if err != nil {
			b.Fatal(err)
		}
		s.idx.mu.RLock()
		loadedShare += float64(len(s.idx.byID)) / float64(memories)
		s.idx.mu.RUnlock()
		var own []memory.Node
		for _, h := range during {
			own = append(own, memory.Node{ID: h.ID})
		}
		adjDuring, err := s.Adjacent(ctx, own, 1)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.WaitLoaded(ctx); err != nil {
			b.Fatal(err)
		}
		full, err := s.Lexical(ctx, terms, f, 50)
		if err != nil {
			b.Fatal(err)
		}
		adjFull, err := s.Adjacent(ctx, own, 1)
		if err != nil {
			b.Fatal(err)
		}
		found := 0
		for _, h := range full {
			if slices.ContainsFunc(during, func(x memory.Scored) bool { return x.ID == h.ID }) {
				found++
			}
		}
		recall += float64(found) / float64(max(len(full), 1))
		got, want := 0, 0
		for id, a := range adjFull {
			want += len(a.Before) + len(a.After)
			got += min(len(adjDuring[id].Before), len(a.Before)) + min(len(adjDuring[id].After), len(a.After))
		}
		if want > 0 {
			neighbours += float64(got) / float64(want)
		} else {
			neighbours++
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(waited/n, "ms-wait")
	b.ReportMetric(recall/n, "recall")
	b.ReportMetric(loadedShare/n, "loaded-share")
	b.ReportMetric(neighbours/n, "neighbours")
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
