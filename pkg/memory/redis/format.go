package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The store's format: which of the layouts that a replica of an earlier
// version does not keep the readers may rely on. Every replica of this
// version writes them whatever the format; the format says when they are
// complete, which only the operator can know: a replica of an earlier
// version, still running during a rolling upgrade, writes a node's hash
// without them and would leave them stale.
//
//   - FormatBase (1, or no format key): the layout of the versions before
//     the format key.
//   - FormatNodeCopies (2): each project's packed-nodes hash (pn, id ->
//     the node's packed value, as in its own hash) is complete, so a
//     candidate load is one HMGET per project instead of one command per
//     node (83 a turn at 100,000 memories in the benchmark).
//
// A namespace holding nothing when a replica of this version first opens it
// starts at the latest format (EnsureFormat); one with data stays at its
// format until `engram upgrade finish` (FinishUpgrade) rebuilds the copies
// and raises it. `engram upgrade rollback` (SetFormat(FormatBase)) is what
// must come before a replica of an earlier version writes again.
const (
	FormatBase       = 1
	FormatNodeCopies = 2
	FormatLatest     = FormatNodeCopies
)

// FormatTTL is how long a replica trusts the format it last read: a
// rollback reaches every replica's reads within it.
const FormatTTL = 5 * time.Second

func (s *Store) formatKey() string { return s.ns + ":{r}:format" }

// Format reads the store's format (FormatBase when the key is missing).
func (s *Store) Format(ctx context.Context) (int, error) {
	v, err := s.c.Get(ctx, s.formatKey()).Result()
	if errors.Is(err, goredis.Nil) {
		return FormatBase, nil
	}
	if err != nil {
		return 0, s.wrap("format", err)
	}
	f, err := strconv.Atoi(v)
	if err != nil || f < FormatBase {
		return 0, fmt.Errorf("redis memory store: format key %s holds %q", s.formatKey(), v)
	}
	return f, nil
}

// format is Format as read at most formatTTL ago (FormatBase while the
// server cannot be asked: the base layout is always right).
func (s *Store) format(ctx context.Context) int {
	now := time.Now().UnixNano()
	if at := s.formatAt.Load(); at != 0 && now-at < int64(s.formatTTL) {
		return int(s.formatSeen.Load())
	}
	f, err := s.Format(ctx)
	if err != nil {
		return FormatBase
	}
	s.formatSeen.Store(int32(f))
	s.formatAt.Store(now)
	return f
}

// nodeCopies reports whether reads may take nodes from the packed-nodes
// hashes (FormatNodeCopies).
func (s *Store) nodeCopies(ctx context.Context) bool {
	return s.format(ctx) >= FormatNodeCopies
}

// EnsureFormat gives a namespace that holds nothing yet the latest format
// (no replica of an earlier version has written it) and returns the
// store's format. A namespace with data keeps its format: see
// FinishUpgrade.
func (s *Store) EnsureFormat(ctx context.Context) (int, error) {
	if _, err := s.c.Get(ctx, s.formatKey()).Result(); !errors.Is(err, goredis.Nil) {
		if err != nil {
			return 0, s.wrap("format", err)
		}
		return s.Format(ctx) // set: raised by an upgrade, or a rollback's
	}
	// One EXISTS a key: they are on different slots of a cluster.
	pipe := s.c.Pipeline()
	reg, glob := pipe.Exists(ctx, s.registryKey()), pipe.Exists(ctx, s.keys("").all())
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, s.wrap("format", err)
	}
	if reg.Val()+glob.Val() > 0 {
		return FormatBase, nil // data from before the format key
	}
	if err := s.c.SetNX(ctx, s.formatKey(), FormatLatest, 0).Err(); err != nil {
		return 0, s.wrap("format", err)
	}
	s.formatAt.Store(0)
	return s.Format(ctx)
}

// SetFormat sets the store's format (FormatBase before a replica of an
// earlier version writes again). Raising it is FinishUpgrade's, which
// rebuilds what the format promises first.
func (s *Store) SetFormat(ctx context.Context, f int) error {
	if f != FormatBase {
		return fmt.Errorf("redis memory store: set format %d: only %d (a rollback) is set directly; FinishUpgrade raises it", f, FormatBase)
	}
	if err := s.c.Set(ctx, s.formatKey(), f, 0).Err(); err != nil {
		return s.wrap("format", err)
	}
	s.formatAt.Store(0)
	return nil
}

// upgradePage is how many nodes one script of FinishUpgrade takes: about
// 1.2 ms of the server's time, which the replicas' commands wait behind
// (1.8 s for 100,000 nodes in all, measured on a private Redis 8.0).
const upgradePage = 200

// UpgradeReport is what FinishUpgrade did.
type UpgradeReport struct {
	From, To int
	Scopes   int // scopes (projects, tenants' spaces, the global one) rebuilt
	Copies   int // node copies written or rewritten
	Dropped  int // copies of nodes no longer there, removed
}

// FinishUpgrade rebuilds every scope's packed-nodes hash from the node
// hashes (a copy for each node with a packed value, none for the others)
// and then sets the latest format. Run it once no replica of an earlier
// version runs: their writes do not keep the copies. Replicas of this
// version keep writing while it runs (each page is one script, and their
// writes set the node and its copy in one MULTI). It is idempotent.
func (s *Store) FinishUpgrade(ctx context.Context) (UpgradeReport, error) {
	from, err := s.Format(ctx)
	if err != nil {
		return UpgradeReport{}, err
	}
	rep := UpgradeReport{From: from, To: FormatLatest}
	projects, err := s.projects(ctx)
	if err != nil {
		return rep, err
	}
	for _, p := range append([]string{""}, projects...) {
		k := s.keys(p)
		// Every node of the scope: its copy set from its own hash.
		var cursor uint64
		for {
			pairs, next, err := s.c.ZScan(ctx, k.all(), cursor, "", upgradePage).Result()
			if err != nil {
				return rep, s.wrap("finish upgrade", err)
			}
			args := []any{k.node("")}
			for j := 0; j+1 < len(pairs); j += 2 {
				args = append(args, pairs[j])
			}
			if len(args) > 1 {
				n, err := copyNodesScript.Run(ctx, s.c, []string{k.packedNodes()}, args...).Int()
				if err != nil {
					return rep, s.wrap("finish upgrade", err)
				}
				rep.Copies += n
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
		// Every copy: dropped when its node is gone (an earlier version's
		// erasure does not drop it).
		cursor = 0
		for {
			ids, next, err := s.c.HScan(ctx, k.packedNodes(), cursor, "", upgradePage).Result()
			if err != nil {
				return rep, s.wrap("finish upgrade", err)
			}
			args := []any{k.node("")}
			for j := 0; j+1 < len(ids); j += 2 {
				args = append(args, ids[j])
			}
			if len(args) > 1 {
				n, err := dropOrphanCopiesScript.Run(ctx, s.c, []string{k.packedNodes()}, args...).Int()
				if err != nil {
					return rep, s.wrap("finish upgrade", err)
				}
				rep.Dropped += n
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
		rep.Scopes++
	}
	if err := s.c.Set(ctx, s.formatKey(), FormatLatest, 0).Err(); err != nil {
		return rep, s.wrap("finish upgrade", err)
	}
	s.formatAt.Store(0)
	return rep, nil
}

// copyNodesScript sets the copies of nodes from their hashes: the packed
// value, or no copy for a node without one (missing, or written before
// packing). It returns how many copies it wrote or changed.
//
// KEYS: the packed-nodes hash. ARGV: the node key prefix (the node hashes
// share the hash's tag), then the ids.
var copyNodesScript = goredis.NewScript(`
local done = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  local pk = redis.call('HGET', ARGV[1] .. id, '` + fPacked + `')
  if pk then
    if redis.call('HGET', KEYS[1], id) ~= pk then
      redis.call('HSET', KEYS[1], id, pk)
      done = done + 1
    end
  elseif redis.call('HDEL', KEYS[1], id) == 1 then
    done = done + 1
  end
end
return done
`)

// dropOrphanCopiesScript removes the copies of ids whose node hash holds
// no packed value and returns how many it removed (KEYS and ARGV as
// copyNodesScript's).
var dropOrphanCopiesScript = goredis.NewScript(`
local done = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  if redis.call('HEXISTS', ARGV[1] .. id, '` + fPacked + `') == 0 then
    done = done + redis.call('HDEL', KEYS[1], id)
  end
end
return done
`)
