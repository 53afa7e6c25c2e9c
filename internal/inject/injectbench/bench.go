package injectbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/natsembed"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/hashembed"
	"github.com/engram-memory/engram/pkg/memory"
)

// Store is what the benchmark needs of a store.
type Store interface {
	inject.Store
	PutBatch(ctx context.Context, nodes []memory.Node, edges []memory.Edge) error
	EventProcessed(ctx context.Context, p memory.ProjectRef, consumer, eventID string) (bool, error)
	MarkEventProcessed(ctx context.Context, p memory.ProjectRef, consumer, eventID string, ttl time.Duration) error
}

// Options configure a benchmark run.
type Options struct {
	StoreName string // reported as "store"
	Memories  int    // memories in the store (seeds + filler)
	// Projects spreads the filler over this many projects (ProjectName),
	// the turns likewise, round robin; 0 or 1: one project.
	Projects int
	// AnywhereEvery makes one filler memory in AnywhereEvery reach
	// anywhere (recalled from the tenant's other projects too, as the
	// extractor marks lessons that help elsewhere); 0: none does.
	AnywhereEvery int
	// NovelWords gives each turn's question a word no other turn has, as
	// a conversation's new words do: what the store keeps of query terms
	// (the Redis store's statistics of other projects) misses every turn.
	NovelWords bool
	// Seeded says the store already holds the corpus (a kept fixture):
	// the seeding is skipped.
	Seeded  bool
	Clients []int // concurrent clients per measurement, e.g. 1 and 8
	// CPUProfile, when set, writes a CPU profile of each measurement's
	// turns (not the seeding, not the warm-up) to CPUProfile-c<clients>
	// (-c<clients>-2 for a client count's second measurement, and so on).
	CPUProfile string
	Turns      int    // measured turns per measurement (all clients together)
	Warmup     int    // unmeasured turns first
	Dir        string // scratch folder (NATS store)
	// NATSSyncAlways and NATSSyncInterval are the embedded server's sync
	// policy (engram serve's ENGRAM_NATS_SYNC; 0 and false: nats-server's
	// default, every two minutes).
	NATSSyncAlways   bool
	NATSSyncInterval time.Duration
	Concurrency      int // injector handlers in flight
	Progress         io.Writer
	// ServerCPU reports the CPU time the store's server has used so far
	// (Redis: INFO cpu), for server_cpu_ms_per_turn; nil for a store in
	// this process.
	ServerCPU func(ctx context.Context) (time.Duration, error)
}

// Result is one measurement (`engram bench inject --json` prints them).
type Result struct {
	Store             string  `json:"store"`
	Memories          int     `json:"memories"`
	Clients           int     `json:"clients"`
	Turns             int     `json:"turns"`
	P50ms             float64 `json:"p50_ms"`
	P99ms             float64 `json:"p99_ms"`
	TurnsPerSec       float64 `json:"turns_per_sec"`
	BlockTokensMedian int     `json:"block_tokens_median"`
	BlockTokensP95    int     `json:"block_tokens_p95"`
	Timeouts          int     `json:"timeouts"`
	SeedSeconds       float64 `json:"seed_seconds"`
	// CPU per measured turn: this process (the clients, the NATS server,
	// the injector and, for SQLite, the store) and the store's server. On a
	// shared machine whose speed drifts, these compare binaries more
	// steadily than the latencies (they still grow when the cores are
	// contended). Zero when not measured.
	CPUmsPerTurn       float64 `json:"cpu_ms_per_turn"`
	ServerCPUmsPerTurn float64 `json:"server_cpu_ms_per_turn,omitempty"`
	Projects           int     `json:"projects"`
	// Memory of this process after the measurement (after a collection):
	// resident set (VmRSS), its peak so far (VmHWM) and the Go heap in
	// use, in MB; zero where /proc is not there. For SQLite they hold the
	// store's in-memory indexes, for Redis only the clients'.
	RSSMB     float64 `json:"rss_mb"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
	HeapMB    float64 `json:"heap_mb"`
	// What the measured turns allocated (the whole process: clients,
	// NATS, injector, store), KB a turn, and the collections they caused.
	AllocKBPerTurn float64 `json:"alloc_kb_per_turn"`
	GCs            int     `json:"gcs"`
}

// LineCount is how many lines one corpus turn received.
type LineCount struct {
	Turn     string `json:"turn"`
	Standing int    `json:"standing"`
	Recalled int    `json:"recalled"`
	Tokens   int    `json:"tokens"`
}

// Seed fills st with the corpus: the hand-written seeds plus filler up to
// memories, embedded with emb. It returns how long it took.
func Seed(ctx context.Context, st Store, emb *hashembed.Embedder, memories int) (time.Duration, error) {
	return SeedProjects(ctx, st, emb, memories, 1)
}

// SeedProjects is Seed with the filler spread over projects projects
// (ProjectName(i % projects)); the hand-written seeds stay in Project.
func SeedProjects(ctx context.Context, st Store, emb *hashembed.Embedder, memories, projects int) (time.Duration, error) {
	return SeedShape(ctx, st, emb, memories, projects, 0)
}

// SeedShape is SeedProjects with one filler memory in anywhereEvery (picked
// by a hash of its number) of reach anywhere (0: none).
func SeedShape(ctx context.Context, st Store, emb *hashembed.Embedder, memories, projects, anywhereEvery int) (time.Duration, error) {
	start := time.Now()
	nodes := SeedNodes()
	if memories > len(nodes) {
		fill := Filler(memories-len(nodes), 1)
		for i := range fill {
			if projects > 1 {
				fill[i].ProjectID = ProjectName(i % projects)
			}
			// A hash of i, not i itself: with i % anywhereEvery, every
			// such memory would fall in the projects i % projects shares
			// a divisor with.
			if anywhereEvery > 0 && (uint32(i)*2654435761>>8)%uint32(anywhereEvery) == 0 {
				fill[i].Reach = memory.ReachAnywhere
			}
		}
		nodes = append(nodes, fill...)
	}
	now := time.Now().UTC()
	const batch = 250 // a Redis PutBatch is one transaction: keep each short
	for i := 0; i < len(nodes); i += batch {
		chunk := nodes[i:min(i+batch, len(nodes))]
		texts := make([]string, len(chunk))
		for j := range chunk {
			texts[j] = memory.EmbedText(&chunk[j])
		}
		vecs, err := emb.Embed(ctx, texts)
		if err != nil {
			return 0, err
		}
		prepared := make([]memory.Node, len(chunk))
		for j := range chunk {
			chunk[j].Embedding, chunk[j].EmbeddingModel = vecs[j], emb.Model()
			// Spread ages over a year so that recency does something.
			chunk[j].UpdatedAt = now.Add(-time.Duration((i+j)%365) * 24 * time.Hour)
			n, err := memory.PrepareNew(chunk[j], now)
			if err != nil {
				return 0, fmt.Errorf("injectbench: seed %s: %w", chunk[j].ID, err)
			}
			prepared[j] = n
		}
		var edges []memory.Edge
		if i == 0 {
			edges = SeedEdges()
		}
		if err := st.PutBatch(ctx, prepared, edges); err != nil {
			return 0, fmt.Errorf("injectbench: seed batch %d: %w", i/batch, err)
		}
	}
	return time.Since(start), nil
}

// Corpus returns the turns whose blocks are measured: ordinary questions,
// content-free turns and one rich question.
func Corpus() []string {
	out := append([]string{}, Questions...)
	out = append(out, ContentFree...)
	return append(out, Rich)
}

// Lines builds the block of every corpus turn directly (no bus) and counts
// its lines: the table in package inject's docs. Each turn is the first of
// a session of its own, named after run (a kept fixture's sessions of an
// earlier run would have had their standing instructions already).
func Lines(ctx context.Context, inj *inject.Injector, run string) ([]LineCount, error) {
	var out []LineCount
	for i, q := range Corpus() {
		b, err := inj.Build(ctx, inject.Request{Project: Project, Session: fmt.Sprintf("%s-lines-%d", run, i), Turn: "t1", Text: q,
			ProjectNames: map[string]string{OtherProject: "Billing API"}})
		if err != nil {
			return nil, err
		}
		out = append(out, LineCount{Turn: q, Standing: len(b.Standing), Recalled: len(b.Recalled), Tokens: b.Tokens()})
	}
	return out, nil
}

// Run measures turn_started published -> block received by the client,
// through JetStream on an embedded server, with the injector worker running
// in this process on st and connected to the server in process (as
// `engram serve` runs it), the client over TCP.
func Run(ctx context.Context, st Store, opts Options) ([]Result, []LineCount, error) {
	if opts.Memories <= 0 || opts.Turns <= 0 || len(opts.Clients) == 0 || opts.Dir == "" {
		return nil, nil, errors.New("injectbench: memories, turns, clients and dir are required")
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	emb := hashembed.New(384)
	projects := max(opts.Projects, 1)
	var seedTime time.Duration
	if !opts.Seeded {
		fmt.Fprintf(progress, "seeding %d memories in %d projects (%s)...\n", opts.Memories, projects, opts.StoreName)
		var err error
		if seedTime, err = SeedShape(ctx, st, emb, opts.Memories, projects, opts.AnywhereEvery); err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(progress, "seeded in %.1fs (%.0f memories/s)\n", seedTime.Seconds(), float64(opts.Memories)/seedTime.Seconds())
	}

	inj, err := inject.New(st, emb, inject.Defaults())
	if err != nil {
		return nil, nil, err
	}
	// Sessions are new on every run: a kept fixture holds the injection
	// records of the runs before, and a turn id seen before is answered
	// with its recorded block.
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	lines, err := Lines(ctx, inj, run)
	if err != nil {
		return nil, nil, err
	}

	srv, err := natsembed.Start(natsembed.Options{StoreDir: filepath.Join(opts.Dir, "nats"), Listen: "127.0.0.1:-1",
		SyncAlways: opts.NATSSyncAlways, SyncInterval: opts.NATSSyncInterval})
	if err != nil {
		return nil, nil, err
	}
	defer srv.Shutdown()
	// The worker connects in process, as under `engram serve`; the
	// platform below is a network client.
	workerConn, err := nats.Connect(srv.ClientURL(), nats.InProcessServer(srv.NATS()))
	if err != nil {
		return nil, nil, err
	}
	defer workerConn.Close()
	js, err := jetstream.New(workerConn)
	if err != nil {
		return nil, nil, err
	}
	topo := events.DefaultTopology()
	if err := events.EnsureTopology(ctx, js, topo); err != nil {
		return nil, nil, err
	}
	pub, err := events.NewClient(workerConn)
	if err != nil {
		return nil, nil, err
	}
	cfg := runner.ConfigFor(topo, events.ConsumerInjector)
	cfg.Concurrency = max(opts.Concurrency, 1)
	r, err := runner.New(js, cfg, inject.NewHandler(inj, pub, nil).Handle)
	if err != nil {
		return nil, nil, err
	}
	if err := r.Start(ctx); err != nil {
		return nil, nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.Stop(sctx)
	}()

	platformConn, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return nil, nil, err
	}
	defer platformConn.Close()
	client, err := events.NewClient(platformConn, events.WithInjectTimeout(5*time.Second))
	if err != nil {
		return nil, nil, err
	}

	corpus := Corpus()
	var results []Result
	for m, clients := range opts.Clients {
		// Each measurement's turns are new too: one that repeated an
		// earlier one's client count (-clients 1,8,1) had its turns
		// answered from the records of that one's.
		tag := fmt.Sprintf("%s-m%d", run, m)
		// As testing.B does before a benchmark: collect the setup's garbage
		// (the seeding's, or the previous run's) so that the measured turns
		// run on the heap of a process that serves, not of one that has
		// just bulk-loaded (the last collection during the seeding saw its
		// temporaries live and set the heap goal from them). Calling the
		// injector directly right after seeding 100,000 memories into
		// SQLite, without it, in two tries: the candidate load's p50 was
		// 4.2x and 1.8x, and the turn's p99 2.5x and 1.8x, what they were
		// after a collection.
		runtime.GC()
		if _, _, err := drive(ctx, client, corpus, clients, projects, opts.Warmup, tag+"-warm", opts.NovelWords); err != nil {
			return nil, nil, err
		}
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		cpu0, cpuOK := processCPU()
		var (
			srv0   time.Duration
			srvErr error
		)
		if opts.ServerCPU != nil {
			srv0, srvErr = opts.ServerCPU(ctx)
		}
		stopProfile, err := startProfile(opts.CPUProfile, profileName(opts.Clients, m))
		if err != nil {
			return nil, nil, err
		}
		lat, res, err := drive(ctx, client, corpus, clients, projects, opts.Turns, fmt.Sprintf("%s-c%d", tag, clients), opts.NovelWords)
		stopProfile()
		if err != nil {
			return nil, nil, err
		}
		if cpu1, ok := processCPU(); ok && cpuOK && res.Turns > 0 {
			res.CPUmsPerTurn = msPerTurn(cpu1-cpu0, res.Turns)
		}
		runtime.ReadMemStats(&ms1)
		if res.Turns > 0 {
			res.AllocKBPerTurn = float64(ms1.TotalAlloc-ms0.TotalAlloc) / 1024 / float64(res.Turns)
			res.GCs = int(ms1.NumGC - ms0.NumGC)
		}
		if opts.ServerCPU != nil {
			srv1, err := opts.ServerCPU(ctx)
			if err = errors.Join(srvErr, err); err != nil {
				fmt.Fprintf(progress, "server CPU not measured: %v\n", err)
			} else if res.Turns > 0 {
				res.ServerCPUmsPerTurn = msPerTurn(srv1-srv0, res.Turns)
			}
		}
		res.Store, res.Memories, res.Clients, res.SeedSeconds = opts.StoreName, opts.Memories, clients, seedTime.Seconds()
		res.Projects = projects
		res.P50ms, res.P99ms = percentile(lat, 0.50), percentile(lat, 0.99)
		results = append(results, res)
		fmt.Fprintf(progress, "%s %d memories in %d projects, %d clients: p50 %.2f ms, p99 %.2f ms, %.0f turns/s, CPU %.2f ms a turn (server %.2f)\n",
			opts.StoreName, opts.Memories, projects, clients, res.P50ms, res.P99ms, res.TurnsPerSec, res.CPUmsPerTurn, res.ServerCPUmsPerTurn)
	}
	// Resident memory once, after the last measurement: residentMB hands
	// the free heap back to the system, and a measurement after it paid
	// for faulting its heap in again (the 8-client run after the 1-client
	// one measured 1.7-1.9 ms of CPU a turn instead of 1.1-1.2 ms at
	// 100,000 memories, and half the turns a second).
	rss, peak, heap := residentMB()
	for i := range results {
		results[i].RSSMB, results[i].PeakRSSMB, results[i].HeapMB = rss, peak, heap
	}
	fmt.Fprintf(progress, "resident after the measurements: RSS %.0f MB (peak %.0f, Go heap %.0f)\n", rss, peak, heap)
	return results, lines, nil
}

// drive runs turns spread over clients concurrent platforms and returns the
// latencies (ms) with throughput and block sizes.
func drive(ctx context.Context, client *events.Client, corpus []string, clients, projects, turns int, tag string, novel bool) ([]float64, Result, error) {
	word := strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return -1
	}, tag)
	var (
		mu       sync.Mutex
		lat      []float64
		tokens   []int
		timeouts int
		firstErr error
		wg       sync.WaitGroup
		next     = make(chan int)
	)
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := range next {
				ref := events.Ref{ProjectID: ProjectName(i % projects), SessionID: fmt.Sprintf("%s-s%d", tag, c), TurnID: fmt.Sprintf("%s-t%d", tag, i)}
				t0 := time.Now()
				text := corpus[i%len(corpus)]
				if novel {
					text += fmt.Sprintf(" nw%sq%d", word, i)
				}
				got, err := client.Inject(ctx, ref, events.TurnStarted{Text: text,
					ProjectNames: map[string]string{OtherProject: "Billing API"}})
				d := time.Since(t0)
				mu.Lock()
				switch {
				case errors.Is(err, events.ErrInjectTimeout):
					timeouts++
				case err != nil:
					if firstErr == nil {
						firstErr = err
					}
				default:
					lat = append(lat, float64(d.Microseconds())/1000)
					tokens = append(tokens, (len([]rune(got.Block))+3)/4)
				}
				mu.Unlock()
			}
		}(c)
	}
feed:
	for i := 0; i < turns; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return nil, Result{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, Result{}, err
	}
	res := Result{Turns: len(lat), Timeouts: timeouts, TurnsPerSec: float64(len(lat)) / elapsed.Seconds()}
	sort.Ints(tokens)
	if len(tokens) > 0 {
		res.BlockTokensMedian = tokens[len(tokens)/2]
		res.BlockTokensP95 = tokens[min(len(tokens)-1, int(float64(len(tokens))*0.95))]
	}
	return lat, res, nil
}

// profileName is the suffix of measurement m's CPU profile: c<clients>,
// and -<n> for the n-th measurement of a client count measured before
// (-clients 1,8,1: c1, c8, c1-2).
func profileName(clients []int, m int) string {
	name := fmt.Sprintf("c%d", clients[m])
	seen := 0
	for _, c := range clients[:m+1] {
		if c == clients[m] {
			seen++
		}
	}
	if seen > 1 {
		name += fmt.Sprintf("-%d", seen)
	}
	return name
}

// startProfile starts a CPU profile of a measurement's turns into
// path-<name> (nothing when path is empty) and returns its stop.
func startProfile(path, name string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path + "-" + name)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// residentMB returns this process's resident set, its peak and the Go
// heap in use (MB), after a collection that returns freed memory to the
// system: what the process holds, not the garbage it has not collected.
func residentMB() (rss, peak, heap float64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap = float64(ms.HeapInuse) / (1 << 20)
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, heap
	}
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) < 1 {
			continue
		}
		kb, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		if k == "VmRSS" {
			rss = kb / 1024
		} else {
			peak = kb / 1024
		}
	}
	return rss, peak, heap
}

func msPerTurn(d time.Duration, turns int) float64 {
	return float64(d.Microseconds()) / 1000 / float64(turns)
}

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// Table renders line counts as a Markdown table.
func Table(lines []LineCount) string {
	var sb strings.Builder
	sb.WriteString("| turn | standing | recalled | tokens |\n|---|---|---|---|\n")
	for _, l := range lines {
		turn := l.Turn
		if len(turn) > 60 {
			turn = turn[:57] + "..."
		}
		fmt.Fprintf(&sb, "| %s | %d | %d | %d |\n", turn, l.Standing, l.Recalled, l.Tokens)
	}
	return sb.String()
}
