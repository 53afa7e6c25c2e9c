package redis_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// redisServer starts a Redis 8 of the test's own (no persistence, DEBUG
// allowed: a replica is stalled with DEBUG SLEEP) with the extra
// configuration lines (a later line overrides an earlier one), stops it at
// the end of the test and returns its address; it skips where there is
// none.
func redisServer(t testing.TB, extra ...string) string {
	t.Helper()
	server := redis8Server(t)
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	conf := filepath.Join(dir, "redis.conf")
	lines := append([]string{fmt.Sprintf("port %d", port), "bind 127.0.0.1", "dir " + dir, `save ""`,
		"appendonly no", "enable-debug-command yes"}, extra...)
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(server[0], append(server[1:], conf)...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := plainClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for c.Ping(ctx).Err() != nil {
		if ctx.Err() != nil {
			t.Fatalf("the private Redis does not answer:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return addr
}

// aclClient makes a user of its own on the Redis at addr with the ACL
// rules given and returns a client that logs in as it.
func aclClient(t testing.TB, addr string, rules ...string) *goredis.Client {
	t.Helper()
	args := append([]any{"acl", "setuser", "engram-test", "on", ">acl-test-pw"}, anys(rules)...)
	if err := plainClient(t, addr).Do(context.Background(), args...).Err(); err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr, Username: "engram-test", Password: "acl-test-pw", MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func plainClient(t testing.TB, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// linkUp waits until the replica at c is connected to its primary and in
// sync.
func linkUp(t testing.TB, c *goredis.Client) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		info, err := c.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the replica's link to its primary is not up after a minute")
}

// stall makes the Redis at addr sleep for d (DEBUG SLEEP: it processes
// nothing, its replication stream included) and returns once it sleeps;
// the returned channel closes when it wakes.
func stall(t *testing.T, addr string, d time.Duration) <-chan struct{} {
	t.Helper()
	woke := make(chan struct{})
	go func() {
		defer close(woke)
		c := goredis.NewClient(&goredis.Options{Addr: addr, ReadTimeout: d + 10*time.Second, MaxRetries: -1})
		defer c.Close()
		if err := c.Do(context.Background(), "debug", "sleep", d.Seconds()).Err(); err != nil {
			t.Errorf("DEBUG SLEEP: %v", err)
		}
	}()
	probe := goredis.NewClient(&goredis.Options{Addr: addr, ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer probe.Close()
	for probe.Ping(context.Background()).Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	return woke
}

// sameKeys fails unless the replica holds the primary's keys.
func sameKeys(t *testing.T, primary, replica *goredis.Client) {
	t.Helper()
	ctx := context.Background()
	p, err := primary.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	r, err := replica.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(p)
	slices.Sort(r)
	if !slices.Equal(p, r) {
		t.Fatalf("the replica holds %d keys, the primary %d: not the same", len(r), len(p))
	}
}

func durableNode(label string) memory.Node {
	return memory.Node{ProjectID: "p", Subkind: memory.Decision, Label: label, Body: label + ": kept across a failover"}
}

// TestDurableWaitsForAReplica: Durable returns only once a replica holds
// the writes acknowledged so far, and fails (memory.ErrUnavailable) while
// the replica cannot take them; without the wait a write acknowledged in
// that moment was on the primary alone.
func TestDurableWaitsForAReplica(t *testing.T) {
	pAddr := redisServer(t)
	rAddr := redisServer(t, "replicaof 127.0.0.1 "+strings.Split(pAddr, ":")[1])
	primary, replica := plainClient(t, pAddr), plainClient(t, rAddr)
	linkUp(t, replica)
	st, err := redis.New(primary, redis.WithNamespace("durable"), redis.WithReplicaWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	waitsForTheReplica(t, st, primary, replica, rAddr)
}

// waitsForTheReplica: Durable returns once the replica (at rAddr) holds a
// write, and refuses while the replica sleeps, until it wakes.
func waitsForTheReplica(t *testing.T, st *redis.Store, primary, replica *goredis.Client, rAddr string) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.Upsert(ctx, durableNode("first")); err != nil {
		t.Fatal(err)
	}
	if err := st.Durable(ctx); err != nil {
		t.Fatalf("Durable with a replica in sync: %v", err)
	}
	sameKeys(t, primary, replica)

	woke := stall(t, rAddr, 3*time.Second)
	if _, err := st.Upsert(ctx, durableNode("second")); err != nil {
		t.Fatal(err)
	}
	if err := st.Durable(ctx); !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("Durable while the replica sleeps = %v, want memory.ErrUnavailable (the write is on the primary alone)", err)
	}
	<-woke
	if err := st.Durable(ctx); err != nil {
		t.Fatalf("Durable once the replica woke: %v", err)
	}
	sameKeys(t, primary, replica)
}

// TestDurableWithoutAReplica: a primary with no replica has nothing to
// wait for: Durable returns without waiting its wait out.
func TestDurableWithoutAReplica(t *testing.T) {
	c := testClient(t)
	st := openStore(t, c, redis.WithReplicaWait(time.Minute))
	ctx := context.Background()
	if _, err := st.Upsert(ctx, durableNode("alone")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := st.Durable(ctx); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Fatalf("Durable waited %v for replicas that do not exist", waited)
	}
}

// TestDurableOnAClusterWithAReplica: on a Redis Cluster, Durable waits on
// every primary (a key of its own in a slot the primary serves, WAIT on
// the same connection): one primary holding every slot, one replica.
func TestDurableOnAClusterWithAReplica(t *testing.T) {
	st, primary, replica, _, rAddr := replicatedCluster(t)
	waitsForTheReplica(t, st, primary, replica, rAddr)
}

// replicatedCluster builds a Redis Cluster of one primary (every slot) and
// its replica, and a store on it.
func replicatedCluster(t *testing.T) (st *redis.Store, primary, replica *goredis.Client, pAddr, rAddr string) {
	t.Helper()
	cluster := []string{"cluster-enabled yes", "cluster-config-file nodes.conf", "cluster-node-timeout 60000"}
	pAddr, rAddr = redisServer(t, cluster...), redisServer(t, cluster...)
	primary, replica = plainClient(t, pAddr), plainClient(t, rAddr)
	ctx := context.Background()
	if err := primary.Do(ctx, "cluster", "addslotsrange", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(pAddr, ":")
	if err := replica.ClusterMeet(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	pid, err := primary.Do(ctx, "cluster", "myid").Text()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		// The replica must know the primary before it can follow it.
		err := replica.Do(ctx, "cluster", "replicate", pid).Err()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CLUSTER REPLICATE: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	linkUp(t, replica)
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{pAddr}, MaxRetries: -1})
	t.Cleanup(func() { _ = cc.Close() })
	st, err = redis.New(cc, redis.WithNamespace("durable"), redis.WithReplicaWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for cc.Ping(ctx).Err() != nil || primary.ClusterInfo(ctx).Val() == "" || !strings.Contains(primary.ClusterInfo(ctx).Val(), "cluster_state:ok") {
		if time.Now().After(deadline) {
			t.Fatal("the cluster is not ok after a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return st, primary, replica, pAddr, rAddr
}

// TestFailoversCounted: a failover (the replica promoted, the primary's
// address no longer among the primaries) moves the store's failover count
// once Durable lists the primaries again, and only then: a handler that
// began before it runs again (runner.Failovers). The count starts from
// the primaries Ping (the store's gate, at start) listed: a failover before
// the first Durable is counted too.
func TestFailoversCounted(t *testing.T) {
	st, _, replica, _, rAddr := replicatedCluster(t)
	ctx := context.Background()
	if err := st.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if n := st.Failovers(); n != 0 {
		t.Fatalf("%d failovers counted before any", n)
	}
	if err := replica.Do(ctx, "cluster", "failover").Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		role, err := replica.Do(ctx, "role").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica at %s was not promoted within a minute: %v %v", rAddr, role, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for st.Failovers() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Durable did not count the failover within a minute")
		}
		time.Sleep(200 * time.Millisecond)
		_ = st.Durable(ctx) // errors while the cluster settles
	}
	if n := st.Failovers(); n != 1 {
		t.Fatalf("%d failovers counted, want 1", n)
	}
	time.Sleep(1100 * time.Millisecond)
	if err := st.Durable(ctx); err != nil {
		t.Fatalf("Durable on the new primary: %v", err)
	}
	if n := st.Failovers(); n != 1 {
		t.Fatalf("%d failovers counted after the cluster settled, want 1", n)
	}
	// Many callers listing the primaries at once count nothing more (the
	// listings are made one at a time, so none applied out of order counts
	// a failover back and forth).
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				_ = st.Durable(ctx)
				time.Sleep(300 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if n := st.Failovers(); n != 1 {
		t.Fatalf("%d failovers counted after concurrent listings, want 1", n)
	}
}

// BenchmarkDurable: what a worker's acknowledgement waits for, a write
// then Durable, against a primary with a replica on the same machine and
// one without (go test -run '^$' -bench Durable ./pkg/memory/redis).
func BenchmarkDurable(b *testing.B) {
	for _, replicated := range []bool{false, true} {
		b.Run(map[bool]string{false: "no-replica", true: "replica"}[replicated], func(b *testing.B) {
			pAddr := redisServer(b)
			primary := plainClient(b, pAddr)
			if replicated {
				linkUp(b, plainClient(b, redisServer(b, "replicaof 127.0.0.1 "+strings.Split(pAddr, ":")[1])))
			}
			st, err := redis.New(primary, redis.WithNamespace("bench"))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for b.Loop() {
				if err := primary.Set(ctx, "bench:{p}:w", "x", 0).Err(); err != nil {
					b.Fatal(err)
				}
				if err := st.Durable(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPingTellsAnOldServerFromAnError: only a server that does not know
// VCARD lacks vector sets; a refused VCARD (here an ACL user without it; in
// the chaos suite a MOVED during a failover) is reported as what it is.
func TestPingTellsAnOldServerFromAnError(t *testing.T) {
	st, err := redis.New(aclClient(t, redisServer(t), "~*", "-@all", "+@connection", "+ping"))
	if err != nil {
		t.Fatal(err)
	}
	err = st.Ping(context.Background())
	if err == nil || strings.Contains(err.Error(), "no vector sets") || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("Ping as a user without VCARD = %v, want the refusal, not a server without vector sets", err)
	}
}

// A user without WAIT is refused at start with a message that names it
// (every acknowledgement would fail); with the replica wait off it is not
// needed.
func TestPingRefusesAUserWithoutWait(t *testing.T) {
	addr := redisServer(t)
	rules := append([]string{"~*", "resetchannels"}, strings.Fields(strings.ReplaceAll(redis.ACLCommands, "+wait", ""))...)
	c := aclClient(t, addr, rules...)
	st, err := redis.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Ping(context.Background()); err == nil || !strings.Contains(err.Error(), "+wait") {
		t.Fatalf("Ping as a user without WAIT = %v, want a refusal naming +wait", err)
	}
	off, err := redis.New(c, redis.WithReplicaWait(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Ping(context.Background()); err != nil {
		t.Fatalf("Ping with the replica wait off: %v", err)
	}
}
