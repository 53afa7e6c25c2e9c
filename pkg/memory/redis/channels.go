package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// luaVisible starts the vector script, which filters on the server:
// memory.Visible over the filter fields of nodes (visibleMany), for one
// project's keys (the lexical channel reads the same fields into Go:
// visibleFields). ARGV 1-9: key
// prefix, now (unix ns), limit, kind (o: the filter's own project, g:
// global memories read for a project, f: a foreign project read
// cross-project), session id, include archived (0/1), include superseded
// (0/1), min confidence, subkinds (comma list, empty: all).
// TestServerFiltersMatchVisible checks it against memory.Visible.
const luaVisible = `
local p = ARGV[1]
local now = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local kind = ARGV[4]
local sess = ARGV[5]
local inclA = ARGV[6] == '1'
local inclS = ARGV[7] == '1'
local minc = tonumber(ARGV[8])
local sks = nil
if ARGV[9] ~= '' then
  sks = {}
  for sk in string.gmatch(ARGV[9], '[^,]+') do sks[sk] = true end
end
-- judge is memory.Visible over a node's filter fields (false: absent).
local function judge(sc, ss, rc, ar, sb, vt, cf, sk)
  if not sc then return false end
  if sc == 'session' and not (kind == 'o' and (ss or '') == sess) then return false end
  if kind == 'f' and rc ~= 'anywhere' then return false end
  if not inclA and ar then return false end
  if not inclS then
    if sb then return false end
    if vt and tonumber(vt) <= now then return false end
  end
  if (tonumber(cf) or 0) < minc then return false end
  if sks and not sks[sk or ''] then return false end
  return true
end
local function nz(v)
  if v == '' then return false end
  return v
end
-- visibleMany tells which of ids[from..to] pass the filter: one HMGET of
-- the project's filter-field hash (see filterFields; every node write keeps
-- it, and a missing entry is a missing node).
local function visibleMany(ids, from, to)
  local args = {}
  for i = from, to do args[#args + 1] = ids[i] end
  local ok = {}
  if #args == 0 then return ok end
  local packed = redis.call('HMGET', p .. 'vis', unpack(args))
  for j = 1, #args do
    local v = packed[j]
    if v then
      local sc, rc, ar, sb, vt, cf, sk, ss = string.match(v,
        '^([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31(.*)$')
      ok[j] = judge(nz(sc), nz(ss), nz(rc), nz(ar), nz(sb), nz(vt), nz(cf), nz(sk))
    else
      ok[j] = false
    end
  end
  return ok
end
-- visitVisible calls take(i) for the visible ids of list in order, judging
-- them a chunk at a time, until take returns true (enough).
local function visitVisible(list, want, take)
  local i, n = 1, #list
  while i <= n do
    local to = math.min(n, i + want + 9)
    local ok = visibleMany(list, i, to)
    for j = i, to do
      if ok[j - i + 1] and take(j) then return end
    end
    i = to + 1
  end
end
`

// kindArg is how the channel scripts name a project's relation to the filter.
func kindArg(k tagKind, f memory.Filter) string {
	switch k {
	case tagForeign:
		return "f"
	case tagGlobal:
		if f.ProjectID != "" {
			return "g"
		}
	}
	return "o"
}

func b01(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// evalTags runs script once per scope tag (call gives each run's keys and
// arguments) in one pipeline: one round trip, which a cluster client splits
// by node. When a server lacks the script it is loaded (on every shard)
// and the pipeline sent again.
func (s *Store) evalTags(ctx context.Context, script *goredis.Script, n int, call func(i int) ([]string, []any)) ([][]string, error) {
	for attempt := 0; ; attempt++ {
		cmds := make([]*goredis.Cmd, n)
		_, err := s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i := range n {
				keys, args := call(i)
				cmds[i] = script.EvalSha(ctx, p, keys, args...)
			}
			return nil
		})
		if err != nil && attempt == 0 && goredis.HasErrorPrefix(err, "NOSCRIPT") {
			if err := script.Load(ctx, s.c).Err(); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		out := make([][]string, n)
		for i, c := range cmds {
			if out[i], err = c.StringSlice(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}

func topScored(all []memory.Scored, limit int) []memory.Scored {
	slices.SortFunc(all, func(a, b memory.Scored) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	if len(all) > limit {
		all = all[:limit]
	}
	return all
}

// vectorScript is the vector channel of one project. VSIM's own FILTER is
// exact but slow in Redis 8.0 (it parses every visited element's JSON
// attributes: about 20-30 ms at 10,000 elements even when nearly all pass),
// so the script asks VSIM for more neighbours than needed, unfiltered, and
// keeps the visible ones (luaVisible), widening the search four times over
// while too few pass; only a heavily filtered query falls back to VSIM
// FILTER with the attributes (vectorAttrs, vectorFilter).
//
// KEYS: the vector set. ARGV: the filter arguments of luaVisible (1-9),
// query vector (FP32 blob), first count, EF, the FILTER expression, widest
// unfiltered count.
var vectorScript = goredis.NewScript(luaVisible + `
local blob, count, ef, expr, widest = ARGV[10], tonumber(ARGV[11]), tonumber(ARGV[12]), ARGV[13], tonumber(ARGV[14])
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
local card = redis.call('VCARD', KEYS[1])
while true do
  local res = redis.call('VSIM', KEYS[1], 'FP32', blob, 'WITHSCORES', 'COUNT', count, 'EF', math.max(ef, count))
  local out = {}
  local found = 0
  local ids = {}
  for j = 1, #res, 2 do ids[#ids + 1] = res[j] end
  visitVisible(ids, limit, function(i)
    out[#out + 1] = res[2 * i - 1]
    out[#out + 1] = res[2 * i]
    found = found + 1
    return found >= limit
  end)
  if found >= limit then return out end
  if #res / 2 < count or count >= card then return out end
  if count >= widest then break end
  count = math.min(count * 4, widest)
end
return redis.call('VSIM', KEYS[1], 'FP32', blob, 'WITHSCORES', 'COUNT', limit, 'EF', math.max(ef, limit),
  'FILTER', expr, 'FILTER-EF', math.max(limit * 100, card))
`)

// Vector is cosine similarity on the vector set of model (nodes embedded
// by another model are not in that set), filtered on the server. Scores are
// cosine similarities; only positive ones are returned.
func (s *Store) Vector(ctx context.Context, model string, vec []float32, f memory.Filter, limit int) ([]memory.Scored, error) {
	limit = memory.Limit(limit)
	if model == "" || len(vec) == 0 {
		return nil, fmt.Errorf("%w: the vector channel needs a model and a vector", memory.ErrInvalid)
	}
	if !finiteVec(vec) {
		return nil, fmt.Errorf("%w: the query vector holds a value that is not a finite number", memory.ErrInvalid)
	}
	tags, err := s.scopeTags(ctx, f)
	if err != nil {
		return nil, err
	}
	sks, none := subkindsArg(f)
	if none {
		return nil, nil
	}
	now := s.now().UnixNano()
	blob := string(encodeVector(vec))
	results, err := s.evalTags(ctx, vectorScript, len(tags), func(i int) ([]string, []any) {
		t := tags[i]
		k := s.keys(t.project)
		args := filterArgs(k, now, limit, t.kind, f, sks)
		args = append(args, blob, limit+limit/2+8, max(2*limit, 100), vectorFilter(f, t.kind, now), max(16*limit, 1000))
		return []string{k.vectors(model)}, args
	})
	if err != nil {
		if strings.Contains(err.Error(), "dimension") {
			return nil, fmt.Errorf("%w: %v", memory.ErrInvalid, err)
		}
		return nil, s.wrap("vector", err)
	}
	var all []memory.Scored
	for _, res := range results {
		for i := 0; i+1 < len(res); i += 2 {
			sc, err := strconv.ParseFloat(res[i+1], 64)
			if err != nil {
				return nil, fmt.Errorf("redis vector: bad score %q: %w", res[i+1], err)
			}
			// VSIM's score is (1 + cosine) / 2.
			if cos := 2*sc - 1; cos > 0 {
				all = append(all, memory.Scored{ID: res[i], Score: cos})
			}
		}
	}
	return topScored(all, limit), nil
}

// subkindsArg is the subkinds argument of luaVisible; none reports a
// filter that names only unknown subkinds (nothing can match).
func subkindsArg(f memory.Filter) (arg string, none bool) {
	var sks []string
	for _, sk := range f.Subkinds {
		if sk.Valid() {
			sks = append(sks, string(sk))
		}
	}
	return strings.Join(sks, ","), len(f.Subkinds) > 0 && len(sks) == 0
}

// filterArgs are ARGV 1-9 of luaVisible.
func filterArgs(k keys, now int64, limit int, kind tagKind, f memory.Filter, sks string) []any {
	return []any{k.p, strconv.FormatInt(now, 10), limit, kindArg(kind, f), f.SessionID, b01(f.IncludeArchived),
		b01(f.IncludeSuperseded), fmtFloat(f.MinConfidence), sks}
}

// ByPaths returns the nodes attached to any of paths, scored by the number
// of the given paths each is attached to (ties: newest update first).
func (s *Store) ByPaths(ctx context.Context, paths []string, f memory.Filter, limit int) ([]memory.Scored, error) {
	limit = memory.Limit(limit)
	paths = memory.NormalisePaths(paths)
	if len(paths) == 0 {
		return nil, nil
	}
	tags, err := s.scopeTags(ctx, f)
	if err != nil {
		return nil, err
	}
	now := s.now()
	type hit struct {
		n     memory.Node
		count int
	}
	var hits []hit
	for _, t := range tags {
		k := s.keys(t.project)
		pipe := s.c.Pipeline()
		cmds := make([]*goredis.StringSliceCmd, len(paths))
		for i, p := range paths {
			cmds[i] = pipe.SMembers(ctx, k.path(p))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, s.wrap("by paths", err)
		}
		counts := map[string]int{}
		var ids []string
		for _, c := range cmds {
			for _, id := range c.Val() {
				if counts[id] == 0 {
					ids = append(ids, id)
				}
				counts[id]++
			}
		}
		nodes, err := s.loadTagNodes(ctx, t.project, ids, false)
		if err != nil {
			return nil, err
		}
		for i := range nodes {
			if memory.Visible(&nodes[i], f, now) {
				hits = append(hits, hit{nodes[i], counts[nodes[i].ID]})
			}
		}
	}
	slices.SortFunc(hits, func(a, b hit) int {
		if a.count != b.count {
			return b.count - a.count
		}
		return memory.CompareTimeline(&a.n, &b.n)
	})
	out := make([]memory.Scored, 0, min(limit, len(hits)))
	for _, h := range hits {
		if len(out) == limit {
			break
		}
		out = append(out, memory.Scored{ID: h.n.ID, Score: float64(h.count)})
	}
	return out, nil
}
