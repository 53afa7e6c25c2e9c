package memio_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/inject/injectbench"
	"github.com/engram-memory/engram/internal/memio"
	"github.com/engram-memory/engram/internal/storetest"
)

// BenchmarkImport measures engram memory import without the embedding:
// memories/s of a file of injectbench filler memories (short ones, as the
// bench seeds) into each backend.
func BenchmarkImport(b *testing.B) {
	const n = 20_000
	var file bytes.Buffer
	for _, nd := range injectbench.Filler(n, 1) {
		raw, err := json.Marshal(nd)
		if err != nil {
			b.Fatal(err)
		}
		file.WriteString(`{"type":"node",`)
		file.Write(raw[1:])
		file.WriteByte('\n')
	}
	for _, be := range storetest.Backends(b) {
		b.Run(be.Name, func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				st := be.Open(b)
				start := time.Now()
				stats, err := memio.Import(context.Background(), st, bytes.NewReader(file.Bytes()), "", time.Now())
				if err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				if stats.Nodes != n {
					b.Fatalf("imported %d nodes, want %d", stats.Nodes, n)
				}
			}
			b.ReportMetric(float64(n*b.N)/total.Seconds(), "memories/s")
		})
	}
}
