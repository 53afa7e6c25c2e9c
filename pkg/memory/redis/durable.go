package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
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
// replication and kept for replicaCountTTL. A primary whose replicas do not acknowledge within the
// wait is an error (memory.ErrUnavailable): the caller does not
// acknowledge its event, which is delivered again and redone.

// DefaultReplicaWait is how long Durable waits for a replica's
// acknowledgement by default (a replica in sync answers in a round trip;
// the wait is at most half the client's read timeout, 3 s by default: see
// waitFor).
const DefaultReplicaWait = time.Second

// replicaCountTTL is how long a primary's count of connected replicas is
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
	mu       sync.Mutex
	replicas map[string]replicaCount
	keys     map[string]string // primary address -> a key in a slot it serves (cluster)
}

type replicaCount struct {
	n  int
	at time.Time
}

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
		err := c.ForEachMaster(ctx, func(ctx context.Context, node *goredis.Client) error {
			return s.durableOn(ctx, node, c)
		})
		return s.wrap("durable", err)
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
	n, err := s.replicasOf(ctx, node, addr, false)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	key, err := s.syncKey(ctx, addr, cc)
	if err != nil {
		return err
	}
	acked, err := s.waitOn(ctx, node, key)
	if err != nil && cc != nil && strings.HasPrefix(err.Error(), "MOVED ") {
		// The slot moved since the key was chosen: choose again, once.
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
	// None acknowledged: has the primary still a replica? One that left
	// (a replica restarting) leaves nothing to wait for.
	if n, err = s.replicasOf(ctx, node, addr, true); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("primary %s: %w: none of its %d online replicas acknowledged its writes within %v", addr, memory.ErrUnavailable, n, s.waitFor(node))
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

// replicasOf returns how many replicas node has online, from INFO
// replication, read again when fresh is set or the last count is older
// than replicaCountTTL.
func (s *Store) replicasOf(ctx context.Context, node *goredis.Client, addr string, fresh bool) (int, error) {
	d := &s.durable
	now := time.Now()
	d.mu.Lock()
	rc, ok := d.replicas[addr]
	d.mu.Unlock()
	if ok && !fresh && now.Sub(rc.at) < replicaCountTTL {
		return rc.n, nil
	}
	info, err := node.Info(ctx, "replication").Result()
	if err != nil {
		return 0, fmt.Errorf("primary %s: INFO replication: %w", addr, err)
	}
	n := onlineReplicas(info)
	d.mu.Lock()
	if d.replicas == nil {
		d.replicas = map[string]replicaCount{}
	}
	d.replicas[addr] = replicaCount{n: n, at: now}
	d.mu.Unlock()
	return n, nil
}

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
