package redis

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
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
//     the node's head: its packed value without the body, headCopy) is
//     complete, so a turn's candidate loads (GetHeads) are one HMGET per
//     project instead of one command per node (about 90 a turn at 100,000
//     memories in the benchmark).
//   - FormatDocFreqs (3): each project's document frequencies hash (df,
//     term -> the length of its posting list, set by the posting scripts
//     in the call that changes the list) is complete, so the lexical
//     dictionary's document frequencies are one HMGET per project instead
//     of a ZCARD per list (about 50 a turn in the benchmark).
//   - FormatReach (4): the reach registry (reach.go: the spaces that hold
//     a node of reach anywhere) and each project's reach-anywhere postings
//     (at:<term>) are complete, so cross-project recall reads those
//     projects only, and of each the postings of its nodes of reach
//     anywhere instead of its posting lists.
//
// A namespace starts at the base format, also an empty one: no replica can
// know that none of an earlier version will write it (a new install's
// first replicas can: the Helm chart's install hook runs `engram upgrade
// finish`, cheap on an empty namespace). `engram upgrade finish`
// (FinishUpgrade) rebuilds the copies and raises the format; `engram
// upgrade rollback` (SetFormat(FormatBase)) is what must come before a
// replica of an earlier version writes again: at format 2 such a replica's
// edit would leave a stale copy, and its erasure the erased memory's head;
// at format 3 its posting writes would leave stale document frequencies;
// at format 4 a memory of reach anywhere that it writes or edits would be
// missing from the reach-anywhere postings and vector sets (and from the
// reach registry, in a project that held none): not recalled, or recalled
// as it was, from the tenant's other projects.
const (
	FormatBase       = 1
	FormatNodeCopies = 2
	FormatDocFreqs   = 3
	FormatReach      = 4
	FormatLatest     = FormatReach
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

// CurrentFormat is the store's format as this replica uses it: Format as
// read at most s.formatTTL (FormatTTL) ago (FormatBase while the server
// cannot be asked: the base layout is always right). The age is read on
// the monotonic clock (time.Since of a time.Now): a wall clock stepped
// back must not keep a format past a rollback.
func (s *Store) CurrentFormat(ctx context.Context) int {
	if r := s.formatRead.Load(); r != nil && time.Since(r.at) < s.formatTTL {
		return r.f
	}
	at := time.Now()
	f, err := s.Format(ctx)
	if err != nil {
		return FormatBase
	}
	s.formatRead.Store(&formatRead{at: at, f: f})
	return f
}

// formatRead is the store's format and when it was read.
type formatRead struct {
	at time.Time
	f  int
}

// nodeCopies reports whether reads may take nodes from the packed-nodes
// hashes (FormatNodeCopies).
func (s *Store) nodeCopies(ctx context.Context) bool {
	return s.CurrentFormat(ctx) >= FormatNodeCopies
}

// docFreqs reports whether reads may take document frequencies from the
// document frequencies hashes (FormatDocFreqs).
func (s *Store) docFreqs(ctx context.Context) bool {
	return s.CurrentFormat(ctx) >= FormatDocFreqs
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
	s.formatRead.Store(nil)
	return nil
}

// upgradePage is how many nodes one script of FinishUpgrade takes: about
// 1.2 ms of the server's time, which the replicas' commands wait behind
// (1.7-1.8 s for 100,000 nodes in all, measured on a private Redis 8.0).
const upgradePage = 200

// UpgradeReport is what FinishUpgrade did.
type UpgradeReport struct {
	From, To int
	Scopes   int // scopes (projects, tenants' spaces, the global one) rebuilt
	Nodes    int // nodes read
	Copies   int // node copies written or rewritten
	Dropped  int // copies of nodes no longer there, removed
	Terms    int // dictionary terms and document frequencies read
	DocFreqs int // document frequencies written, changed or removed
	Reach    int // spaces holding a node of reach anywhere (the reach registry)
}

// FinishUpgrade rebuilds every scope's packed-nodes hash from the node
// hashes (a head for each node with a packed value, none for the others)
// and its document frequencies from the posting lists (each term of the
// dictionary and each one the hash holds set to its list's length, or
// removed for an empty list), adds each space holding a node of reach
// anywhere to the reach registry, and then sets the latest format. Run it once no replica of an earlier
// version runs: their writes do not keep the copies. Replicas of this
// version keep writing while it runs (each page is one script, and their
// writes set the node and its copy in one MULTI). It is idempotent.
// progress, when given, is called after each page with what is done so far
// and the number of scopes (a big store takes minutes: about 18 s a
// million nodes).
func (s *Store) FinishUpgrade(ctx context.Context, progress ...func(done UpgradeReport, scopes int)) (UpgradeReport, error) {
	from, err := s.Format(ctx)
	if err != nil {
		return UpgradeReport{}, err
	}
	if from > FormatLatest {
		return UpgradeReport{From: from, To: from}, fmt.Errorf("redis memory store: the store is at format %d, newer than this version's %d: finish the upgrade with a binary of that version", from, FormatLatest)
	}
	rep := UpgradeReport{From: from, To: FormatLatest}
	projects, err := s.projects(ctx)
	if err != nil {
		return rep, err
	}
	scopes := append([]string{""}, projects...)
	report := func() {
		for _, f := range progress {
			f(rep, len(scopes))
		}
	}
	for _, p := range scopes {
		k := s.keys(p)
		// Every node of the scope: its copy set from its own hash.
		var cursor uint64
		for {
			pairs, next, err := s.c.ZScan(ctx, k.all(), cursor, "", upgradePage).Result()
			if err != nil {
				return rep, s.wrap("finish upgrade", err)
			}
			ids := make([]string, 0, len(pairs)/2)
			for j := 0; j+1 < len(pairs); j += 2 {
				ids = append(ids, pairs[j])
			}
			n, err := s.copyNodes(ctx, k, ids)
			rep.Copies += n
			rep.Nodes += len(ids)
			if err != nil {
				return rep, s.wrap("finish upgrade", err)
			}
			report()
			if cursor = next; cursor == 0 {
				break
			}
		}
		// Every copy: dropped when its node is gone (an earlier version's
		// erasure does not drop it).
		cursor = 0
		for {
			ids, next, err := s.c.HScanNoValues(ctx, k.packedNodes(), cursor, "", upgradePage).Result()
			if err != nil {
				return rep, s.wrap("finish upgrade", err)
			}
			args := []any{k.node("")}
			for _, id := range ids {
				args = append(args, id)
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
		// Every term of the dictionary and every one the document
		// frequencies hash holds (an earlier version's erasure leaves a
		// term it emptied there): its frequency set from its list.
		for _, src := range []string{k.terms(), k.docFreqs()} {
			cursor = 0
			for {
				var terms []string
				var next uint64
				var err error
				if src == k.terms() {
					var pairs []string
					pairs, next, err = s.c.ZScan(ctx, src, cursor, "", upgradePage).Result()
					for j := 0; j+1 < len(pairs); j += 2 {
						terms = append(terms, pairs[j])
					}
				} else {
					terms, next, err = s.c.HScanNoValues(ctx, src, cursor, "", upgradePage).Result()
				}
				if err != nil {
					return rep, s.wrap("finish upgrade", err)
				}
				if len(terms) > 0 {
					args := make([]any, 0, 1+len(terms))
					args = append(args, k.p)
					for _, t := range terms {
						args = append(args, t)
					}
					n, err := setDocFreqsScript.Run(ctx, s.c, []string{k.docFreqs()}, args...).Int()
					if err != nil {
						return rep, s.wrap("finish upgrade", err)
					}
					rep.Terms += len(terms)
					rep.DocFreqs += n
				}
				report()
				if cursor = next; cursor == 0 {
					break
				}
			}
		}
		if p != "" {
			found, err := s.rebuildReach(ctx, p)
			if err != nil {
				return rep, s.wrap("finish upgrade", err)
			}
			if found {
				rep.Reach++
			}
		}
		rep.Scopes++
	}
	if err := s.c.Set(ctx, s.formatKey(), FormatLatest, 0).Err(); err != nil {
		return rep, s.wrap("finish upgrade", err)
	}
	s.formatRead.Store(nil)
	return rep, nil
}

// copyNodes sets the copies of ids (nodes of k's scope) from their
// hashes: a node's head (headCopy) for a node with a packed value, no copy
// for the others (gone, or written before packing). The heads are made
// here and set by copyNodesScript only where the node's packed value is
// still the one they were made from (a writer of this version that changed
// it since has set its copy itself). It returns how many copies it wrote,
// changed or removed.
func (s *Store) copyNodes(ctx context.Context, k keys, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	pipe := s.c.Pipeline()
	pks := make([]*goredis.StringCmd, len(ids))
	for i, id := range ids {
		pks[i] = pipe.HGet(ctx, k.node(id), fPacked)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return 0, err
	}
	args := make([]any, 0, 1+3*len(ids))
	args = append(args, k.node(""))
	for i, id := range ids {
		pk, err := pks[i].Result()
		if errors.Is(err, goredis.Nil) {
			args = append(args, id, "", "")
			continue
		}
		if err != nil {
			return 0, err
		}
		n, err := unpackNode(pk)
		if err != nil {
			return 0, fmt.Errorf("node %s: %w", id, err)
		}
		sum := sha1.Sum([]byte(pk))
		args = append(args, id, hex.EncodeToString(sum[:]), headCopy(&n))
	}
	return copyNodesScript.Run(ctx, s.c, []string{k.packedNodes()}, args...).Int()
}

// copyNodesScript sets copies made by copyNodes.
//
// KEYS: the packed-nodes hash. ARGV: the node key prefix (the node hashes
// share the hash's tag), then for each node its id, the SHA-1 of the
// packed value the copy was made from ("": the node had none) and the
// copy.
var copyNodesScript = goredis.NewScript(`
local done = 0
for i = 2, #ARGV, 3 do
  local id, sum, copy = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local pk = redis.call('HGET', ARGV[1] .. id, '` + fPacked + `')
  if sum == '' then
    if not pk then
      done = done + redis.call('HDEL', KEYS[1], id)
    end
  elseif pk and redis.sha1hex(pk) == sum and redis.call('HGET', KEYS[1], id) ~= copy then
    redis.call('HSET', KEYS[1], id, copy)
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

// setDocFreqsScript sets the document frequencies of terms from their
// posting lists (removed for an empty list) and returns how many it
// wrote, changed or removed. A writer of this version sets a term's
// frequency in the script that changes its list, so a page set in one
// script is right when it ends, whatever writes run beside it.
//
// KEYS: the document frequencies hash. ARGV: the key prefix, then the
// terms.
var setDocFreqsScript = goredis.NewScript(`
local done = 0
for i = 2, #ARGV do
  local t = ARGV[i]
  local c = redis.call('ZCARD', ARGV[1] .. 't:' .. t)
  local cur = tonumber(redis.call('HGET', KEYS[1], t))
  if c == 0 then
    done = done + redis.call('HDEL', KEYS[1], t)
  elseif cur ~= c then
    redis.call('HSET', KEYS[1], t, c)
    done = done + 1
  end
end
return done
`)
