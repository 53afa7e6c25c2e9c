package redis

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Only online replicas count: one still in its first synchronisation
// (after a restart, a full resync) acknowledges nothing until it is done.
func TestOnlineReplicas(t *testing.T) {
	for _, c := range []struct {
		info string
		want int
	}{
		{"# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_repl_offset:0\r\n", 0},
		{"role:master\r\nconnected_slaves:2\r\nslave0:ip=10.0.0.2,port=6379,state=online,offset=120,lag=0\r\n" +
			"slave1:ip=10.0.0.3,port=6379,state=online,offset=118,lag=1\r\nslave_read_repl_offset:1\r\n", 2},
		{"role:master\r\nconnected_slaves:2\r\nslave0:ip=10.0.0.2,port=6379,state=wait_bgsave,offset=0,lag=0\r\n" +
			"slave1:ip=10.0.0.3,port=6379,state=online,offset=118,lag=1\r\n", 1},
		{"role:master\r\nconnected_slaves:1\r\nslave0:ip=10.0.0.2,port=6379,state=send_bulk,offset=0,lag=0\r\n", 0},
	} {
		if got := onlineReplicas(c.info); got != c.want {
			t.Errorf("onlineReplicas(%q) = %d, want %d", c.info, got, c.want)
		}
	}
}

// A primary that had a replica online is waited for a while after the
// replica went (its link dropped: promoted now, it would lack the writes
// taken meanwhile); one that never had one, or lost it long ago, is not.
func TestReplicaExpectedWithinGrace(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		rc   replicaCount
		want bool
	}{
		{replicaCount{n: 1, seen: now}, true},
		{replicaCount{}, false},
		{replicaCount{seen: now.Add(-replicaGrace / 2)}, true},
		{replicaCount{seen: now.Add(-2 * replicaGrace)}, false},
	} {
		if got := c.rc.expected(now); got != c.want {
			t.Errorf("%+v: expected = %v, want %v", c.rc, got, c.want)
		}
	}
}

// On a cluster of several primaries each gets a sync key in a slot it
// serves.
func TestSyncKeyPerPrimary(t *testing.T) {
	addrs := os.Getenv("ENGRAM_TEST_REDIS_CLUSTER")
	if addrs == "" {
		t.Skip("ENGRAM_TEST_REDIS_CLUSTER is not set")
	}
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
	defer cc.Close()
	s, err := New(cc, WithNamespace("synckeytest"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ms, err := s.primaries(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 2 {
		t.Skipf("the test cluster has %d primaries", len(ms))
	}
	keys := map[string]bool{}
	for _, m := range ms {
		addr := m.Options().Addr
		k, err := s.syncKey(ctx, addr, cc)
		if err != nil {
			t.Fatal(err)
		}
		owner, err := cc.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if owner.Options().Addr != addr || keys[k] {
			t.Fatalf("primary %s: key %q is served by %s (or chosen twice)", addr, k, owner.Options().Addr)
		}
		keys[k] = true
		// The key is written on the primary's own connection, without
		// a MOVED.
		if err := m.Set(ctx, k, "1", time.Minute).Err(); err != nil {
			t.Fatalf("primary %s: SET %s: %v", addr, k, err)
		}
	}
	if err := s.Durable(ctx); err != nil {
		t.Fatalf("Durable on a cluster without replicas: %v", err)
	}
}
