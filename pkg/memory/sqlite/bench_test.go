package sqlite_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// BenchmarkChannels measures the channels at 10,000 nodes and, when the
// -bench pattern names it (go test -run '^$' -bench 'Channels/100k'), at
// 100,000 nodes. Metrics: upserts/s, p50-ms/p99-ms per query, bytes/node
// (database file after a checkpoint, with and without the raw vector bytes),
// open-s (reopening the seeded store until Open returns: heads and BM25
// index loaded) and vectors-ready-s (until the vector graphs are built).
func BenchmarkChannels(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		name := map[int]string{10_000: "10k", 100_000: "100k"}[n]
		b.Run(name, func(b *testing.B) {
			if n > 10_000 && !strings.Contains(flag.Lookup("test.bench").Value.String(), name) {
				b.Skipf("seeding %d nodes takes minutes: run with -bench 'Channels/%s'", n, name)
			}
			benchStore(b, n)
		})
	}
}

func benchStore(b *testing.B, nodes int) {
	dir := b.TempDir()
	path := filepath.Join(dir, "memory.db")
	s := memorytest.Bench(b, func(b *testing.B) memory.Store {
		s, err := sqlite.Open(context.Background(), path)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}, nodes).(*sqlite.Store)
	ctx := context.Background()
	var total int
	if err := s.Scan(ctx, func(memory.Node) error { total++; return nil }, func(memory.Edge) error { return nil }); err != nil {
		b.Fatal(err)
	}
	if err := s.Checkpoint(ctx); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	s2, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	open := time.Since(start)
	defer s2.Close()
	if err := s2.WaitIndexed(ctx); err != nil {
		b.Fatal(err)
	}
	ready := time.Since(start)
	b.Run("Size", func(b *testing.B) {
		for b.Loop() {
		}
		perNode := float64(st.Size()) / float64(total)
		b.ReportMetric(perNode, "bytes/node")
		b.ReportMetric(perNode-4*memorytest.BenchDim, "bytes/node-excl-vector")
		b.ReportMetric(open.Seconds(), "open-s")
		b.ReportMetric(ready.Seconds(), "vectors-ready-s")
	})
}
