package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// Acknowledged writes and a primary's loss.
//
// Redis replicates asynchronously: a primary answers a write before its
// replicas have it, and a primary killed in that moment takes the write
// with it when a replica is promoted. A worker that acknowledged its event
// after such a write has dropped it: the bus will not deliver it again.
// Durable closes that window. It writes a key of its own on every primary
// (on one connection each, in a slot the primary serves) and sends WAIT on
// the same connection: WAIT returns once replicas acknowledged the
// connection's last write, and a primary's replication stream is one
// sequence, so every write the primary took before it, from any
// connection, is then on a replica too. A replica promoted after the
// primary's loss holds them (Redis Cluster promotes the replica with the
// most data, a Sentinel the one with the highest offset).
//
// A primary with no replica online has nothing to wait for: Durable lets
// its writes through (the deployment keeps no copy of them anyway) and logs
// nothing; a replica still loading the primary's data after a restart is
// not online (see onlineReplicas). The number is read from INFO
// replication and kept for replicaCountTTL. A primary that had a replica
// online within replicaGrace is still waited for: a replica whose link
// dropped a moment ago would be promoted without the writes taken
// meanwhile. A primary whose replicas do not acknowledge within the wait
// is an error (memory.ErrUnavailable): the caller does not acknowledge its
// event, which waits (the runner) and is acknowledged once they do.
//
// A failover between a handler's write and Durable promotes a replica
// that may lack the write, and the new primary has no replica yet:
// Durable alone would let the event through. So the store counts the
// cluster's failovers it sees (Failovers: the set of primaries listed
// changed, a primary's address replaced by its promoted replica's), and
// the runner runs again a handler that began before the count moved
// (runner.Failovers): its writes are made again on the primaries that
// serve now. A primary that restarts in place (standalone, or a cluster
// node back before it is failed over) is not counted: what it lost with
// it is what its own persistence (appendfsync) lost.

// DefaultReplicaWait is how long Durable waits for a replica's
// acknowledgement by default (a replica in sync answers in a round trip;
// the wait is at most half the client's read timeout, 5 s by default in
// go-redis v9.23: see waitFor).
const DefaultReplicaWait = time.Second

// replicaCountTTL is how long a primary's count of online replicas is
// trusted before INFO is read again.
const replicaCountTTL = 5 * time.Second

// WithReplicaWait sets how long Durable waits for a replica to acknowledge
// a primary's writes (default DefaultReplicaWait); 0 turns Durable off (it
// returns at once: writes acknowledged to the bus may be lost with a
// primary).
func WithReplicaWait(d time.Duration) Option {
	return func(s *Store) error {
		if d < 0 {
			return fmt.Errorf("WithReplicaWait: negative duration %v", d)
		}
		if d > 0 && d < time.Millisecond {
			return fmt.Errorf("WithReplicaWait: %v is under a millisecond (WAIT counts milliseconds)", d)
		}
		s.replicaWait = d
		return nil
	}
}

// durability is the state Durable keeps per primary (by address).
type durability struct {
	mu        sync.Mutex
	replicas  map[string]replicaCount
	keys      map[string]string // primary address -> a key in a slot it serves (cluster)
	masters   []*goredis.Client // a cluster's primaries as last listed (mastersTTL)
	mastersAt time.Time
	set       string        // their addresses, sorted, as last listed
	failovers atomic.Uint64 // times the set listed changed (Failovers)
	listing   sync.Mutex    // one listing at a time: applied in the order made
}

// listed reports whether the primaries were listed once.
func (d *durability) listed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.set != ""
}

// replicaCount is what INFO replication last said of a primary's online
// replicas, and when a replica was last seen online.
type replicaCount struct {
	n    int
	at   time.Time
	seen time.Time
}

// expected reports whether writes on the primary are to wait for a
// replica: one is online, or was within replicaGrace (a replica whose link
// dropped a moment ago is promoted without the writes taken meanwhile: a
// primary that had one waits for it that long before it acknowledges
// without a copy).
func (c replicaCount) expected(now time.Time) bool {
	return c.n > 0 || (!c.seen.IsZero() && now.Sub(c.seen) < replicaGrace)
}

// replicaGrace is how long a primary that had an online replica is still
// waited for after the replica went (its link dropped, it restarts and
// loads): events wait that long, then are acknowledged without a copy.
const replicaGrace = time.Minute

// mastersTTL is how long a cluster's list of primaries is used before it
// is listed again (go-redis reloads the cluster's layout for each listing);
// an error on a primary lists them again at the next call.
const mastersTTL = time.Second

// Durable returns once every write the store's primaries have taken so far
// is on at least one of their replicas (see above), or with an error
// wrapping memory.ErrUnavailable when a primary with replicas had none
// acknowledge within the store's replica wait.
func (s *Store) Durable(ctx context.Context) error {
	if s.replicaWait <= 0 {
		return nil
	}
	switch c := s.c.(type) {
	case *goredis.ClusterClient:
		nodes, err := s.primaries(ctx, c)
		if err != nil {
			return s.wrap("durable", err)
		}
		errs := make([]error, len(nodes))
		var wg sync.WaitGroup
		for i, node := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.durableOn(ctx, node, c)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			s.durable.mu.Lock()
			s.durable.mastersAt = time.Time{} // list them again: a failover, a node gone
			s.durable.mu.Unlock()
			return s.wrap("durable", err)
		}
		return nil
	case *goredis.Client:
		return s.wrap("durable", s.durableOn(ctx, c, nil))
	default:
		// A ring or another client kind: no single primary to wait on.
		return nil
	}
}

// durableOn waits until node's writes are on a replica. cc is the cluster
// node belongs to (nil: a standalone server).
func (s *Store) durableOn(ctx context.Context, node *goredis.Client, cc *goredis.ClusterClient) error {
	addr := node.Options().Addr
	rc, err := s.replicasOf(ctx, node, addr, false)
	if err != nil {
		return err
	}
	if !rc.expected(time.Now()) {
		return nil
	}
	key, err := s.syncKey(ctx, addr, cc)
	if err != nil {
		return err
	}
	acked, err := s.waitOn(ctx, node, key)
	if err != nil && cc != nil && (strings.HasPrefix(err.Error(), "MOVED ") || strings.HasPrefix(err.Error(), "ASK ")) {
		// The slot moved, or is moving, since the key was chosen: choose
		// again, once.
		s.forgetKey(addr)
		if key, err = s.syncKey(ctx, addr, cc); err != nil {
			return err
		}
		acked, err = s.waitOn(ctx, node, key)
	}
	if err != nil {
		return fmt.Errorf("primary %s: %w", addr, err)
	}
	if acked > 0 {
		return nil
	}
	// None acknowledged: is a replica still expected? One gone longer
	// than replicaGrace leaves nothing to wait for.
	if rc, err = s.replicasOf(ctx, node, addr, true); err != nil {
		return err
	}
	if !rc.expected(time.Now()) {
		return nil
	}
	return fmt.Errorf("primary %s: %w: no replica acknowledged its writes within %v (%d online)", addr, memory.ErrUnavailable, s.waitFor(node), rc.n)
}

// waitOn writes key and sends WAIT on one connection of node (a pipeline
// of a node's client runs on one connection) and returns how many
// replicas acknowledged.
func (s *Store) waitOn(ctx context.Context, node *goredis.Client, key string) (int64, error) {
	var wait *goredis.Cmd
	_, err := node.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, key, strconv.FormatInt(s.now().UnixNano(), 10), time.Minute)
		wait = p.Do(ctx, "wait", 1, s.waitFor(node).Milliseconds())
		return nil
	})
	if err != nil {
		return 0, err
	}
	return wait.Int64()
}

// waitFor is the replica wait on node: at most half the client's read
// timeout (a pipeline reads its replies within that timeout, WAIT's too).
func (s *Store) waitFor(node *goredis.Client) time.Duration {
	w := s.replicaWait
	if rt := node.Options().ReadTimeout; rt > 0 && w > rt/2 {
		w = max(rt/2, time.Millisecond)
	}
	return w
}

// replicasOf returns what INFO replication says of node's online
// replicas, read again when fresh is set or the last reading is older than
// replicaCountTTL.
func (s *Store) replicasOf(ctx context.Context, node *goredis.Client, addr string, fresh bool) (replicaCount, error) {
	d := &s.durable
	now := time.Now()
	d.mu.Lock()
	rc, ok := d.replicas[addr]
	d.mu.Unlock()
	if ok && !fresh && now.Sub(rc.at) < replicaCountTTL {
		return rc, nil
	}
	info, err := node.Info(ctx, "replication").Result()
	if err != nil {
		return replicaCount{}, fmt.Errorf("primary %s: INFO replication: %w", addr, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.replicas == nil {
		d.replicas = map[string]replicaCount{}
	}
	rc = d.replicas[addr]
	rc.n, rc.at = onlineReplicas(info), now
	if rc.n > 0 {
		rc.seen = now
	}
	d.replicas[addr] = rc
	return rc, nil
}

// primaries lists a cluster's primaries, at most every mastersTTL, one
// listing at a time (two applied out of order would count a failover
// back and forth).
func (s *Store) primaries(ctx context.Context, cc *goredis.ClusterClient) ([]*goredis.Client, error) {
	d := &s.durable
	fresh := func() ([]*goredis.Client, bool) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.masters, !d.mastersAt.IsZero() && time.Since(d.mastersAt) < mastersTTL
	}
	if ms, ok := fresh(); ok {
		return ms, nil
	}
	d.listing.Lock()
	defer d.listing.Unlock()
	if ms, ok := fresh(); ok {
		return ms, nil // listed while this call waited
	}
	var mu sync.Mutex
	var ms []*goredis.Client
	if err := cc.ForEachMaster(ctx, func(_ context.Context, node *goredis.Client) error {
		mu.Lock()
		ms = append(ms, node)
		mu.Unlock()
		return nil
	}); err != nil {
		return nil, err
	}
	addrs := make([]string, len(ms))
	for i, m := range ms {
		addrs[i] = m.Options().Addr
	}
	slices.Sort(addrs)
	set := strings.Join(addrs, ",")
	d.mu.Lock()
	d.masters, d.mastersAt = ms, time.Now()
	if d.set != "" && d.set != set {
		d.failovers.Add(1)
	}
	d.set = set
	d.mu.Unlock()
	return ms, nil
}

// Failovers counts the changes Durable has seen in a cluster's set of
// primaries (a failover replaces a primary's address with its promoted
// replica's; a node added or removed counts too): a handler whose writes
// began before the count moved may have had them on a primary lost since
// (see above). A standalone server's count stays 0.
func (s *Store) Failovers() uint64 { return s.durable.failovers.Load() }

// onlineReplicas counts the replicas of an INFO replication reply that are
// online: connected and past their first synchronisation. A replica still
// loading the primary's data (after its restart, a full resync of many
// gigabytes) acknowledges nothing until it is done; waiting for it would
// hold every acknowledgement for as long, while it holds no copy that a
// failover could promote anyway.
func onlineReplicas(info string) int {
	n := 0
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(k, "slave") || strings.TrimPrefix(k, "slave") == "" {
			continue
		}
		if _, err := strconv.Atoi(strings.TrimPrefix(k, "slave")); err != nil {
			continue // slave_read_repl_offset and the like
		}
		for _, f := range strings.Split(v, ",") {
			if f == "state=online" {
				n++
			}
		}
	}
	return n
}

// syncKey returns the key Durable writes on the primary at addr: in a
// cluster one whose slot the primary serves (found by trying hash tags),
// else one key.
func (s *Store) syncKey(ctx context.Context, addr string, cc *goredis.ClusterClient) (string, error) {
	if cc == nil {
		return s.ns + ":{sync}", nil
	}
	d := &s.durable
	d.mu.Lock()
	key, ok := d.keys[addr]
	d.mu.Unlock()
	if ok {
		return key, nil
	}
	// 16,384 slots over a few primaries: a few tries each.
	for i := range 1 << 16 {
		k := s.ns + ":{sync-" + strconv.Itoa(i) + "}"
		m, err := cc.MasterForKey(ctx, k)
		if err != nil {
			return "", fmt.Errorf("primary %s: %w", addr, err)
		}
		if m.Options().Addr == addr {
			d.mu.Lock()
			if d.keys == nil {
				d.keys = map[string]string{}
			}
			d.keys[addr] = k
			d.mu.Unlock()
			return k, nil
		}
	}
	return "", errors.New("no key of the namespace hashes to a slot of primary " + addr)
}

func (s *Store) forgetKey(addr string) {
	s.durable.mu.Lock()
	delete(s.durable.keys, addr)
	s.durable.mu.Unlock()
}
