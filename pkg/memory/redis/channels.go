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

// maxExpansions is how many dictionary terms one query term may expand to
// as a prefix (the exact term first: it sorts first).
const maxExpansions = 48

// lexicalScript is the lexical channel of one project, computed on the
// server: each query term is expanded as a prefix over the term
// dictionary (ZRANGEBYLEX); BM25 (k1 1.2, b 0.75) is summed over query
// terms, taking per query term the best of its expansions; the documents
// are then tested best first against the filter (memory.Visible, written in
// Lua below) until limit pass.
//
// KEYS: terms dictionary, corpus stats. ARGV: key prefix, now (unix ns),
// limit, kind (o own, g global, f foreign), session, include archived,
// include superseded, min confidence, subkinds (comma list), max
// expansions, query terms...
var lexicalScript = goredis.NewScript(`
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
local maxExp = tonumber(ARGV[10])
local st = redis.call('HMGET', KEYS[2], 'n', 'l')
local N = tonumber(st[1]) or 0
if N <= 0 then return {} end
local avgdl = (tonumber(st[2]) or 0) / N
if avgdl <= 0 then avgdl = 1 end
local k1, b = 1.2, 0.75
local norm = k1 * (1 - b)
local normdl = k1 * b / avgdl
local scores = {}
for qi = 11, #ARGV do
  local q = ARGV[qi]
  local terms = redis.call('ZRANGEBYLEX', KEYS[1], '[' .. q, '[' .. q .. '\255', 'LIMIT', 0, maxExp)
  local best = nil
  if #terms > 1 then best = {} end
  for _, t in ipairs(terms) do
    local post = redis.call('ZRANGE', p .. 't:' .. t, 0, -1, 'WITHSCORES')
    local df = #post / 2
    if df > 0 then
      local idf = math.log(1 + (N - df + 0.5) / (df + 0.5))
      local w = idf * (k1 + 1)
      for j = 1, #post, 2 do
        local sc = tonumber(post[j + 1])
        local tf = math.floor(sc / 65536)
        local dl = sc - tf * 65536
        local s = w * tf / (tf + norm + normdl * dl)
        local id = post[j]
        if best then
          local o = best[id]
          if o == nil or o < s then best[id] = s end
        else
          scores[id] = (scores[id] or 0) + s
        end
      end
    end
  end
  if best then
    for id, s in pairs(best) do scores[id] = (scores[id] or 0) + s end
  end
end
local ids = {}
for id in pairs(scores) do ids[#ids + 1] = id end
table.sort(ids, function(x, y)
  local a, c = scores[x], scores[y]
  if a ~= c then return a > c end
  return x < y
end)
local out = {}
local found = 0
for _, id in ipairs(ids) do
  local f = redis.call('HMGET', p .. 'n:' .. id, 'sc', 'ss', 'rc', 'ar', 'sb', 'vt', 'cf', 'sk')
  local ok = f[1] ~= false
  if ok and f[1] == 'session' then
    ok = kind == 'o' and (f[2] or '') == sess
  end
  if ok and kind == 'f' then ok = f[3] == 'anywhere' end
  if ok and not inclA and f[4] then ok = false end
  if ok and not inclS then
    if f[5] then ok = false
    elseif f[6] and tonumber(f[6]) <= now then ok = false end
  end
  if ok and (tonumber(f[7]) or 0) < minc then ok = false end
  if ok and sks and not sks[f[8] or ''] then ok = false end
  if ok then
    out[#out + 1] = id
    out[#out + 1] = string.format('%.17g', scores[id])
    found = found + 1
    if found >= limit then break end
  end
end
return out
`)

// kindArg is how the lexical script names a project's relation to the filter.
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

// Lexical is BM25 over label, body, paths and entity names, computed on the
// server per project (one script call per project read).
func (s *Store) Lexical(ctx context.Context, terms []string, f memory.Filter, limit int) ([]memory.Scored, error) {
	limit = memory.Limit(limit)
	var qs []string
	for _, t := range terms {
		t = cutTerm(strings.ToLower(strings.TrimSpace(t)))
		if t != "" && !slices.Contains(qs, t) {
			qs = append(qs, t)
		}
	}
	if len(qs) == 0 {
		return nil, nil
	}
	tags, err := s.scopeTags(ctx, f)
	if err != nil {
		return nil, err
	}
	var sks []string
	for _, sk := range f.Subkinds {
		sks = append(sks, string(sk))
	}
	if len(f.Subkinds) > 0 && len(sks) == 0 {
		return nil, nil
	}
	now := strconv.FormatInt(s.now().UnixNano(), 10)
	var all []memory.Scored
	for _, t := range tags {
		k := s.keys(t.project)
		args := []any{k.p, now, limit, kindArg(t.kind, f), f.SessionID, b01(f.IncludeArchived),
			b01(f.IncludeSuperseded), fmtFloat(f.MinConfidence), strings.Join(sks, ","), maxExpansions}
		for _, q := range qs {
			args = append(args, q)
		}
		res, err := lexicalScript.Run(ctx, s.c, []string{k.terms(), k.stats()}, args...).StringSlice()
		if err != nil {
			return nil, s.wrap("lexical", err)
		}
		for i := 0; i+1 < len(res); i += 2 {
			sc, err := strconv.ParseFloat(res[i+1], 64)
			if err != nil {
				return nil, fmt.Errorf("redis lexical: bad score %q: %w", res[i+1], err)
			}
			all = append(all, memory.Scored{ID: res[i], Score: sc})
		}
	}
	return topScored(all, limit), nil
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

// Vector is cosine similarity on the vector set of model, filtered on the
// server (VSIM FILTER); nodes embedded by another model are not in that
// set. Scores are cosine similarities; only positive ones are returned.
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
	now := s.now().UnixNano()
	blob := &goredis.VectorFP32{Val: encodeVector(vec)}
	var all []memory.Scored
	for _, t := range tags {
		key := s.keys(t.project).vectors(model)
		args := &goredis.VSimArgs{
			Count:  int64(limit),
			EF:     int64(max(4*limit, 200)),
			Filter: vectorFilter(f, t.kind, now),
		}
		res, err := vsim(ctx, s.c, key, blob, args)
		if err != nil {
			return nil, s.wrap("vector", err)
		}
		for _, r := range res {
			// VSIM's score is (1 + cosine) / 2.
			cos := 2*r.Score - 1
			if cos > 0 {
				all = append(all, memory.Scored{ID: r.Name, Score: cos})
			}
		}
	}
	return topScored(all, limit), nil
}

// vsim runs VSIM on a set that may not exist (no result) or have another
// dimension (ErrInvalid).
func vsim(ctx context.Context, c goredis.UniversalClient, key string, v goredis.Vector, args *goredis.VSimArgs) ([]goredis.VectorScore, error) {
	res, err := c.VSimWithArgsWithScores(ctx, key, v, args).Result()
	if err == nil {
		return res, nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "key does not exist"):
		return nil, nil
	case strings.Contains(msg, "dimension"):
		return nil, fmt.Errorf("%w: %v", memory.ErrInvalid, err)
	}
	return nil, err
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
		nodes, err := s.loadTagNodes(ctx, t.project, ids)
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
