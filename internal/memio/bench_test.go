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
	"github.com/engram-memory/engram/pkg/llm/hashembed"
	"github.com/engram-memory/engram/pkg/memory"
)

// BenchmarkImport measures engram memory import without the embedding:
// memories/s of a file of injectbench filler memories (short ones, as the
// bench seeds) into each backend. BenchmarkImportEmbedded adds what
// `engram memory import` does next.
func BenchmarkImport(b *testing.B) { benchImport(b, false) }

// BenchmarkImportEmbedded is BenchmarkImport followed by embedding every
// imported memory as `engram memory import` does (memory.EmbedPending,
// 64 at a time) with the built-in hashing embedder (384 dimensions, the
// default without a model): memories/s of the two together, and of the
// embedding alone (embed-memories/s).
func BenchmarkImportEmbedded(b *testing.B) { benchImport(b, true) }

func benchImport(b *testing.B, embed bool) {
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
			var total, embedding time.Duration
			for b.Loop() {
				st := be.Open(b)
				start := time.Now()
				stats, err := memio.Import(context.Background(), st, bytes.NewReader(file.Bytes()), "", time.Now())
				if err != nil {
					b.Fatal(err)
				}
				if stats.Nodes != n {
					b.Fatalf("imported %d nodes, want %d", stats.Nodes, n)
				}
				if embed {
					at := time.Now()
					done, err := memory.EmbedPending(context.Background(), st, hashembed.New(0), 64)
					if err != nil {
						b.Fatal(err)
					}
					if done != n {
						b.Fatalf("embedded %d memories, want %d", done, n)
					}
					embedding += time.Since(at)
				}
				total += time.Since(start)
			}
			b.ReportMetric(float64(n*b.N)/total.Seconds(), "memories/s")
			if embed {
				b.ReportMetric(float64(n*b.N)/embedding.Seconds(), "embed-memories/s")
			}
		})
	}
}
