package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/inject/injectbench"
	"github.com/engram-memory/engram/pkg/memory"
	redisstore "github.com/engram-memory/engram/pkg/memory/redis"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

func init() {
	register("bench", "measure Engram: engram bench inject [-store sqlite|redis] [-memories N] [-clients 1,8] [-json]", benchCmd)
}

func benchCmd(ctx context.Context, stdout io.Writer, args []string) error {
	if err := groupHelp("bench", []subcommand{{"inject [flags]", "turn_started -> block through JetStream, per client count (the only benchmark so far)"}}, args); err != nil {
		return err
	}
	if args[0] != "inject" {
		return fmt.Errorf("%w: engram bench inject [flags] (the only benchmark so far)", errUsage)
	}
	return benchInject(ctx, stdout, args[1:])
}

// benchInject seeds a fresh store (a temporary SQLite database, or a
// throw-away namespace of the Redis at ENGRAM_REDIS_URL), runs the injector
// on an embedded NATS server and drives it with concurrent platform clients:
// turn_started published -> block received.
func benchInject(ctx context.Context, stdout io.Writer, args []string) error {
	var (
		storeKind string
		memories  int
		clients   string
		turns     int
		asJSON    bool
		lines     bool
		conc      int
		projects  int
		anywhere  int
		novel     bool
		dbPath    string
		namespace string
		cpuProf   string
	)
	cfg, _, err := loadConfig("bench inject", args, config.Conn, func(fs *flag.FlagSet) {
		fs.StringVar(&storeKind, "store", "sqlite", "store to measure: sqlite (temporary file) or redis (ENGRAM_REDIS_URL, a throw-away namespace)")
		fs.IntVar(&memories, "memories", 10000, "memories in the store (all in one project unless -projects)")
		fs.IntVar(&projects, "projects", 1, "spread the memories (and the turns) over this many projects")
		fs.IntVar(&anywhere, "anywhere-every", 0, "make every Nth memory reach anywhere (recalled from the other projects too); 0: none")
		fs.BoolVar(&novel, "novel-words", false, "give each turn's question a word of its own (a store's caches of query terms miss)")
		fs.StringVar(&dbPath, "db", "", "sqlite: use and keep this database file, seeded only if it holds no memory yet (a fixture reused between runs; loaded before the turns are measured, without a vector graph: the injector with the built-in embedder reads no vector)")
		fs.StringVar(&namespace, "namespace", "", "redis: use and keep this namespace, seeded only if it holds no memory yet")
		fs.StringVar(&clients, "clients", "1,8", "concurrent clients, comma-separated: one measurement each")
		fs.StringVar(&cpuProf, "cpuprofile", "", "write a CPU profile of each measurement's turns to FILE-c<clients> (FILE-c<clients>-2 for the second measurement of a client count; go tool pprof)")
		fs.IntVar(&turns, "turns", 1000, "measured turns per measurement")
		fs.IntVar(&conc, "concurrency", 8, "injector handlers in flight")
		fs.BoolVar(&asJSON, "json", false, "print one JSON object per measurement")
		fs.BoolVar(&lines, "lines", false, "also print how many lines each corpus question gets (Markdown table)")
	})
	if err != nil {
		return err
	}
	if projects < 1 {
		return fmt.Errorf("%w: -projects %d: want 1 or more", errUsage, projects)
	}
	if anywhere < 0 {
		return fmt.Errorf("%w: -anywhere-every %d: want 0 or more", errUsage, anywhere)
	}
	var cs []int
	for _, f := range strings.Split(clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("%w: -clients %q: want positive integers", errUsage, clients)
		}
		cs = append(cs, n)
	}
	dir, err := os.MkdirTemp("", "engram-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	var (
		st        injectbench.Store
		serverCPU func(context.Context) (time.Duration, error)
	)
	switch storeKind {
	case "sqlite":
		path := filepath.Join(dir, "engram.db")
		var opts []sqlite.Option
		if dbPath != "" {
			// A kept fixture: no vector graph is built (the injector's
			// ranking with the hashing embedder reads no vector), so that
			// a reopened million does not spend the measurement building
			// one.
			path, opts = dbPath, append(opts, sqlite.WithBulkWrites())
		}
		start := time.Now()
		s, err := sqlite.Open(ctx, path, opts...)
		if err != nil {
			return err
		}
		defer s.Close()
		if dbPath != "" {
			fmt.Fprintf(os.Stderr, "opened %s in %.1fs\n", path, time.Since(start).Seconds())
		}
		st = s
	case "redis":
		url := os.Getenv("ENGRAM_REDIS_URL")
		if url == "" {
			return fmt.Errorf("%w: -store redis needs ENGRAM_REDIS_URL", errUsage)
		}
		s, client, cleanup, err := benchRedis(url, namespace)
		if err != nil {
			return err
		}
		defer cleanup()
		st = s
		serverCPU = func(ctx context.Context) (time.Duration, error) { return redisCPU(ctx, client) }
	default:
		return fmt.Errorf("%w: -store %q: sqlite or redis", errUsage, storeKind)
	}
	seeded := false
	if dbPath != "" || namespace != "" {
		if seeded, err = st.HasLiveMemory(ctx, memory.ProjectRef{Project: injectbench.Project}); err != nil {
			return err
		}
	}
	progress := io.Writer(os.Stderr)
	syncAlways, syncEvery := cfg.NATS.SyncPolicy()
	results, lineCounts, err := injectbench.Run(ctx, st, injectbench.Options{
		StoreName: storeKind, Memories: memories, Projects: projects, AnywhereEvery: anywhere, NovelWords: novel, Seeded: seeded, Clients: cs, Turns: turns, Warmup: min(100, turns),
		Dir: dir, Concurrency: conc, Progress: progress, ServerCPU: serverCPU, CPUProfile: cpuProf,
		// The embedded server syncs as engram serve's does by default.
		NATSSyncAlways: syncAlways, NATSSyncInterval: syncEvery,
	})
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range results {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
	} else {
		out(stdout, "%-7s %9s %8s %7s %6s %8s %8s %10s %12s %9s %9s %8s %8s\n", "store", "memories", "projects", "clients", "turns", "p50_ms", "p99_ms", "turns/s", "tokens(med)", "cpu/turn", "srv/turn", "rss_mb", "heap_mb")
		for _, r := range results {
			out(stdout, "%-7s %9d %8d %7d %6d %8.2f %8.2f %10.0f %12d %9.2f %9.2f %8.0f %8.0f\n", r.Store, r.Memories, r.Projects, r.Clients, r.Turns, r.P50ms, r.P99ms, r.TurnsPerSec, r.BlockTokensMedian, r.CPUmsPerTurn, r.ServerCPUmsPerTurn, r.RSSMB, r.HeapMB)
		}
	}
	if lines {
		out(stdout, "\n%s", injectbench.Table(lineCounts))
	}
	return nil
}

// benchRedis opens a Redis store in a fresh namespace (or in ns, kept) and
// returns its client and a cleanup that deletes a fresh namespace.
func benchRedis(url, ns string) (*redisstore.Store, *goredis.Client, func(), error) {
	opts, err := goredis.ParseURL(url)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("ENGRAM_REDIS_URL: %w", err)
	}
	client := goredis.NewClient(opts)
	keep := ns != ""
	if !keep {
		ns = "bench-" + memory.NewID()
	}
	s, err := redisstore.New(client, redisstore.WithNamespace(ns))
	if err != nil {
		_ = client.Close()
		return nil, nil, nil, err
	}
	cleanup := func() {
		if !keep {
			_ = redisstore.DeleteNamespace(context.Background(), client, ns)
		}
		_ = s.Close()
		_ = client.Close()
	}
	// As app.OpenStore does (the global tag's hints are marked complete).
	if err := s.EnsureContradictionHints(context.Background()); err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	if _, err := s.EnsureLexicalIndex(context.Background()); err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	if _, err := s.EnsureConversationIndex(context.Background()); err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	// The bench's namespace is its own: no replica of an earlier version
	// writes it (a kept one seeded by an earlier binary is brought up to
	// date here, once: this version's writes keep what the format promises).
	if f, err := s.Format(context.Background()); err != nil {
		cleanup()
		return nil, nil, nil, err
	} else if f < redisstore.FormatLatest {
		if _, err := s.FinishUpgrade(context.Background()); err != nil {
			cleanup()
			return nil, nil, nil, err
		}
	}
	return s, client, cleanup, nil
}

// redisCPU is the CPU time the Redis server has used (INFO cpu: user +
// system, every thread of the process); other clients of the server count
// too.
func redisCPU(ctx context.Context, c *goredis.Client) (time.Duration, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("redis INFO cpu: %w", err)
	}
	return parseRedisCPU(info)
}

// parseRedisCPU sums used_cpu_user and used_cpu_sys (seconds) of an INFO
// cpu reply.
func parseRedisCPU(info string) (time.Duration, error) {
	var total float64
	found := 0
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_user" && k != "used_cpu_sys") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("redis INFO cpu: %s: %w", k, err)
		}
		total += f
		found++
	}
	if found != 2 {
		return 0, errors.New("redis INFO cpu: used_cpu_user or used_cpu_sys missing")
	}
	return time.Duration(total * float64(time.Second)), nil
}
