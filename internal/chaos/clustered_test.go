package chaos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/internal/idle"
	"github.com/engram-memory/engram/pkg/events"
)

// The clustered deployment (TestChaosCluster): what a Kubernetes
// deployment runs, on one machine.
const (
	natsClusterSize = 3 // JetStream cluster; every stream, consumer and the KV bucket with this many replicas
	redisPrimaries  = 3 // Redis Cluster primaries, each with one replica
	// redisNodeTimeout is the Redis Cluster's cluster-node-timeout: a
	// primary unreachable that long is marked failed and its replica
	// promoted (redis8.sh's cluster uses the same).
	redisNodeTimeout = 5 * time.Second
)

// startNATSCluster starts three nats-servers routed into one JetStream
// cluster (server names n0..n2, file store each, the role users of
// accounts.conf, monitoring on a port of its own for /healthz and /jsz),
// and waits until every node is healthy (JetStream current with its meta
// leader).
func (c *cluster) startNATSCluster(ctx context.Context) {
	c.t.Helper()
	var urls, routes []string
	for i := range natsClusterSize {
		n := &natsNode{name: fmt.Sprintf("n%d", i), port: freePort(c.t), clusterPort: freePort(c.t), httpPort: freePort(c.t)}
		c.natsNodes = append(c.natsNodes, n)
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", n.port))
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", n.clusterPort))
	}
	c.natsURL = strings.Join(urls, ",")
	for i, n := range c.natsNodes {
		conf := fmt.Sprintf(`server_name: %s
host: 127.0.0.1
port: %d
http: "127.0.0.1:%d"
jetstream {
  store_dir: %q
}
cluster {
  name: chaos
  host: 127.0.0.1
  port: %d
  routes: [%s]
  connect_retries: 120
}
include ./accounts.conf
`, n.name, n.port, n.httpPort, c.path("nats", n.name), n.clusterPort, strings.Join(routes, ", "))
		path := c.path(fmt.Sprintf("nats-%d.conf", i))
		if err := writeFile(path, conf); err != nil {
			c.t.Fatal(err)
		}
		n.p = c.newProc(fmt.Sprintf("nats-%d", i), c.natsServerEnv(), filepath.Join(c.bin, "nats-server"), "-c", path)
	}
	// All three at once: JetStream needs a quorum to elect its meta leader.
	for _, n := range c.natsNodes {
		n.p.start(c.t)
	}
	for _, n := range c.natsNodes {
		if err := waitTCP(ctx, fmt.Sprintf("127.0.0.1:%d", n.port), 30*time.Second); err != nil {
			c.t.Fatalf("%s: %v\n%s", n.p.name, err, n.p.tail(20))
		}
	}
	for _, n := range c.natsNodes {
		if err := c.natsHealthy(ctx, n, 2*time.Minute); err != nil {
			c.t.Fatalf("%s: %v\n%s", n.p.name, err, n.p.tail(20))
		}
	}
}

// natsHealthy waits until the node's /healthz answers 200: JetStream
// enabled and current with the meta leader, every stream and consumer
// replica on it current with its leader.
func (c *cluster) natsHealthy(ctx context.Context, n *natsNode, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last := ""
	for time.Now().Before(deadline) {
		status, body, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", n.httpPort))
		if err == nil && status == http.StatusOK {
			return nil
		}
		last = fmt.Sprintf("%d %s %v", status, strings.TrimSpace(body), err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("not healthy after %v: %s", limit, last)
}

// metaLeader is the JetStream meta leader's server name, as a live node's
// /jsz says.
func (c *cluster) metaLeader(ctx context.Context, except string) (string, error) {
	var errs []error
	for _, n := range c.natsNodes {
		if n.name == except || n.p.exited() {
			continue
		}
		status, body, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/jsz", n.httpPort))
		if err != nil || status != http.StatusOK {
			errs = append(errs, fmt.Errorf("%s /jsz: %d %v", n.name, status, err))
			continue
		}
		var jsz struct {
			Meta *struct {
				Leader string `json:"leader"`
			} `json:"meta_cluster"`
		}
		if err := json.Unmarshal([]byte(body), &jsz); err != nil {
			errs = append(errs, err)
			continue
		}
		if jsz.Meta != nil {
			return jsz.Meta.Leader, nil
		}
	}
	return "", errors.Join(append(errs, errors.New("no meta leader known"))...)
}

// natsTargets are what the NATS kills aim at, in turn: the leader of the
// input stream (the first kill, always), of the injector's consumer (the
// replies platforms wait for), of the idle detector's bucket, and the
// JetStream meta leader.
var natsTargets = []string{"stream " + events.StreamIn, "consumer " + events.ConsumerInjector, "stream KV_" + idle.DefaultBucket, "meta"}

// leaderOf returns the server name that leads what ("stream NAME",
// "consumer NAME" of ENGRAM_IN, or "meta"); "" while there is none.
func (c *cluster) leaderOf(ctx context.Context, what string) (string, error) {
	kind, name, _ := strings.Cut(what, " ")
	switch kind {
	case "meta":
		return c.metaLeader(ctx, "")
	case "stream":
		s, err := c.js.Stream(ctx, name)
		if err != nil {
			return "", err
		}
		if ci := s.CachedInfo().Cluster; ci != nil {
			return ci.Leader, nil
		}
		return "", nil
	case "consumer":
		cons, err := c.js.Consumer(ctx, events.StreamIn, name)
		if err != nil {
			return "", err
		}
		if ci := cons.CachedInfo().Cluster; ci != nil {
			return ci.Leader, nil
		}
		return "", nil
	}
	return "", fmt.Errorf("unknown target %q", what)
}

// moveLeader asks the leader of what ("stream NAME") to step down in favour
// of node (a JetStream stepdown with a preferred placement) and waits up to
// 10 s for node to lead it; a failure is reported, not fatal.
func (c *cluster) moveLeader(ctx context.Context, t *recT, what, node string) {
	_, name, _ := strings.Cut(what, " ")
	body, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": node}})
	var last string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		l, err := c.leaderOf(qctx, what)
		if err == nil && l == node {
			cancel()
			return
		}
		if err == nil && l != "" {
			m, err := c.js.Conn().RequestWithContext(qctx, "$JS.API.STREAM.LEADER.STEPDOWN."+name, body)
			switch {
			case err != nil:
				last = err.Error()
			default:
				last = string(m.Data)
			}
		}
		cancel()
	}
	t.Errorf("%s: %s did not become its leader in 10 s (last stepdown answer: %s)", what, node, last)
}

// leaderships lists what each server leads: the meta group, the streams
// (and the KV bucket's) and the consumers of ENGRAM_IN.
func (c *cluster) leaderships(ctx context.Context) map[string][]string {
	out := map[string][]string{}
	what := []string{"meta", "stream " + events.StreamIn, "stream " + events.StreamOut, "stream " + events.StreamDLQ, "stream KV_" + idle.DefaultBucket}
	if s, err := c.js.Stream(ctx, events.StreamIn); err == nil {
		names := s.ConsumerNames(ctx)
		for n := range names.Name() {
			what = append(what, "consumer "+n)
		}
	}
	for _, w := range what {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		l, err := c.leaderOf(qctx, w)
		cancel()
		if err == nil && l != "" {
			out[l] = append(out[l], w)
		}
	}
	return out
}

// checkReplicas fails the test unless every stream of the topology, the
// activity bucket (the idle detector makes it at its start) and every
// consumer of ENGRAM_IN has natsClusterSize replicas; with current, every
// follower must also be online and current with its leader.
func (c *cluster) checkReplicas(ctx context.Context, t *recT, current bool) {
	t.Helper()
	peersOK := func(ci *jetstream.ClusterInfo) bool {
		if ci == nil || ci.Leader == "" || len(ci.Replicas) != natsClusterSize-1 {
			return false
		}
		for _, p := range ci.Replicas {
			if current && (!p.Current || p.Offline) {
				return false
			}
		}
		return true
	}
	streams := []string{events.StreamIn, events.StreamOut, events.StreamDLQ, "KV_" + idle.DefaultBucket}
	for _, name := range streams {
		s, err := c.js.Stream(ctx, name)
		if err != nil {
			t.Errorf("stream %s: %v", name, err)
			continue
		}
		info := s.CachedInfo()
		if info.Config.Replicas != natsClusterSize || !peersOK(info.Cluster) {
			t.Errorf("stream %s: %d replicas configured, cluster %s: want %d (current: %v)", name, info.Config.Replicas, clusterString(info.Cluster), natsClusterSize, current)
		}
		if name != events.StreamIn {
			continue
		}
		lister := s.ListConsumers(ctx)
		for ci := range lister.Info() {
			if (ci.Config.Replicas != 0 && ci.Config.Replicas != natsClusterSize) || !peersOK(ci.Cluster) {
				t.Errorf("consumer %s: %d replicas configured, cluster %s: want %d (current: %v)", ci.Name, ci.Config.Replicas, clusterString(ci.Cluster), natsClusterSize, current)
			}
		}
		if err := lister.Err(); err != nil {
			t.Errorf("consumers of %s: %v", name, err)
		}
	}
}

// killNATSCluster kills -9 the node leading natsTargets[k], measures how
// long the target had no leader (polling through the admin connection,
// which moves to a live node), restarts the node once a new leader is
// elected and down has passed, and waits until it is healthy again
// (caught up with every stream and consumer).
func (c *cluster) killNATSCluster(ctx context.Context, t *recT, k int, down time.Duration, ik *infraKill) {
	target := natsTargets[k%len(natsTargets)]
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	leader, err := c.leaderOf(qctx, target)
	cancel()
	var victim *natsNode
	for _, n := range c.natsNodes {
		if n.name == leader {
			victim = n
		}
	}
	if err != nil || victim == nil {
		t.Errorf("NATS kill %d: no leader of %s (%q, %v): killing n%d", k, target, leader, err, k%len(c.natsNodes))
		victim = c.natsNodes[k%len(c.natsNodes)]
	}
	if target == "stream "+events.StreamIn {
		// The victim leads ENGRAM_OUT too: a recorded turn's
		// injection_ready then waits out the failover (CI's run lost two
		// answered turns the one time the two leaders were the same node).
		c.moveLeader(ctx, t, "stream "+events.StreamOut, victim.name)
	}
	qctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	ik.Led = c.leaderships(qctx)[victim.name]
	cancel()
	ik.Node, ik.Target = victim.name, target
	ik.at = time.Now()
	victim.p.kill()
	// The node stays down until a new leader of the target is elected
	// (polled), and down at least.
	elected := time.Duration(0)
	for time.Since(ik.at) < 2*time.Minute {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		l, err := c.leaderOf(qctx, target)
		cancel()
		if err == nil && l != "" && l != victim.name {
			elected = time.Since(ik.at)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if elected == 0 {
		t.Errorf("NATS kill %d: no new leader of %s within 2 min", k, target)
	}
	ik.Failover = elected.Round(10 * time.Millisecond).String()
	if wait := time.Until(ik.at.Add(down)); wait > 0 {
		time.Sleep(wait)
	}
	c.startNATS(ctx, victim)
	ik.restarted = time.Now()
	ik.Down = ik.restarted.Sub(ik.at).Round(10 * time.Millisecond).String()
	if err := c.natsHealthy(ctx, victim, 3*time.Minute); err != nil {
		t.Errorf("NATS kill %d: %s after its restart: %v", k, victim.name, err)
	}
	ik.recovered = time.Now()
	ik.Recovered = ik.recovered.Sub(ik.restarted).Round(10 * time.Millisecond).String()
}

// ---- Redis Cluster ----

// startRedisCluster starts six redis-servers in cluster mode (AOF, fsync
// every second, cluster-node-timeout redisNodeTimeout), makes them a
// cluster of three primaries each with a replica (redis-cli --cluster
// create), and waits until it is whole.
func (c *cluster) startRedisCluster(ctx context.Context) {
	c.t.Helper()
	var addrs []string
	for i := range 2 * redisPrimaries {
		n := &redisNode{port: freePort(c.t)}
		dir := c.path("redis", strconv.Itoa(i))
		if err := mkdir(dir); err != nil {
			c.t.Fatal(err)
		}
		n.p = c.newProc(fmt.Sprintf("redis-%d", i), nil, c.redisArgv(n.port, dir,
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(int(redisNodeTimeout/time.Millisecond)))...)
		c.redisNodes = append(c.redisNodes, n)
		addrs = append(addrs, n.addr())
	}
	c.redisURL = strings.Join(addrs, ",")
	for _, n := range c.redisNodes {
		c.startRedis(ctx, n)
	}
	args := append([]string{filepath.Join(c.root, "scripts/redis8.sh"), "cli", "--cluster", "create"}, addrs...)
	cmd := exec.CommandContext(ctx, "bash", append(args, "--cluster-replicas", "1", "--cluster-yes")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.redisWhole(ctx, 2*time.Minute); err != nil {
		c.t.Fatal(err)
	}
}

// redisClient is a plain client of one node, for the cluster's state.
func redisClient(n *redisNode) *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: n.addr(), DialTimeout: time.Second, ReadTimeout: 2 * time.Second,
		WriteTimeout: 2 * time.Second, MaxRetries: -1, PoolSize: 1})
}

// redisInfo returns the fields of INFO section of one node.
func redisInfo(ctx context.Context, n *redisNode, section string) (map[string]string, error) {
	rc := redisClient(n)
	defer rc.Close()
	var s string
	var err error
	if section == "cluster" {
		s, err = rc.ClusterInfo(ctx).Result()
	} else {
		s, err = rc.Info(ctx, section).Result()
	}
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// redisNodeState is one line of CLUSTER NODES.
type redisNodeState struct {
	id, addr, masterID string
	master, failed     bool
	slots              []string
}

func redisNodes(ctx context.Context, n *redisNode) ([]redisNodeState, error) {
	rc := redisClient(n)
	defer rc.Close()
	s, err := rc.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	var out []redisNodeState
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		flags := strings.Split(f[2], ",")
		out = append(out, redisNodeState{id: f[0], addr: addr, masterID: f[3], master: slices.Contains(flags, "master"),
			failed: slices.Contains(flags, "fail") || slices.Contains(flags, "fail?"), slots: f[8:]})
	}
	return out, nil
}

// redisWhole waits until every node says cluster_state:ok and every
// primary with slots has a replica whose link to it is up.
func (c *cluster) redisWhole(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		if last = c.redisCheckWhole(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("redis cluster not whole after %v: %w", limit, last)
}

func (c *cluster) redisCheckWhole(ctx context.Context) error {
	primaries := 0
	for _, n := range c.redisNodes {
		ci, err := redisInfo(ctx, n, "cluster")
		if err != nil {
			return fmt.Errorf("%s: %w", n.p.name, err)
		}
		if ci["cluster_state"] != "ok" {
			return fmt.Errorf("%s: cluster_state %s", n.p.name, ci["cluster_state"])
		}
		ri, err := redisInfo(ctx, n, "replication")
		if err != nil {
			return fmt.Errorf("%s: %w", n.p.name, err)
		}
		switch ri["role"] {
		case "master":
			if ri["connected_slaves"] != "1" {
				return fmt.Errorf("%s: primary with %s replicas connected", n.p.name, ri["connected_slaves"])
			}
			primaries++
		case "slave":
			if ri["master_link_status"] != "up" {
				return fmt.Errorf("%s: replica, link to its primary %s", n.p.name, ri["master_link_status"])
			}
		}
	}
	if primaries != redisPrimaries {
		return fmt.Errorf("%d primaries, want %d", primaries, redisPrimaries)
	}
	return nil
}

// killRedisPrimary kills -9 a primary holding data (the one with the most
// keys among those not killed before; then the most keys), waits until
// its replica took over its slots and the cluster is ok again (the
// failover, as the cluster sees it), restarts it after down at least (it
// comes back as the replica of its former replica) and waits until the
// cluster is whole again.
func (c *cluster) killRedisPrimary(ctx context.Context, t *recT, k int, down time.Duration, killed map[string]bool, ik *infraKill) {
	type cand struct {
		n     *redisNode
		keys  int64
		slots []string
	}
	var cands []cand
	var states []redisNodeState
	for _, n := range c.redisNodes {
		if states == nil {
			states, _ = redisNodes(ctx, n)
		}
		ri, err := redisInfo(ctx, n, "replication")
		if err != nil || ri["role"] != "master" {
			continue
		}
		rc := redisClient(n)
		keys, _ := rc.DBSize(ctx).Result()
		rc.Close()
		cands = append(cands, cand{n: n, keys: keys})
	}
	for i := range cands {
		for _, s := range states {
			if s.addr == cands[i].n.addr() {
				cands[i].slots = s.slots
			}
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		ki, kj := killed[strings.Join(cands[i].slots, " ")], killed[strings.Join(cands[j].slots, " ")]
		if ki != kj {
			return !ki
		}
		return cands[i].keys > cands[j].keys
	})
	if len(cands) == 0 {
		t.Errorf("Redis kill %d: no primary found", k)
		return
	}
	victim := cands[0]
	killed[strings.Join(victim.slots, " ")] = true
	var replica *redisNode
	for _, s := range states {
		if s.addr != victim.n.addr() {
			continue
		}
		for _, r := range states {
			if r.masterID == s.id {
				for _, n := range c.redisNodes {
					if n.addr() == r.addr {
						replica = n
					}
				}
			}
		}
	}
	ik.Node, ik.Target = victim.n.p.name, fmt.Sprintf("primary of slots %s (%d keys)", strings.Join(victim.slots, " "), victim.keys)
	if replica != nil {
		ik.Led = []string{"replica " + replica.p.name}
	}
	ik.at = time.Now()
	victim.n.p.kill()
	// The failover: the replica is a primary, and says the cluster is ok.
	var took time.Duration
	for replica != nil && time.Since(ik.at) < 2*time.Minute {
		ri, err1 := redisInfo(ctx, replica, "replication")
		ci, err2 := redisInfo(ctx, replica, "cluster")
		if err1 == nil && err2 == nil && ri["role"] == "master" && ci["cluster_state"] == "ok" {
			took = time.Since(ik.at)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if took == 0 {
		t.Errorf("Redis kill %d: %v did not take over %s within 2 min", k, replica, ik.Target)
	}
	ik.Failover = took.Round(10 * time.Millisecond).String()
	if wait := time.Until(ik.at.Add(down)); wait > 0 {
		time.Sleep(wait)
	}
	c.startRedis(ctx, victim.n)
	ik.restarted = time.Now()
	ik.Down = ik.restarted.Sub(ik.at).Round(10 * time.Millisecond).String()
	if err := c.redisWhole(ctx, 3*time.Minute); err != nil {
		t.Errorf("Redis kill %d: after the restart of %s: %v", k, victim.n.p.name, err)
	}
	ik.recovered = time.Now()
	ik.Recovered = ik.recovered.Sub(ik.restarted).Round(10 * time.Millisecond).String()
}

// ---- small helpers ----

func clusterString(ci *jetstream.ClusterInfo) string {
	if ci == nil {
		return "none"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "leader %q", ci.Leader)
	for _, p := range ci.Replicas {
		fmt.Fprintf(&b, ", %s current=%v offline=%v lag=%d", p.Name, p.Current, p.Offline, p.Lag)
	}
	return b.String()
}

func httpGet(ctx context.Context, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), err
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

func mkdir(dir string) error { return os.MkdirAll(dir, 0o755) }
