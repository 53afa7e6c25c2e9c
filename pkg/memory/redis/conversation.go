package redis

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// The conversation index: per session of a project, a sorted set of its
// memories (K cv:<session>) scored by memory.ConversationAt, each member
// the memory's id as naturalKey encodes it, so that the set's own order
// (score, then member bytes) is memory.CompareConversation's and a
// memory's neighbours are a ZRANK and a ZRANGE away (adjacentScript).

// convVersionField marks, in a scope's corpus statistics (k.stats()), that
// its conversation index is complete (EnsureConversationIndex).
const convVersionField = "cv"

func (k keys) conversation(session string) string { return k.p + "cv:" + session }

// naturalKey encodes an id so that comparing keys byte by byte orders ids
// as memory.NaturalCompare does: every run of digits becomes '0', its
// length in two bytes (big-endian; a longer run is capped, ids are far
// shorter), then the digits. A digit run's '0' meets a byte that is not a
// digit where the ids compared the run's first digit with it, and both
// lie on the same side of it (digits are '0' to '9'); two runs compare
// by length, then digit by digit. naturalID decodes it.
func naturalKey(id string) string {
	b := make([]byte, 0, len(id)+8)
	for i := 0; i < len(id); {
		if id[i] < '0' || id[i] > '9' {
			b = append(b, id[i])
			i++
			continue
		}
		j := i
		for j < len(id) && id[j] >= '0' && id[j] <= '9' {
			j++
		}
		b = append(b, '0')
		b = binary.BigEndian.AppendUint16(b, uint16(min(j-i, 0xffff)))
		b = append(b, id[i:j]...)
		i = j
	}
	return string(b)
}

// naturalID inverts naturalKey ("" for a key it did not make).
func naturalID(key string) string {
	b := make([]byte, 0, len(key))
	for i := 0; i < len(key); {
		if key[i] != '0' {
			b = append(b, key[i])
			i++
			continue
		}
		if i+3 > len(key) {
			return ""
		}
		n := int(binary.BigEndian.Uint16([]byte(key[i+1 : i+3])))
		if i+3+n > len(key) {
			return ""
		}
		b = append(b, key[i+3:i+3+n]...)
		i += 3 + n
	}
	return string(b)
}

// convMoved reports whether a write moves a node in the conversation
// index (old nil: a new node).
func convMoved(old, n *memory.Node) bool {
	return old == nil || old.SessionID != n.SessionID || old.ID != n.ID ||
		memory.ConversationAt(old) != memory.ConversationAt(n)
}

// writeConversation puts n in its conversation set (taking old out of
// its own when it moved), within the write's transaction.
func (s *Store) writeConversation(ctx context.Context, pipe goredis.Pipeliner, lw *tagWrites, k keys, old, n *memory.Node) {
	if !convMoved(old, n) {
		return
	}
	if old != nil && spaceOf(old) == spaceOf(n) {
		pipe.ZRem(ctx, k.conversation(old.SessionID), naturalKey(old.ID))
	}
	lw.zadd(k.conversation(n.SessionID), float64(memory.ConversationAt(n)), naturalKey(n.ID))
}

// adjacentScript answers memories' neighbours: per memory its score and
// the members around it with theirs. One call answers every memory of a
// scope tag (their conversation sets share its slot): a script call costs
// the server more than its ZRANK and ZRANGE did, when it was one a memory.
//
// KEYS: per memory its conversation set. ARGV: how many on each side,
// then per memory its member. Reply: per memory the number of values that
// follow for it (0 when the member is not in the set), then its score and
// member, score pairs from k before it to k after it (it included).
var adjacentScript = goredis.NewScript(`
local k = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local m = ARGV[i + 1]
  local r = redis.call('ZRANK', KEYS[i], m)
  if not r then
    out[#out + 1] = '0'
  else
    local lo = r - k
    if lo < 0 then lo = 0 end
    local around = redis.call('ZRANGE', KEYS[i], lo, r + k, 'WITHSCORES')
    out[#out + 1] = tostring(#around + 1)
    out[#out + 1] = redis.call('ZSCORE', KEYS[i], m)
    for j = 1, #around do out[#out + 1] = around[j] end
  end
end
return out
`)

// Adjacent implements memory.Conversations with plain reads of each
// memory's conversation set, in two pipelines: the memory's rank (ZRANK),
// then the members from k before it to k after it (ZRANGE WITHSCORES).
// A memory that a concurrent write moved between the two reads (the
// window does not hold it where its rank said) is answered by
// adjacentScript, which reads both at once. The script for every memory
// cost about 10 us of server time a memory, most of it turning replies
// into Lua values and back; the plain reads cost a quarter of that. (Reads
// by score from the memory's own time, one pipeline, would need no rank,
// but a conversation's memories can share a millisecond by the hundred: a
// bulk import's do.)
func (s *Store) Adjacent(ctx context.Context, nodes []memory.Node, k int) (map[string]memory.Adjacency, error) {
	out := make(map[string]memory.Adjacency, len(nodes))
	if k <= 0 || len(nodes) == 0 {
		return out, nil
	}
	keys := make([]string, len(nodes))
	members := make([]string, len(nodes))
	ranks := make([]*goredis.IntCmd, len(nodes))
	pipe := s.c.Pipeline()
	for i := range nodes {
		keys[i] = s.keys(spaceOf(&nodes[i])).conversation(nodes[i].SessionID)
		members[i] = naturalKey(nodes[i].ID)
		ranks[i] = pipe.ZRank(ctx, keys[i], members[i])
	}
	// Exec reports only the first failed command, and a memory not
	// stored answers nil: each rank's own error is checked, and any but
	// nil is the call's error.
	if _, err := pipe.Exec(ctx); err != nil {
		for _, r := range ranks {
			if err := r.Err(); err != nil && !errors.Is(err, goredis.Nil) {
				return nil, s.wrap("adjacent", err)
			}
		}
	}
	if s.adjacentHook != nil {
		s.adjacentHook()
	}
	wins := make([]*goredis.ZSliceCmd, len(nodes))
	los := make([]int64, len(nodes))
	pipe = s.c.Pipeline()
	for i := range nodes {
		r, err := ranks[i].Result()
		if err != nil {
			continue // nil: not stored, no entry
		}
		los[i] = max(0, r-int64(k))
		wins[i] = pipe.ZRangeWithScores(ctx, keys[i], los[i], r+int64(k))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap("adjacent", err)
	}
	gap := float64(memory.ConversationGap.Milliseconds())
	var rest []memory.Node
	for i := range nodes {
		if wins[i] == nil {
			continue
		}
		w, pos := wins[i].Val(), ranks[i].Val()-los[i]
		if pos >= int64(len(w)) {
			rest = append(rest, nodes[i])
			continue
		}
		if m, _ := w[pos].Member.(string); m != members[i] {
			rest = append(rest, nodes[i])
			continue
		}
		out[nodes[i].ID] = neighbours(len(w), int(pos), gap,
			func(j int) string { m, _ := w[j].Member.(string); return m },
			func(j int) (float64, bool) { return w[j].Score, true })
	}
	if len(rest) > 0 {
		if err := s.adjacentScripted(ctx, rest, k, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// adjacentScripted answers Adjacent for nodes into out with
// adjacentScript: one script per scope tag (a ZRANK and a ZRANGE of each
// memory's conversation set), all in one pipeline.
func (s *Store) adjacentScripted(ctx context.Context, nodes []memory.Node, k int, out map[string]memory.Adjacency) error {
	var spaces []string
	byTag := map[string][]int{}
	for i := range nodes {
		sp := spaceOf(&nodes[i])
		if byTag[sp] == nil {
			spaces = append(spaces, sp)
		}
		byTag[sp] = append(byTag[sp], i)
	}
	flat, err := s.evalTags(ctx, adjacentScript, len(spaces), func(j int) ([]string, []any) {
		k2 := s.keys(spaces[j])
		idx := byTag[spaces[j]]
		keys := make([]string, len(idx))
		args := make([]any, 0, 1+len(idx))
		args = append(args, k)
		for m, i := range idx {
			keys[m] = k2.conversation(nodes[i].SessionID)
			args = append(args, naturalKey(nodes[i].ID))
		}
		return keys, args
	})
	if err != nil {
		return s.wrap("adjacent", err)
	}
	replies := make([][]string, len(nodes))
	for j, f := range flat {
		for _, i := range byTag[spaces[j]] {
			if len(f) == 0 {
				return fmt.Errorf("redis adjacent: short reply")
			}
			c, err := strconv.Atoi(f[0])
			if err != nil || c < 0 || c > len(f)-1 {
				return fmt.Errorf("redis adjacent: count %q", f[0])
			}
			replies[i], f = f[1:1+c], f[1+c:]
		}
	}
	gap := float64(memory.ConversationGap.Milliseconds())
	for i, r := range replies {
		if len(r) < 3 || len(r)%2 != 1 {
			continue
		}
		at, err := strconv.ParseFloat(r[0], 64)
		if err != nil {
			return fmt.Errorf("redis adjacent: score %q", r[0])
		}
		// r: the memory's score, then member, score pairs.
		me := naturalKey(nodes[i].ID)
		pos := -1
		for j := 1; j < len(r); j += 2 {
			if r[j] == me {
				pos = j / 2
			}
		}
		if pos < 0 {
			continue
		}
		out[nodes[i].ID] = neighbours(len(r)/2, pos, gap,
			func(j int) string { return r[1+2*j] },
			func(j int) (float64, bool) {
				if j == pos {
					return at, true
				}
				v, err := strconv.ParseFloat(r[2+2*j], 64)
				return v, err == nil
			})
	}
	return nil
}

// neighbours is the adjacency of the member at pos of a conversation
// window of n members in order: those before and after it, nearest first,
// while each is within gap (ms) of it; a score that cannot be read ends
// its side.
func neighbours(n, pos int, gap float64, member func(int) string, score func(int) (float64, bool)) memory.Adjacency {
	var a memory.Adjacency
	at, _ := score(pos)
	for j := pos - 1; j >= 0; j-- {
		if v, ok := score(j); !ok || at-v > gap {
			break
		}
		a.Before = append(a.Before, naturalID(member(j)))
	}
	for j := pos + 1; j < n; j++ {
		if v, ok := score(j); !ok || v-at > gap {
			break
		}
		a.After = append(a.After, naturalID(member(j)))
	}
	return a
}

var _ memory.Conversations = (*Store)(nil)

// EnsureConversationIndex fills the conversation sets of every scope
// written before they existed (its statistics lack convVersionField): it
// reads every node of such a scope once (a ZSCAN of its timeline, a
// GetMany per page), so it belongs at start-up (app.OpenStore calls it);
// scopes that are complete cost one pipelined HGET each. It is idempotent
// (ZADD of the same member and score) and safe beside writers, which keep
// the sets themselves. Until it has run, the memories of such a scope have
// no neighbours. It returns how many memories it indexed.
func (s *Store) EnsureConversationIndex(ctx context.Context) (int, error) {
	return s.upgradeScopes(ctx, "conversation index", convVersionField, 1, func(ctx context.Context, k keys, nodes []memory.Node) (int, error) {
		pipe := s.c.Pipeline()
		for i := range nodes {
			n := &nodes[i]
			pipe.ZAdd(ctx, k.conversation(n.SessionID), goredis.Z{Score: float64(memory.ConversationAt(n)), Member: naturalKey(n.ID)})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, err
		}
		return len(nodes), nil
	})
}
