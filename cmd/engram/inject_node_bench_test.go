package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/internal/nodetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
)

// BenchmarkInjectNodeBesideGo measures the inject round trip as a platform
// sees it, from the TypeScript client (@engram-memory/client in Node,
// clients/typescript) and from the Go client (pkg/events), in the same run
// against one `engram serve` holding 10,000 memories (the fixture of
// BenchmarkServeStartup, hashing-embedder vectors, no model): 1,000 turns
// each, one at a time, as the platform user with the default 1.5 s
// deadline, in alternating halves (Go 500, Node 500, Go 500, Node 500, each
// after 20 warm-up turns) so that neither runs on a quieter machine.
// Metrics, over the iterations' turns:
//
//	node-p50-ms  node-p99-ms  go-p50-ms  go-p99-ms   round trip, ms
//	node-late    go-late                             turns without a block in time (want 0)
//
//	go test -run '^$' -bench InjectNodeBesideGo -benchtime 1x ./cmd/engram
func BenchmarkInjectNodeBesideGo(b *testing.B) {
	const memories, turns, half = 10_000, 1000, 500
	pkg := nodetest.Package(b)
	bin := benchBinary(b)
	fixture := serveFixture(b, memories)
	c := memorytest.NewBenchCorpus()
	queries := make([]string, turns+40)
	for i := range queries {
		queries[i] = strings.Join(c.Query(), " ")
	}
	qfile := filepath.Join(b.TempDir(), "queries.json")
	qb, _ := json.Marshal(queries)
	if err := os.WriteFile(qfile, qb, 0o600); err != nil {
		b.Fatal(err)
	}
	var nodeLat, goLat []float64
	var nodeLate, goLate int
	for b.Loop() {

		dir := filepath.Join(b.TempDir(), "data")
		if err := os.MkdirAll(dir, 0o750); err != nil {
			b.Fatal(err)
		}
		if err := copyFile(fixture, filepath.Join(dir, "engram.db")); err != nil {
			b.Fatal(err)
		}
		r := runServe(b, bin, dir)
		r.wait(b, "memory index loaded")
		r.wait(b, "vector index ready")
		creds, err := natsauth.LoadCredentials(dir)
		if err != nil {
			b.Fatal(err)
		}
		pw := creds.Users[natsauth.RolePlatform]
		for from := 0; from < turns; from += half {
			lat, late := goTurns(b, r.natsURL, pw, queries, from, half)
			goLat, goLate = append(goLat, lat...), goLate+late
			lat, late = nodeTurns(b, pkg, r.natsURL, pw, qfile, from, half)
			nodeLat, nodeLate = append(nodeLat, lat...), nodeLate+late
		}
		r.stop(b)
	}
	slices.Sort(nodeLat)
	slices.Sort(goLat)
	b.Logf("%d memories, %d turns each: Node p50 %.2f ms, p99 %.2f ms, %d late; Go p50 %.2f ms, p99 %.2f ms, %d late",
		memories, len(goLat), pct(nodeLat, 0.5), pct(nodeLat, 0.99), nodeLate, pct(goLat, 0.5), pct(goLat, 0.99), goLate)
	b.ReportMetric(pct(nodeLat, 0.5), "node-p50-ms")
	b.ReportMetric(pct(nodeLat, 0.99), "node-p99-ms")
	b.ReportMetric(pct(goLat, 0.5), "go-p50-ms")
	b.ReportMetric(pct(goLat, 0.99), "go-p99-ms")
	b.ReportMetric(float64(nodeLate), "node-late")
	b.ReportMetric(float64(goLate), "go-late")
	b.ReportMetric(0, "ns/op")
}

// goTurns makes n turns (after 20 warm-up ones) with the Go client and
// returns the answered turns' latencies (ms) and the count of late ones.
func goTurns(b *testing.B, url, password string, queries []string, from, n int) ([]float64, int) {
	nc, err := nats.Connect(url, nats.UserInfo(natsauth.RolePlatform, password))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	cl, err := events.NewClient(nc)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	var lat []float64
	late := 0
	for i := -20; i < n; i++ {
		k := from + i
		ref := events.Ref{ProjectID: memorytest.BenchProject, SessionID: fmt.Sprintf("s%d", (k%200+200)%200), TurnID: "go-" + strconv.Itoa(k)}
		t0 := time.Now()
		_, err := cl.Inject(context.Background(), ref, events.TurnStarted{Text: queries[(k+len(queries))%len(queries)]})
		d := time.Since(t0)
		if i < 0 {
			continue
		}
		if err != nil {
			late++
			continue
		}
		lat = append(lat, float64(d.Microseconds())/1000)
	}
	return lat, late
}

// nodeTurns runs clients/typescript/test/bench-inject.mjs for n turns.
func nodeTurns(b *testing.B, pkg, url, password, queries string, from, n int) ([]float64, int) {
	out, err := nodetest.Node(pkg, []string{"ENGRAM_NATS_URL=" + url, "ENGRAM_NATS_PASSWORD=" + password,
		"ENGRAM_BENCH_QUERIES=" + queries, "ENGRAM_BENCH_FROM=" + strconv.Itoa(from), "ENGRAM_BENCH_TURNS=" + strconv.Itoa(n),
		"ENGRAM_BENCH_WARMUP=20", "ENGRAM_BENCH_PROJECT=" + memorytest.BenchProject}, 10*time.Minute, filepath.Join("test", "bench-inject.mjs"))
	if err != nil {
		b.Fatalf("node bench-inject.mjs: %v\n%s", err, out)
	}
	var res struct {
		Lat    []float64 `json:"lat_ms"`
		Misses int       `json:"misses"`
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		b.Fatalf("bench-inject.mjs output: %v\n%s", err, out)
	}
	return res.Lat, res.Misses
}
