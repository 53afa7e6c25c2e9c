package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/hashembed"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// BenchmarkServeStartup runs the engram binary's `serve` (every worker, the
// embedded NATS server, the SQLite store, the health endpoint) on a data dir
// that is empty (empty), or holds 100,000 memories (100k) or 1,000,000 (1M,
// only when the -bench pattern names it or ENGRAM_BENCH_1M=1: its fixture
// takes minutes to build and gigabytes of disk and memory). Once the process
// is ready, a platform client with the default inject timeout (1.5 s) sends
// a turn every 100 ms until the memories are loaded. Metrics, medians over
// the iterations (-benchtime Nx), times from the process's start:
//
//	ready-s        the "engram ready" line
//	memories-s     the "memory index loaded" line (BM25, filters, every memory)
//	vectors-s      the "vector index ready" line (the HNSW graph; more than
//	               an hour at 1M on 2 cores: ENGRAM_BENCH_VECTORS=0 does not
//	               wait for it and reports 0)
//	turn-p50-ms    block latency of the turns sent while loading (median of the run)
//	turn-p99-ms    their 99th percentile
//	turn-max-ms    the slowest of them
//	turns-loading  turns answered before the memories were loaded
//	turns-late     turns that got no block in time (want 0)
//	gc-mark-max-s  with GODEBUG=gctrace=1 in the environment: the longest
//	               concurrent mark of serve's collector until the memories
//	               were loaded (the late turns of a large load fall in them)
//
//	go test -run '^$' -bench 'ServeStartup/(empty|100k)' -benchtime 3x ./cmd/engram
//	go test -run '^$' -bench 'ServeStartup/1M' -benchtime 1x -timeout 2h ./cmd/engram
//	ENGRAM_BENCH_BIN=/tmp/engram-before go test ...   # another build of engram
//
// The fixture (memorytest.BenchCorpus nodes in one project, 384-dimension
// hashing-embedder vectors: the embedder the process uses when no
// embedding model is configured) is built once with sqlite.WithBulkWrites
// and cached under ENGRAM_BENCH_CACHE (default: the user cache dir,
// engram/bench), keyed by size, fixture version and schema version; each
// iteration copies it into a fresh data dir.
func BenchmarkServeStartup(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"empty", 0}, {"100k", 100_000}, {"1M", 1_000_000}} {
		b.Run(size.name, func(b *testing.B) {
			if size.n > 100_000 && os.Getenv("ENGRAM_BENCH_1M") != "1" &&
				!strings.Contains(flag.Lookup("test.bench").Value.String(), size.name) {
				b.Skipf("the %s fixture takes minutes to build: run with -bench 'ServeStartup/%s' or ENGRAM_BENCH_1M=1", size.name, size.name)
			}
			benchServeStartup(b, size.n)
		})
	}
}

const (
	fixtureVersion = 1
)

func benchServeStartup(b *testing.B, n int) {
	bin := benchBinary(b)
	fixture := ""
	if n > 0 {
		fixture = serveFixture(b, n)
	}
	var ready, memories, vectors, turnP50, turnP99, turnMax, loadingTurns, late, markMax []float64
	for b.Loop() {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), "data")
		if err := os.MkdirAll(dir, 0o750); err != nil {
			b.Fatal(err)
		}
		if fixture != "" {
			if err := copyFile(fixture, filepath.Join(dir, "engram.db")); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		r := runServe(b, bin, dir)
		ready = append(ready, r.ready.Seconds())
		var lat []float64
		var whileLoading, lateN int
		mem, vec := r.ready, r.ready // an empty store logs no load
		if n > 0 {
			lat, whileLoading, lateN = r.turnsWhileLoading(b)
			mem, vec = r.wait(b, "memory index loaded"), 0 // 0: not waited for (ENGRAM_BENCH_VECTORS=0)
			if os.Getenv("ENGRAM_BENCH_VECTORS") != "0" {
				vec = r.wait(b, "vector index ready")
			}
		}
		memories, vectors = append(memories, mem.Seconds()), append(vectors, vec.Seconds())
		b.StopTimer()
		r.stop(b)
		slices.Sort(lat)
		turnP50, turnP99, turnMax = append(turnP50, pct(lat, 0.5)), append(turnP99, pct(lat, 0.99)), append(turnMax, pct(lat, 1))
		cycles, longest := r.gcMarks(mem)
		markMax = append(markMax, longest.Seconds())
		loadingTurns, late = append(loadingTurns, float64(whileLoading)), append(late, float64(lateN))
		b.Logf("%d memories: ready %.3f s, memories loaded %.2f s, vectors %.2f s; %d turns while loading (%d late), block p50 %.1f ms, p99 %.1f ms, max %.1f ms; %d collections while loading, longest mark %.2f s",
			n, r.ready.Seconds(), mem.Seconds(), vec.Seconds(), whileLoading, lateN, pct(lat, 0.5), pct(lat, 0.99), pct(lat, 1), cycles, longest.Seconds())
		b.StartTimer()
	}
	for _, m := range []struct {
		unit string
		v    []float64
	}{{"ready-s", ready}, {"memories-s", memories}, {"vectors-s", vectors}, {"turn-p50-ms", turnP50},
		{"turn-p99-ms", turnP99}, {"turn-max-ms", turnMax}, {"turns-loading", loadingTurns}, {"turns-late", late},
		{"gc-mark-max-s", markMax}} {
		b.ReportMetric(median(m.v), m.unit)
	}
	b.ReportMetric(0, "ns/op")
}

// benchBinary builds the engram binary once per test binary run, or
// returns ENGRAM_BENCH_BIN (a binary built before, to measure two versions
// side by side on one fixture: the fixture's schema must be the binary's).
func benchBinary(b *testing.B) string {
	if bin := os.Getenv("ENGRAM_BENCH_BIN"); bin != "" {
		return bin
	}
	benchBuild.Do(func() {
		dir, err := os.MkdirTemp("", "engram-bench")
		if err != nil {
			benchBuildErr = err
			return
		}
		tmpDirs = append(tmpDirs, dir)
		benchBin = filepath.Join(dir, "engram")
		cmd := exec.Command("go", "build", "-o", benchBin, ".")
		cmd.Stderr = os.Stderr
		benchBuildErr = cmd.Run()
	})
	if benchBuildErr != nil {
		b.Fatal(benchBuildErr)
	}
	return benchBin
}

var (
	benchBuild    sync.Once
	benchBin      string
	benchBuildErr error
)

// serveRun is a running `engram serve` of the benchmark.
type serveRun struct {
	cmd     *exec.Cmd
	t0      time.Time
	ready   time.Duration
	natsURL string
	dataDir string // serve's data dir: the platform's credentials
	mu      sync.Mutex
	seen    map[string]time.Duration // log message -> when it was first logged
	logs    strings.Builder
	lines   chan struct{} // signalled on every new line
	done    chan struct{} // closed when the log ends
}

func runServe(b *testing.B, bin, dir string) *serveRun {
	r := &serveRun{seen: map[string]time.Duration{}, lines: make(chan struct{}, 1), done: make(chan struct{}), dataDir: dir}
	r.cmd = exec.Command(bin, "serve", "-nats-listen", "127.0.0.1:-1", "-http", "127.0.0.1:0", "-log-format", "json", "-data", dir)
	// No model: the workers that need one wait; the injector uses the
	// hashing embedder of the fixture.
	r.cmd.Env = append(os.Environ(), "ENGRAM_OLLAMA_HOST=http://127.0.0.1:1", "ENGRAM_EMBED_MODEL=")
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	r.t0 = time.Now()
	if err := r.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var line struct {
				Msg  string `json:"msg"`
				NATS string `json:"nats"`
			}
			_ = json.Unmarshal(sc.Bytes(), &line)
			r.mu.Lock()
			r.logs.WriteString(sc.Text() + "\n")
			if _, ok := r.seen[line.Msg]; !ok && line.Msg != "" {
				r.seen[line.Msg] = time.Since(r.t0)
			}
			if line.Msg == "engram ready" {
				r.natsURL = line.NATS
			}
			r.mu.Unlock()
			select {
			case r.lines <- struct{}{}:
			default:
			}
		}
	}()
	r.ready = r.wait(b, "engram ready")
	return r
}

// gcMarks reads serve's gctrace lines (GODEBUG=gctrace=1: "gc 12 @3.2s
// 4%: 0.1+2345+0.2 ms clock, ...") and returns how many collections
// started before until (from the process's start) and the longest
// concurrent mark among them.
func (r *serveRun) gcMarks(until time.Duration) (cycles int, longest time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for line := range strings.Lines(r.logs.String()) {
		var n int
		var at, stw1, mark float64
		if _, err := fmt.Sscanf(line, "gc %d @%fs %s %f+%f+", &n, &at, new(string), &stw1, &mark); err != nil {
			continue
		}
		if time.Duration(at*float64(time.Second)) > until {
			break
		}
		cycles++
		longest = max(longest, time.Duration(mark*float64(time.Millisecond)))
	}
	return cycles, longest
}

// logged reports when msg was first logged.
func (r *serveRun) logged(msg string) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.seen[msg]
	return d, ok
}

// wait waits until msg is logged (at most 2 hours: the 1M vector graph).
func (r *serveRun) wait(b *testing.B, msg string) time.Duration {
	deadline := time.After(2 * time.Hour)
	for {
		if d, ok := r.logged(msg); ok {
			return d
		}
		select {
		case <-r.lines:
		case <-r.done:
			if d, ok := r.logged(msg); ok {
				return d
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			b.Fatalf("serve exited before %q:\n%s", msg, r.logs.String())
		case <-deadline:
			b.Fatalf("no %q in 2 hours", msg)
		}
	}
}

// turnsWhileLoading sends a turn every 100 ms until the memories are loaded
// (at least one), each with the platform's default inject timeout, and
// returns the latencies (ms) of those answered, how many were answered
// before the load ended and how many got no answer in time.
func (r *serveRun) turnsWhileLoading(b *testing.B) (lat []float64, whileLoading, late int) {
	// As a platform does: its own user, with the password serve generated.
	creds, err := natsauth.LoadCredentials(r.dataDir)
	if err != nil {
		b.Fatal(err)
	}
	nc, err := nats.Connect(r.natsURL, nats.UserInfo(natsauth.RolePlatform, creds.Users[natsauth.RolePlatform]))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	ec, err := events.NewClient(nc)
	if err != nil {
		b.Fatal(err)
	}
	c := memorytest.NewBenchCorpus()
	ctx := context.Background()
	for i := 0; ; i++ {
		if _, loaded := r.logged("memory index loaded"); loaded && i > 0 {
			return lat, whileLoading, late
		}
		ref := events.Ref{ProjectID: memorytest.BenchProject, SessionID: fmt.Sprintf("s%d", i%200), TurnID: fmt.Sprintf("t%d", i)}
		t := time.Now()
		_, err := ec.Inject(ctx, ref, events.TurnStarted{Text: strings.Join(c.Query(), " ")})
		d := time.Since(t)
		if err != nil {
			late++
			if late <= 5 {
				b.Logf("turn %d (%.1f s after ready) got no block: %v", i, time.Since(r.t0).Seconds()-r.ready.Seconds(), err)
			}
		} else {
			lat = append(lat, float64(d.Microseconds())/1000)
			if d > 500*time.Millisecond {
				b.Logf("turn %d took %.0f ms, answered %.1f s after serve started", i, float64(d.Microseconds())/1000, time.Since(r.t0).Seconds())
			}
			if _, loaded := r.logged("memory index loaded"); !loaded {
				whileLoading++
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *serveRun) stop(b *testing.B) {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	<-r.done
	err := r.cmd.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if path := os.Getenv("ENGRAM_BENCH_LOG"); path != "" {
		// serve's log (with GODEBUG=gctrace=1 its collections too), to
		// read beside the slow turns logged by the benchmark.
		if werr := os.WriteFile(path, []byte(r.logs.String()), 0o600); werr != nil {
			b.Errorf("ENGRAM_BENCH_LOG: %v", werr)
		}
	}
	if err != nil {
		b.Fatalf("serve: exit %v:\n%s", err, r.logs.String())
	}
}

// serveFixture returns the path of a SQLite store of n corpus memories,
// building and caching it when missing.
func serveFixture(b *testing.B, n int) string {
	dir := os.Getenv("ENGRAM_BENCH_CACHE")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			b.Fatal(err)
		}
		dir = filepath.Join(cache, "engram", "bench")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("serve-startup-%d-f%d-s%d.db", n, fixtureVersion, sqlite.SchemaVersion()))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	tmp := path + ".building"
	for _, f := range []string{tmp, tmp + "-wal", tmp + "-shm", tmp + ".lock"} {
		_ = os.Remove(f)
	}
	ctx := context.Background()
	t0 := time.Now()
	s, err := sqlite.Open(ctx, tmp, sqlite.WithBulkWrites())
	if err != nil {
		b.Fatal(err)
	}
	emb := hashembed.New(0) // the process's embedder without an embedding model
	c := memorytest.NewBenchCorpus()
	const batch = 2000
	for done := 0; done < n; {
		nodes := make([]memory.Node, 0, batch)
		texts := make([]string, 0, batch)
		for ; len(nodes) < batch && done < n; done++ {
			nd := c.Node()
			nodes = append(nodes, nd)
			texts = append(texts, nd.Label+" "+nd.Body)
		}
		vecs, err := emb.Embed(ctx, texts)
		if err != nil {
			b.Fatal(err)
		}
		for i := range nodes {
			nodes[i].Embedding, nodes[i].EmbeddingModel = vecs[i], emb.Model()
		}
		if err := s.PutBatch(ctx, nodes, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Checkpoint(ctx); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	_ = os.Remove(tmp + ".lock")
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	b.Logf("built the %d-memory fixture in %v: %s", n, time.Since(t0).Round(time.Second), path)
	return path
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	// Written out before serve starts: the start-up would otherwise share
	// the disk with the write-back of gigabytes of copy.
	if err := out.Sync(); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func pct(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
