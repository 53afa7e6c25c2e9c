package app_test

import (
	"context"
	"encoding/json"
	"github.com/engram-memory/engram/pkg/memory"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

func testConfig(t *testing.T) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.NATS.StoreKeyDir = filepath.Join(t.TempDir(), "keys")
	cfg.NATS.Listen = "127.0.0.1:-1"
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.Log.Format = config.LogJSON
	cfg.Log.Level = "error"
	cfg.Work.ShutdownTimeout = 10 * time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestProcessRunsRegisteredWorkers starts a whole embedded process with
// fx (NATS, topology, store, HTTP, idle detector) and one worker registered
// with ProvideWorker, drives it with the events client and stops it.
func TestProcessRunsRegisteredWorkers(t *testing.T) {
	cfg := testConfig(t)
	var handled atomic.Int64
	worker := app.ProvideWorker(func(c config.Config, l *zap.Logger) app.Worker {
		return app.Worker{Role: events.ConsumerCompactor, Handler: func(_ context.Context, ev events.Envelope) error {
			if _, err := events.PayloadAs[events.TokensReported](ev); err != nil {
				return err
			}
			handled.Add(1)
			return nil
		}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := app.Start(ctx, cfg, true, "test", worker)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = p.Stop(context.Background())
		}
	}()
	if p.Bus.Embedded == nil || !strings.HasPrefix(p.Bus.URL, "nats://127.0.0.1:") {
		t.Fatalf("bus %+v", p.Bus)
	}
	// The embedded server syncs its streams every ENGRAM_NATS_SYNC (1s),
	// not every two minutes (nats-server's default).
	if js := p.Bus.Embedded.NATS().JetStreamConfig(); js == nil || js.SyncInterval != time.Second || js.SyncAlways {
		t.Fatalf("embedded JetStream config %+v, want a sync every second", js)
	}
	if got := p.Workers.Roles(); len(got) != 1 || got[0] != events.ConsumerCompactor {
		t.Fatalf("workers %v", got)
	}
	cl, err := events.NewClient(p.Bus.Conn)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := cl.PublishTokensReported(ctx, events.Ref{ProjectID: "p", SessionID: "s"}, events.TokensReported{InputTokens: 1}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for handled.Load() < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("handled %d of 5", handled.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Get(p.HTTP.URL() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var rep health.Report
	err = json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/readyz %d %v", resp.StatusCode, err)
	}
	names := map[string]bool{}
	for _, c := range rep.Checks {
		names[c.Name] = true
	}
	if !names["nats"] || !names["worker:compactor"] {
		t.Errorf("readiness checks %+v", rep.Checks)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if _, err := os.Stat(filepath.Join(cfg.NATSStoreDir(), "jetstream")); err != nil {
		t.Errorf("no JetStream store in the data dir: %v", err)
	}
}

func TestStartReportsConfigurationOfWorkers(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	for _, s := range []*events.StreamConfig{&topo.In, &topo.Out, &topo.DLQ} {
		s.MaxBytes = 8 << 20
	}
	js := eventstest.Setup(t, nc, topo)
	cfg := testConfig(t)
	ok := func(context.Context, events.Envelope) error { return nil }
	ctx := context.Background()

	_, err := app.StartWorkers(ctx, js, topo, cfg, []app.Worker{
		{Role: events.ConsumerCompactor, Handler: ok},
		{Role: events.ConsumerCompactor, Handler: ok},
		{Role: "no-such-consumer", Handler: ok},
		{Role: events.ConsumerInjector},
		{Role: events.ConsumerCompactor, Consumer: events.ConsumerTranscript, Handler: ok},
	}, nil, zap.NewNop())
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"registered twice", "no consumer of that name", "role and handler are required",
		`worker "transcript": the topology's consumer is run by role "extractor", not "compactor"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}

	cfg.Work.Workers = []string{"extractor"}
	if _, err := app.StartWorkers(ctx, js, topo, cfg, []app.Worker{{Role: events.ConsumerCompactor, Handler: ok}}, nil, zap.NewNop()); err == nil ||
		!strings.Contains(err.Error(), `"extractor", which is not a registered worker`) {
		t.Fatalf("ENGRAM_WORKERS naming a missing worker: %v", err)
	}

	// Selection: only the compactor of two registered workers runs.
	cfg.Work.Workers = []string{"compactor"}
	w, err := app.StartWorkers(ctx, js, topo, cfg, []app.Worker{
		{Role: events.ConsumerCompactor, Handler: ok}, {Role: events.ConsumerExtractor, Handler: ok}}, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Roles(); len(got) != 1 || got[0] != "compactor" {
		t.Errorf("roles %v", got)
	}
	for _, c := range w.Checks() {
		if err := c.Run(ctx); err != nil {
			t.Errorf("check %s: %v", c.Name, err)
		}
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range w.Checks() {
		if err := c.Run(ctx); err == nil {
			t.Errorf("check %s passes after Stop", c.Name)
		}
	}

	// A role of two consumers (the extractor's): ENGRAM_WORKERS names the
	// role, both run, each with its own check.
	cfg.Work.Workers = []string{"extractor"}
	w, err = app.StartWorkers(ctx, js, topo, cfg, []app.Worker{
		{Role: events.ConsumerCompactor, Handler: ok}, {Role: events.ConsumerExtractor, Handler: ok},
		{Role: events.ConsumerExtractor, Consumer: events.ConsumerTranscript, Handler: ok}}, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range w.Checks() {
		names = append(names, c.Name)
	}
	if got := strings.Join(w.Roles(), ","); got != "extractor,transcript" || strings.Join(names, ",") != "worker:extractor,worker:transcript" {
		t.Errorf("running %s, checks %v", got, names)
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestStartFailsCleanlyWhenTheHTTPPortIsTaken(t *testing.T) {
	cfg := testConfig(t)
	first, err := app.Start(context.Background(), cfg, true, "first")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop(context.Background())
	cfg2 := testConfig(t)
	cfg2.HTTP.Addr = strings.TrimPrefix(first.HTTP.URL(), "http://")
	_, err = app.Start(context.Background(), cfg2, true, "second")
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("second process on a taken HTTP port: %v", err)
	}
}

func TestOpenStoreErrors(t *testing.T) {
	cfg := testConfig(t)
	cfg.Store.Kind = "postgres"
	if _, err := app.OpenStore(context.Background(), cfg); err == nil {
		t.Error("unknown store kind opened")
	}
	// The data dir is a file: SQLite cannot be created there.
	cfg = testConfig(t)
	cfg.Store.SQLitePath = filepath.Join(t.TempDir(), "file", "engram.db")
	if err := os.WriteFile(filepath.Dir(cfg.Store.SQLitePath), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := app.OpenStore(context.Background(), cfg); err == nil {
		t.Error("SQLite under a file opened")
	}
	// SQLite in a fresh dir works and is reachable.
	cfg = testConfig(t)
	s, err := app.OpenStore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := app.StoreCheck(s).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// redisEnv returns the variable name (a Redis address that
// scripts/redis8.sh env exports); unset, the test skips, or fails in CI.
func redisEnv(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") != "" {
			t.Fatal(name + " is not set (eval \"$(bash scripts/redis8.sh env)\")")
		}
		t.Skip("no Redis 8: run eval \"$(bash scripts/redis8.sh env)\" (" + name + ")")
	}
	return v
}

func TestRedisStore(t *testing.T) {
	url := redisEnv(t, "ENGRAM_TEST_REDIS_URL")
	cfg := testConfig(t)
	cfg.Store.Kind = config.StoreRedis
	cfg.Store.RedisURL = url
	s, err := app.OpenStore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := app.StoreCheck(s).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg.Store.RedisURL = "redis://127.0.0.1:1/0"
	if _, err := app.OpenStore(context.Background(), cfg); err == nil {
		t.Error("unreachable Redis opened")
	}
}

// TestRedisClusterStore opens the store on the comma-separated node list of
// a real three-node Redis 8 cluster, the form ENGRAM_REDIS_URL takes for
// Redis Cluster (bare host:port and redis:// elements mixed), and writes and
// reads a memory through it.
func TestRedisClusterStore(t *testing.T) {
	nodes := redisEnv(t, "ENGRAM_TEST_REDIS_CLUSTER")
	addrs := strings.Split(nodes, ",")
	addrs[0] = "redis://" + addrs[0]
	cfg := testConfig(t)
	cfg.Store.Kind = config.StoreRedis
	cfg.Store.RedisURL = strings.Join(addrs, ", ")
	if err := cfg.Validate(); err != nil {
		t.Fatalf("cluster URL list rejected: %v", err)
	}
	ctx := context.Background()
	s, err := app.OpenStore(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	project := "cluster-" + memory.NewID()
	res, err := s.Upsert(ctx, memory.Node{Subkind: memory.Decision, ProjectID: project, Label: "through the cluster"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, res.Node.ID); err != nil || got.Label != "through the cluster" {
		t.Fatalf("get through the cluster: %+v %v", got, err)
	}
	if err := s.Archive(ctx, res.Node.ID); err != nil {
		t.Fatal(err)
	}
}

func TestNewLogger(t *testing.T) {
	for _, f := range []string{config.LogJSON, config.LogConsole, config.LogAuto} {
		l, err := app.NewLogger(config.Log{Format: f, Level: "debug"})
		if err != nil || l == nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := app.NewLogger(config.Log{Format: config.LogJSON, Level: "loud"}); err == nil {
		t.Error("bad level accepted")
	}
}

func TestGates(t *testing.T) {
	cfg := testConfig(t)
	s, err := app.OpenStore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := app.StoreGate(s)
	if err := g.Ready(context.Background()); err != nil {
		t.Fatalf("open store: %v", err)
	}
	_ = s.Close()
	if err := g.Ready(context.Background()); err == nil {
		t.Error("gate of a closed store holds")
	}
	cfg.LLM.Host = "http://127.0.0.1:1" // nothing listens
	c, _, err := app.NewLLM(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.ModelGate(c).Ready(ctx); err == nil {
		t.Error("model gate holds without Ollama")
	}
}
