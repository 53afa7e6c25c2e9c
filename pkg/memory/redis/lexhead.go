package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Cached heads of posting lists. Reading postings was most of what a turn
// cost Redis: a posting list is a sorted set (a skip list), and reading
// the best 800 postings of a common term walks 800 nodes scattered over
// the server's memory, about 0.6 us each on the injector benchmark at
// 100,000 memories (a cache miss or two per node), a millisecond of the
// server's one thread per turn. A head is the first postings of a list,
// best impact first, packed in one string (K th:<term>, see lexHeadScript):
// read from one allocation, a few microseconds. Heads are built by the
// read that first needs one and kept for headTTL; the heads hash (K hh:
// term -> "<size> <lowest score in the head>") says which are cached.
//
// A head is exactly the list's first postings at any time: every script
// that changes a posting of a term with a cached head (reindexLexScript,
// relexScript) drops the head when the change is in it (a posting added,
// rescored or removed at a score no lower than the head's lowest; any
// change when the head is the whole list), in the same script, so the
// next read builds it again. A change below the head (a posting of a
// common term that ranks low) keeps it. The lexical channel therefore
// answers what it answered from the sorted sets (TestLexicalHeadsExact).
// A replica from before heads does not drop them: during a rolling
// upgrade its writes to a cached head's list reach the lexical channel
// when that head expires (headTTL).
const (
	headMax = 1024 // the longest head cached; longer reads use ZRANGE
	headMin = 128  // the shortest head built (heads grow by doubling)
	headTTL = time.Minute
)

// headGuardLua is the part of a posting writer's script that drops the
// heads its changes fall in. It expects p (key prefix), id (the
// document), touched (the terms the script changes) and KEYS[3] (the
// heads hash), and defines guard(t, score): call it before changing the
// posting of id in term t, with the new score (nil for a removal).
const headGuardLua = `
local heads = {}
for j0 = 1, #touched, 1000 do
  local part = {}
  for j = j0, math.min(j0 + 999, #touched) do part[#part + 1] = touched[j] end
  local hv = redis.call('HMGET', KEYS[3], unpack(part))
  for j, t in ipairs(part) do
    if hv[j] then heads[t] = tonumber(string.match(hv[j], ' (.*)$')) end
  end
end
local function guard(t, sc)
  local m = heads[t]
  if not m then return end
  local old = redis.call('ZSCORE', p .. 't:' .. t, id)
  if (sc and sc >= m) or (old and tonumber(old) >= m) then
    redis.call('DEL', p .. 'th:' .. t)
    redis.call('HDEL', KEYS[3], t)
    heads[t] = nil
  end
end
`

// lexHeadScript answers the first postings of terms of one project, each
// from its cached head, building the heads missing or too short (the
// smallest size, doubling from headMin, that holds what is asked).
// A head is its size (the postings it holds unless it is the whole list)
// in 4 decimal digits, then each posting as its score in 15 decimal
// digits, its member's length in 6, and the member. The head expires a
// second before its entry in the heads hash, so that a head that exists
// is one the writers see and drop: the reader may GET it without the
// script (readPostings).
//
// KEYS: heads hash. ARGV: key prefix, head TTL in ms, then per list its
// term and how many postings are asked (at most headMax). Reply: per list
// its head (at least the postings asked, or the whole list).
var lexHeadScript = goredis.NewScript(`
local p, ttl = ARGV[1], tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV, 2 do
  local t, n = ARGV[i], tonumber(ARGV[i + 1])
  local hk = p .. 'th:' .. t
  local blob
  local have = redis.call('HGET', KEYS[1], t)
  if have and tonumber(string.match(have, '^(%d+)')) >= n then
    blob = redis.call('GET', hk)
  end
  if not blob then
    local size = ` + strconv.Itoa(headMin) + `
    while size < n do size = size * 2 end
    local zs = redis.call('ZRANGE', p .. 't:' .. t, 0, size - 1, 'REV', 'WITHSCORES')
    local parts = {}
    for j = 1, #zs, 2 do
      local m = zs[j]
      parts[#parts + 1] = string.format('%015.0f%06d', tonumber(zs[j + 1]), #m) .. m
    end
    blob = string.format('%04d', size) .. table.concat(parts)
    local low = '0'
    if #zs / 2 >= size then low = zs[#zs] end
    redis.call('SET', hk, blob, 'PX', ttl)
    redis.call('HSET', KEYS[1], t, size .. ' ' .. low)
    redis.call('HPEXPIRE', KEYS[1], ttl + 1000, 'FIELDS', 1, t)
  end
  out[#out + 1] = blob
end
return out
`)

// parseHead reads the first n postings of a head; ok is false when the
// head is shorter than n postings and not the whole list.
func parseHead(b string, n int64) (ps []goredis.Z, ok bool, err error) {
	if len(b) < 4 {
		return nil, false, fmt.Errorf("redis lexical: head of %d bytes", len(b))
	}
	size, err := strconv.ParseInt(b[:4], 10, 64)
	if err != nil {
		return nil, false, fmt.Errorf("redis lexical: head size %q", b[:4])
	}
	b = b[4:]
	out := make([]goredis.Z, 0, min(n, int64(len(b)/21)))
	for len(b) > 0 && int64(len(out)) < n {
		if len(b) < 21 {
			return nil, false, fmt.Errorf("redis lexical: head record of %d bytes", len(b))
		}
		sc, err1 := strconv.ParseInt(b[:15], 10, 64)
		ln, err2 := strconv.Atoi(b[15:21])
		if err1 != nil || err2 != nil || ln > len(b)-21 {
			return nil, false, fmt.Errorf("redis lexical: head record %q", b[:21])
		}
		out = append(out, goredis.Z{Score: float64(sc), Member: b[21 : 21+ln]})
		b = b[21+ln:]
	}
	return out, int64(len(out)) == n || int64(len(out)) < size, nil
}

// readPostings is step 2 of Lexical: every planned list of every tag.
// The lists read up to headMax are read from their heads: first an MGET
// of each read's heads, in one pipeline with a ZRANGE of each longer
// read; then, for the heads missing or too short, one lexHeadScript per
// tag, which builds them (in steady state the first round is the only
// one).
func (s *Store) readPostings(ctx context.Context, reads []*lexRead) error {
	pipe := s.c.Pipeline()
	// A read's heads in one MGET (they share the project's hash slot):
	// one command instead of one GET a list, about 25 fewer a turn.
	headed := make([][]*postingList, len(reads))
	gets := make([]*goredis.SliceCmd, len(reads))
	for i, r := range reads {
		var hkeys []string
		for _, l := range r.lists {
			l.cmd, l.ps = nil, nil
			switch {
			case l.read <= 0:
			case l.read <= headMax && !s.noHeads:
				headed[i] = append(headed[i], l)
				hkeys = append(hkeys, r.keys.head(l.term()))
			default:
				l.queueRead(ctx, pipe)
			}
		}
		if len(hkeys) > 0 {
			gets[i] = pipe.MGet(ctx, hkeys...)
		}
	}
	// Other projects' reach-anywhere postings in the same round trip.
	jobs := anywhereJobs(reads)
	scripts := make([]*goredis.Cmd, len(jobs))
	for i, j := range jobs {
		keys, args := j.call(s)
		scripts[i] = anywhereScript.EvalSha(ctx, pipe, keys, args...)
	}
	// The scripts come last: a first error that is NOSCRIPT is theirs, the
	// commands before them answered.
	if _, err := pipe.Exec(ctx); err != nil && !goredis.HasErrorPrefix(err, "NOSCRIPT") {
		return s.wrap("lexical postings", err)
	}
	build := make([][]*postingList, len(reads))
	var err error
	for i, r := range reads {
		for _, l := range r.lists {
			if l.cmd != nil {
				l.ps = l.cmd.Val()
			}
		}
		if gets[i] == nil {
			continue
		}
		vals := gets[i].Val()
		if len(vals) != len(headed[i]) {
			return fmt.Errorf("redis lexical: %d heads for %d lists", len(vals), len(headed[i]))
		}
		for j, l := range headed[i] {
			ok := false
			if b, isStr := vals[j].(string); isStr { // nil: no head (yet, or expired)
				if l.ps, ok, err = parseHead(b, l.read); err != nil {
					return err
				}
			}
			if !ok {
				build[i] = append(build[i], l)
			}
		}
	}
	if err := s.buildHeads(ctx, reads, build); err != nil {
		return err
	}
	if noScript(scripts) {
		// Not loaded (a server restarted, a new node): loaded and sent again.
		return s.readAnywhere(ctx, jobs)
	}
	replies := make([][]string, len(scripts))
	for i, c := range scripts {
		if replies[i], err = c.StringSlice(); err != nil {
			return s.wrap("lexical reach-anywhere postings", err)
		}
	}
	return s.keepAnywhere(ctx, jobs, replies)
}

// noScript reports whether one of cmds failed because its script was not
// loaded on the server (NOSCRIPT).
func noScript(cmds []*goredis.Cmd) bool {
	for _, c := range cmds {
		if err := c.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
			return true
		}
	}
	return false
}

// queueRead queues the read of l's best l.read postings on pipe (into
// l.cmd).
func (l *postingList) queueRead(ctx context.Context, pipe goredis.Pipeliner) {
	l.cmd = pipe.ZRangeArgsWithScores(ctx, goredis.ZRangeArgs{Key: l.key, Start: 0, Stop: l.read - 1, Rev: true})
}

// buildHeads reads the lists of build (per read) with lexHeadScript, one
// per tag in one pipeline.
func (s *Store) buildHeads(ctx context.Context, reads []*lexRead, build [][]*postingList) error {
	var idx []int
	for i := range reads {
		if len(build[i]) > 0 {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	ttl := headTTL.Milliseconds()
	blobs, err := s.evalTags(ctx, lexHeadScript, len(idx), func(j int) ([]string, []any) {
		r := reads[idx[j]]
		args := []any{r.keys.p, ttl}
		for _, l := range build[idx[j]] {
			args = append(args, l.term(), l.read)
		}
		return []string{r.keys.heads()}, args
	})
	if err != nil {
		return s.wrap("lexical postings", err)
	}
	for j, i := range idx {
		if len(blobs[j]) != len(build[i]) {
			return fmt.Errorf("redis lexical: %d heads for %d lists", len(blobs[j]), len(build[i]))
		}
		for m, l := range build[i] {
			if l.ps, _, err = parseHead(blobs[j][m], l.read); err != nil {
				return err
			}
		}
	}
	return nil
}
