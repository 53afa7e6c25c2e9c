package chaos_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	memredis "github.com/engram-memory/engram/pkg/memory/redis"
)

// Settings the suite gives every Engram process (see the package doc).
const (
	idleQuiet        = 8 * time.Second // ENGRAM_IDLE_QUIET
	compactThreshold = 1500            // ENGRAM_COMPACT_THRESHOLD, tokens
	ackWait          = 8 * time.Second // ENGRAM_ACK_WAIT: a killed worker's events come back after this
)

// cluster is every process of the deployment: nats-server (one, or a
// JetStream cluster of three: clustered), a private redis-server (one, or a
// Redis Cluster of three primaries each with a replica), the scripted model
// server, the four workers (injector and extractor twice) and the idle
// detector.
type cluster struct {
	t         *testing.T
	root      string // module root
	dir       string // work dir
	bin       string // built binaries
	clustered bool   // NATS and Redis as clusters (clustered_test.go)

	natsNodes         []*natsNode
	redisNodes        []*redisNode
	natsURL, redisURL string // comma-separated lists when clustered
	modelURL, control string

	model   *proc
	workers []*proc // what the chaos loop kills: workers and the idle detector
	byName  map[string]*proc

	// passwords are the NATS password of every role (natsauth.Roles): the
	// server runs with the accounts `engram nats-config` generates, and
	// every client connects as its role's user.
	passwords map[string]string

	nc     *nats.Conn          // the platform's connection (user platform): the driver
	client *events.Client      // the platform's client on nc
	admin  *nats.Conn          // the checks' connection (user admin): streams, consumers, the DLQ
	js     jetstream.JetStream // on admin
}

// natsNode is one nats-server: its process, server name and ports (the
// cluster and monitoring ports only when clustered).
type natsNode struct {
	p                           *proc
	name                        string
	port, clusterPort, httpPort int
}

// redisNode is one redis-server of the deployment.
type redisNode struct {
	p    *proc
	port int
}

func (n *redisNode) addr() string { return fmt.Sprintf("127.0.0.1:%d", n.port) }

// newCluster prepares the work dir of a run named name: ENGRAM_CHAOS_DIR/name
// when ENGRAM_CHAOS_DIR is set (kept), else a temporary one.
func newCluster(t *testing.T, name string, clustered bool) *cluster {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("ENGRAM_CHAOS_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else {
		dir = filepath.Join(dir, name)
	}
	c := &cluster{t: t, root: root, dir: dir, clustered: clustered, byName: map[string]*proc{}, passwords: map[string]string{}}
	for _, role := range natsauth.Roles() {
		b := make([]byte, 24)
		_, _ = rand.Read(b)
		c.passwords[role] = hex.EncodeToString(b)
	}
	for _, d := range []string{c.path("logs"), c.path("nats"), c.path("redis")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func (c *cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.dir}, elem...)...)
}

// The binaries are built once per test binary, for every run of it
// (TestChaos and TestChaosCluster): into ENGRAM_CHAOS_DIR/bin when it is
// set, else into a temporary dir TestMain removes.
var built struct {
	once sync.Once
	dir  string
	temp bool
	err  error
}

// build compiles the binaries (once): the nats-server of go.mod's version,
// engram, the four workers and the model server.
func (c *cluster) build() {
	c.t.Helper()
	built.once.Do(func() {
		t0 := time.Now()
		if d := os.Getenv("ENGRAM_CHAOS_DIR"); d != "" {
			built.dir = filepath.Join(d, "bin")
			built.err = os.MkdirAll(built.dir, 0o755)
		} else {
			built.dir, built.err = os.MkdirTemp("", "engram-chaos-bin-")
			built.temp = built.err == nil
		}
		if built.err != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", built.dir+string(os.PathSeparator),
			"github.com/nats-io/nats-server/v2", "./cmd/engram", "./cmd/injector", "./cmd/extractor",
			"./cmd/consolidator", "./cmd/compactor", "./internal/chaos/cmd/chaosmodel")
		cmd.Dir = c.root
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("build: %w\n%s", err, out)
			return
		}
		c.t.Logf("built the binaries in %v", time.Since(t0).Round(time.Millisecond))
	})
	if built.err != nil {
		c.t.Fatal(built.err)
	}
	c.bin = built.dir
}

func (c *cluster) newProc(name string, env []string, argv ...string) *proc {
	p := &proc{name: name, argv: argv, env: env, dir: c.path("logs")}
	c.byName[name] = p
	c.t.Cleanup(func() { p.stop(5 * time.Second) })
	return p
}

// startInfra starts NATS, Redis and the model server.
func (c *cluster) startInfra(ctx context.Context) {
	c.t.Helper()
	c.writeAccounts()
	if c.clustered {
		c.startNATSCluster(ctx)
		c.startRedisCluster(ctx)
	} else {
		n := &natsNode{name: "nats", port: freePort(c.t)}
		c.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", n.port)
		// JetStream with its file store in the work dir, and the role
		// users of a real deployment (natsConf).
		n.p = c.newProc("nats", c.natsServerEnv(), filepath.Join(c.bin, "nats-server"), "-c", c.natsConf(n.port))
		c.natsNodes = []*natsNode{n}
		// A private Redis 8 with AOF (fsync every second; a process kill
		// loses nothing the server acknowledged, since the AOF is written
		// before the reply). Never the shared test servers.
		r := &redisNode{port: freePort(c.t)}
		c.redisURL = fmt.Sprintf("redis://127.0.0.1:%d/0", r.port)
		r.p = c.newProc("redis", nil, c.redisArgv(r.port, c.path("redis"))...)
		c.redisNodes = []*redisNode{r}
		c.startNATS(ctx, n)
		c.startRedis(ctx, r)
	}

	c.model = c.newProc("model", nil, filepath.Join(c.bin, "chaosmodel"))
	c.model.start(c.t)
	deadline := time.Now().Add(30 * time.Second)
	for c.modelURL == "" && time.Now().Before(deadline) {
		_ = c.model.grep(func(line string) {
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, "model="); ok {
					c.modelURL = v
				}
				if v, ok := strings.CutPrefix(f, "control="); ok {
					c.control = v
				}
			}
		})
		time.Sleep(50 * time.Millisecond)
	}
	if c.modelURL == "" {
		c.t.Fatalf("model server did not start:\n%s", c.model.tail(20))
	}
}

// redisArgv runs a private Redis 8 (scripts/redis8.sh server) on port with
// its data in dir: AOF with fsync every second, no RDB snapshots.
func (c *cluster) redisArgv(port int, dir string, extra ...string) []string {
	return append([]string{"bash", filepath.Join(c.root, "scripts/redis8.sh"), "server",
		"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", dir,
		"--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--protected-mode", "no"}, extra...)
}

// natsServerEnv is the environment of a nats-server: the password of
// every role (accounts.conf reads them).
func (c *cluster) natsServerEnv() []string {
	var env []string
	for _, role := range natsauth.Roles() {
		env = append(env, natsauth.PasswordEnv(role)+"="+c.passwords[role])
	}
	return env
}

// writeAccounts writes the accounts.conf that `engram nats-config` prints
// (one user per role, least privilege, passwords from the server's
// environment, ENGRAM_<ROLE>_PASSWORD) into the work dir, beside the
// servers' configurations that include it.
func (c *cluster) writeAccounts() {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(c.bin, "engram"), "nats-config")
	cmd.Env = append(os.Environ(), "ENGRAM_DATA="+c.path("data", "nats-config"))
	accounts, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("engram nats-config: %v", err)
	}
	if err := os.WriteFile(c.path("accounts.conf"), accounts, 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// natsConf writes the single server's configuration like
// deploy/nats/nats.conf: JetStream on a file store in the work dir, and
// `include ./accounts.conf` (writeAccounts). It returns the configuration's
// path.
func (c *cluster) natsConf(port int) string {
	c.t.Helper()
	conf := fmt.Sprintf("host: 127.0.0.1\nport: %d\njetstream {\n  store_dir: %q\n}\ninclude ./accounts.conf\n", port, c.path("nats"))
	if err := os.WriteFile(c.path("nats.conf"), []byte(conf), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return c.path("nats.conf")
}

// role is the NATS role of an Engram process of the suite, from its name
// (injector-0: injector; idle-0: idle; setup: setup).
func role(name string) string {
	r, _, _ := strings.Cut(name, "-")
	if !natsauth.ValidRole(r) {
		panic("chaos: no NATS role for process " + name)
	}
	return r
}

// startNATS starts a nats-server and waits until it accepts clients.
func (c *cluster) startNATS(ctx context.Context, n *natsNode) {
	c.t.Helper()
	n.p.start(c.t)
	if err := waitTCP(ctx, fmt.Sprintf("127.0.0.1:%d", n.port), 30*time.Second); err != nil {
		c.t.Fatalf("%s: %v\n%s", n.p.name, err, n.p.tail(20))
	}
}

// startRedis starts a redis-server and waits until it accepts clients.
func (c *cluster) startRedis(ctx context.Context, n *redisNode) {
	c.t.Helper()
	n.p.start(c.t)
	if err := waitTCP(ctx, n.addr(), 60*time.Second); err != nil {
		c.t.Fatalf("%s: %v\n%s", n.p.name, err, n.p.tail(20))
	}
}

// env is the configuration of every Engram process.
func (c *cluster) env(name string) []string {
	env := []string{
		"ENGRAM_NATS_URL=" + c.natsURL,
		"ENGRAM_NATS_USER=" + role(name),
		"ENGRAM_NATS_PASSWORD=" + c.passwords[role(name)],
		"ENGRAM_STORE=redis",
		"ENGRAM_REDIS_URL=" + c.redisURL,
		"ENGRAM_OLLAMA_HOST=" + c.modelURL,
		"ENGRAM_CHAT_MODEL=" + llmtest.ChatModel,
		"ENGRAM_DATA=" + c.path("data", name),
		"ENGRAM_HTTP_ADDR=127.0.0.1:0",
		"ENGRAM_LOG_FORMAT=json",
		"ENGRAM_LOG_LEVEL=info",
		"ENGRAM_ACK_WAIT=" + ackWait.String(),
		"ENGRAM_IDLE_QUIET=" + idleQuiet.String(),
		"ENGRAM_IDLE_SWEEP=1s",
		fmt.Sprintf("ENGRAM_COMPACT_THRESHOLD=%d", compactThreshold),
		"ENGRAM_SHUTDOWN_TIMEOUT=5s",
	}
	if c.clustered {
		// Every stream, consumer and the activity bucket on every node.
		env = append(env, fmt.Sprintf("ENGRAM_STREAM_REPLICAS=%d", len(c.natsNodes)))
	}
	return env
}

// setup runs `engram setup` (streams and consumers) and `engram upgrade
// finish` (the store's format) and starts the workers
// and the idle detector (`engram serve -workers none` on the external bus,
// which runs no worker, only the detector).
func (c *cluster) setup(ctx context.Context) {
	c.t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "engram"), "setup")
	cmd.Env = append(os.Environ(), c.env("setup")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("engram setup: %v\n%s", err, out)
	}
	// The store at the latest format, as the Helm chart's install hook
	// leaves a new deployment (the candidate loads read the heads' copies).
	cmd = exec.CommandContext(ctx, filepath.Join(c.bin, "engram"), "upgrade", "finish")
	cmd.Env = append(os.Environ(), c.env("setup")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("engram upgrade finish: %v\n%s", err, out)
	}
	for _, w := range []struct {
		name, bin string
		args      []string
	}{
		{"injector-0", "injector", nil}, {"injector-1", "injector", nil},
		{"extractor-0", "extractor", nil}, {"extractor-1", "extractor", nil},
		{"consolidator-0", "consolidator", nil}, {"compactor-0", "compactor", nil},
		{"idle-0", "engram", []string{"serve", "-workers", "none", "-idle=true"}},
	} {
		p := c.newProc(w.name, c.env(w.name), append([]string{filepath.Join(c.bin, w.bin)}, w.args...)...)
		p.start(c.t)
		c.workers = append(c.workers, p)
	}
	for _, p := range c.workers {
		c.waitReady(ctx, p)
	}
}

// waitReady waits for the process's "ready" log line (of its latest start).
func (c *cluster) waitReady(ctx context.Context, p *proc) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(p.tail(1000), `"engram ready"`) {
			return
		}
		if p.exited() {
			c.t.Fatalf("%s exited:\n%s", p.name, p.tail(30))
		}
		select {
		case <-ctx.Done():
			c.t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	c.t.Fatalf("%s not ready after 60s:\n%s", p.name, p.tail(30))
}

// connect opens the platform's connection and client (user platform: it
// may publish input events and receive its replies on _INBOX.>, nothing
// else) and the checks' connection (user admin).
func (c *cluster) connect() {
	c.t.Helper()
	dial := func(role string) *nats.Conn {
		nc, err := nats.Connect(c.natsURL, nats.Name("chaos-"+role), nats.UserInfo(role, c.passwords[role]),
			nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond), nats.Timeout(5*time.Second))
		if err != nil {
			c.t.Fatalf("connect as %s: %v", role, err)
		}
		c.t.Cleanup(nc.Close)
		return nc
	}
	c.nc, c.admin = dial(natsauth.RolePlatform), dial(natsauth.RoleAdmin)
	client, err := events.NewClient(c.nc)
	if err != nil {
		c.t.Fatal(err)
	}
	js, err := jetstream.New(c.admin)
	if err != nil {
		c.t.Fatal(err)
	}
	c.client, c.js = client, js
}

// modelControl switches the model server: "down", "unavailable" or "up".
func (c *cluster) modelControl(what string) {
	c.t.Helper()
	resp, err := http.Post(c.control+"/"+what, "text/plain", nil)
	if err != nil {
		c.t.Fatalf("model %s: %v", what, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("model %s: %s", what, resp.Status)
	}
}

func (c *cluster) modelStats() map[string]int {
	c.t.Helper()
	resp, err := http.Get(c.control + "/stats")
	if err != nil {
		c.t.Fatalf("model stats: %v", err)
	}
	defer resp.Body.Close()
	var m map[string]int
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		c.t.Fatalf("model stats: %v", err)
	}
	return m
}

// store opens the deployment's Redis store (for the checks).
func (c *cluster) store() *memredis.Store {
	c.t.Helper()
	var client goredis.UniversalClient
	if c.clustered {
		co := &goredis.ClusterOptions{}
		for _, n := range c.redisNodes {
			co.Addrs = append(co.Addrs, n.addr())
		}
		client = goredis.NewClusterClient(co)
	} else {
		opts, err := goredis.ParseURL(c.redisURL)
		if err != nil {
			c.t.Fatal(err)
		}
		client = goredis.NewClient(opts)
	}
	st, err := memredis.New(client, memredis.WithCloseClient())
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = st.Close() })
	return st
}

// drained reports whether every consumer of ENGRAM_IN has nothing pending
// nor unacknowledged, with the per-consumer figures.
func (c *cluster) drained(ctx context.Context) (bool, string, error) {
	s, err := c.js.Stream(ctx, events.StreamIn)
	if err != nil {
		return false, "", err
	}
	lister := s.ListConsumers(ctx)
	ok := true
	var b strings.Builder
	for ci := range lister.Info() {
		fmt.Fprintf(&b, "%s pending=%d ack_pending=%d; ", ci.Name, ci.NumPending, ci.NumAckPending)
		if ci.NumPending > 0 || ci.NumAckPending > 0 {
			ok = false
		}
	}
	if err := lister.Err(); err != nil {
		return false, b.String(), err
	}
	return ok, b.String(), nil
}

// waitDrained waits until drained holds for `stable` in a row.
func (c *cluster) waitDrained(ctx context.Context, stable, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	var since time.Time
	var last string
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ok, s, err := c.drained(cctx)
		cancel()
		last = s
		if err == nil && ok {
			if since.IsZero() {
				since = time.Now()
			}
			if time.Since(since) >= stable {
				return last, nil
			}
		} else {
			since = time.Time{}
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return last, fmt.Errorf("not drained after %v: %s", limit, last)
}
