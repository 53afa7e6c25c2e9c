package injectbench

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/llm/hashembed"
)

// BenchmarkExplain measures composing one block (a dry run: no record)
// on a seeded SQLite store of 10,000 memories, without the explanation
// ("off": what every caller that does not ask pays) and with it ("on":
// what the turn_started handler pays to record it). Median and p99 per
// block.
func BenchmarkExplain(b *testing.B) {
	for _, be := range storetest.Backends(b) {
		if be.Name != "sqlite" {
			continue
		}
		ctx := context.Background()
		st := be.Open(b).(Store)
		emb := hashembed.New(384)
		if _, err := Seed(ctx, st, emb, 10000); err != nil {
			b.Fatal(err)
		}
		inj, err := inject.New(st, emb, inject.Defaults())
		if err != nil {
			b.Fatal(err)
		}
		for _, explain := range []bool{false, true} {
			b.Run(map[bool]string{false: "off", true: "on"}[explain], func(b *testing.B) {
				qs := Corpus()
				lat := make([]float64, 0, b.N)
				recalled := 0
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					req := inject.Request{Project: Project, Session: "bench", Turn: fmt.Sprint(i), Text: qs[i%len(qs)], DryRun: true}
					req.Explain = explain
					blk, err := inj.Compose(ctx, req)
					if err != nil {
						b.Fatal(err)
					}
					recalled += len(blk.Recalled)
					lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
				}
				b.StopTimer()
				if recalled == 0 {
					b.Fatal("no block recalled anything: the benchmark measures nothing")
				}
				b.ReportMetric(float64(recalled)/float64(b.N), "lines/block")
				sort.Float64s(lat)
				b.ReportMetric(lat[len(lat)/2], "p50_ms")
				b.ReportMetric(lat[min(len(lat)-1, len(lat)*99/100)], "p99_ms")
			})
		}
	}
}
