package redis

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// The reach registry: the spaces that hold, or held, a node of reach
// anywhere. Cross-project recall (memory.Filter.CrossProject, the
// injector's default) reads the tenant's other projects for such nodes
// only; with the whole project registry it searched every project of the
// namespace, each a lexical query and a vector search, for a turn: 63-134
// ms of Redis CPU a turn at 100 projects of 1,000 memories, where a
// project's own search costs 0.6 ms (docs/benchmarks.md). A project with
// no such node has nothing to give another one.
//
// Every write of a node of reach anywhere adds its space first (markReach:
// one SADD per space per registryRecheck and process), so a reader that
// finds a node's space missing can only be a reader whose copy (reachList,
// registryTTL old at most) predates the write, as with the project
// registry. The registry only grows (but for erasures): a space whose
// last such node changed reach stays, and costs its searches. Reads trust
// it from FormatReach on: a replica of an earlier version writes nodes
// without marking, and FinishUpgrade adds every space that holds one. A
// replica caches what it marked for registryRecheck, as it does for the
// project registry: a space erased whole, then written again by another
// replica within that time, is not marked again until its next write of
// such a node after that.
//
// Of each such project a cross-project lexical read takes the
// reach-anywhere postings (writeAnywhere, anywhereScript), not the posting
// lists, which name every memory of the project, in the round trip that
// reads the searched projects' posting heads (readPostings; readAnywhere
// when the server answered NOSCRIPT).

func (s *Store) reachKey() string { return s.ns + ":{r}:reach" }

// markReach adds the space of each node of reach anywhere among nodes to
// the reach registry: called before the write of the nodes (outside its
// transaction: the registry is in another slot).
func (s *Store) markReach(ctx context.Context, nodes ...*memory.Node) error {
	for _, n := range nodes {
		if n == nil || n.Reach != memory.ReachAnywhere {
			continue
		}
		sp := spaceOf(n)
		s.mu.Lock()
		at, ok := s.reach[sp]
		s.mu.Unlock()
		if ok && time.Since(at) < registryRecheck {
			continue
		}
		added, err := s.c.SAdd(ctx, s.reachKey(), sp).Result()
		if err != nil {
			return s.wrap("register reach", err)
		}
		s.mu.Lock()
		s.reach[sp] = time.Now()
		s.mu.Unlock()
		if added == 1 {
			s.reachList.invalidate() // this process's reads see it at once
		}
	}
	return nil
}

// reachReads reports whether cross-project reads take the reach registry
// and the reach-anywhere postings and vector sets (FormatReach; tests turn
// it off to compare with the reads before it).
func (s *Store) reachReads(ctx context.Context) bool {
	return !s.noAnywhere && s.CurrentFormat(ctx) >= FormatReach
}

// crossSpaces lists the spaces that cross-project recall reads for nodes
// of reach anywhere, sorted (shared: callers must not modify it): the
// reach registry from FormatReach on, every registered space before.
func (s *Store) crossSpaces(ctx context.Context) ([]string, error) {
	if s.reachReads(ctx) {
		return s.reachList.get(ctx, s.regTTL, func(ctx context.Context) ([]string, error) {
			ps, err := s.c.SMembers(ctx, s.reachKey()).Result()
			if err != nil {
				return nil, s.wrap("list reach", err)
			}
			return ps, nil
		})
	}
	return s.recallProjects(ctx)
}

// statsTags lists, for a CrossProject lexical read at FormatReach, the
// tenant's other registered projects that tags (scopeTags) leave out:
// those holding no memory of reach anywhere. Nothing of them is read, but
// their statistics count (tagStats, planReads), as they did when every
// project was read: a query's BM25 statistics are those of the tenant's
// projects together (weigh), and a small project's own would rank its
// memories otherwise (LongMemEval-dev on Redis, each question its own
// project: R@1 0.478 -> 0.440 without them). That is a dictionary read
// and an HMGET of document frequencies a project (the dictionary cached,
// see lexdict.go), not a search.
func (s *Store) statsTags(ctx context.Context, f memory.Filter, tags []scopeTag) ([]scopeTag, error) {
	if !f.CrossProject || !s.reachReads(ctx) {
		return nil, nil
	}
	ps, err := s.recallProjects(ctx)
	if err != nil {
		return nil, err
	}
	read := make(map[string]bool, len(tags))
	for _, t := range tags {
		read[t.project] = true
	}
	var out []scopeTag
	for _, p := range ps {
		if r := unspace(p); r.Tenant == f.TenantID && r.Project != "" && r.Project != f.ProjectID && !read[p] {
			out = append(out, scopeTag{project: p, kind: tagStats})
		}
	}
	return out, nil
}

// rebuildReach adds sp to the reach registry when its visibility hash
// holds a node of reach anywhere, and each such node to its terms'
// reach-anywhere postings (writeAnywhere) and its vector to the
// reach-anywhere vector set of its model (va:<model>), for FinishUpgrade:
// a replica of an earlier version writes none of them. It writes a node's
// entries only while the node's filter fields are those its scan read
// (addIfScript, vaddIfScript), so a writer's change since, or an erasure,
// is not undone. Members an earlier version's edits left there (a node it
// moved out of reach anywhere) stay: a read judges them by their filter
// fields, and finds no score for a term the node lost. It reports whether
// it found such a node.
func (s *Store) rebuildReach(ctx context.Context, sp string) (bool, error) {
	k := s.keys(sp)
	found := false
	var cursor uint64
	for {
		kv, next, err := s.c.HScan(ctx, k.vis(), cursor, "", upgradePage).Result()
		if err != nil {
			return false, err
		}
		var ids []string
		vis := map[string]string{}
		for j := 0; j+1 < len(kv); j += 2 {
			if n, ok := fieldsNode(kv[j+1], sp); ok && n.Reach == memory.ReachAnywhere {
				ids = append(ids, kv[j])
				vis[kv[j]] = kv[j+1]
			}
		}
		if len(ids) > 0 {
			if !found {
				if err := s.c.SAdd(ctx, s.reachKey(), sp).Err(); err != nil {
					return false, err
				}
				s.reachList.invalidate()
				found = true
			}
			nodes, err := s.loadTagNodes(ctx, sp, ids, true)
			if err != nil {
				return false, err
			}
			pipe := s.c.Pipeline()
			for i := range nodes {
				n := &nodes[i]
				if n.Reach != memory.ReachAnywhere {
					continue // changed since the scan
				}
				// Each write only while the node's filter fields are
				// those the scan read: a writer's change or an erasure
				// since is not undone.
				tf, _ := docTokens(n)
				args := []any{n.ID, vis[n.ID], k.p}
				for t := range tf {
					args = append(args, t)
				}
				addIfScript.Eval(ctx, pipe, []string{k.vis()}, args...)
				if len(n.Embedding) > 0 && n.EmbeddingModel != "" {
					vaddIfScript.Eval(ctx, pipe, []string{k.anywhereVectors(n.EmbeddingModel), k.node(n.ID), k.vis()},
						strings.ToUpper(s.quant), n.ID, encodeVector(n.Embedding), vectorAttrs(n), fVector, vis[n.ID])
				}
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return false, err
			}
		}
		if cursor = next; cursor == 0 {
			return found, nil
		}
	}
}

// spaceList is a registry set as this process last read it (sorted, never
// mutated once kept), and when: reads within a TTL take the copy instead
// of a round trip.
type spaceList struct {
	mu   sync.Mutex
	list []string
	at   time.Time
	gen  uint64 // bumped by invalidate
}

// get returns the copy when it is younger than ttl, or reads the set
// again with read (sorted and kept unless invalidate ran meanwhile: the
// read may predate what invalidated it).
func (l *spaceList) get(ctx context.Context, ttl time.Duration, read func(context.Context) ([]string, error)) ([]string, error) {
	l.mu.Lock()
	list, at, gen := l.list, l.at, l.gen
	l.mu.Unlock()
	if !at.IsZero() && time.Since(at) < ttl {
		return list, nil
	}
	start := time.Now()
	ps, err := read(ctx)
	if err != nil {
		return nil, err
	}
	slices.Sort(ps)
	l.mu.Lock()
	if l.gen == gen {
		l.list, l.at = ps, start
	}
	l.mu.Unlock()
	return ps, nil
}

// invalidate makes the next get read the set.
func (l *spaceList) invalidate() {
	l.mu.Lock()
	l.at, l.gen = time.Time{}, l.gen+1
	l.mu.Unlock()
}

// writeAnywhere queues, in the MULTI of the node's slot, the changes of a
// node's entries in its project's reach-anywhere postings: per term a set
// (at:<term>) of the ids of the project's nodes of reach anywhere that
// hold it. Cross-project reads take these sets, and the scores of their
// members from the project's posting lists, instead of reading the lists
// themselves and judging most of what they name invisible (a memory that
// does not reach anywhere): at 100 projects of 1,000 with one memory in a
// hundred reaching anywhere, that was 45 ms of Redis' CPU and 130 ms of the
// injector's a turn. wasAny and isAny say whether the node reached anywhere
// before and after the write, oldTF and newTF its terms.
func writeAnywhere(ctx context.Context, pipe goredis.Pipeliner, lw *tagWrites, k keys, id string, wasAny, isAny bool, oldTF, newTF map[string]int) {
	if wasAny {
		for t := range oldTF {
			if _, kept := newTF[t]; !isAny || !kept {
				pipe.SRem(ctx, k.anywhere(t), id)
			}
		}
	}
	if isAny {
		for t := range newTF {
			if _, had := oldTF[t]; !wasAny || !had {
				lw.sadd(k.anywhere(t), id)
			}
		}
	}
}

// addIfScript adds a node (ARGV[1]) to the reach-anywhere postings of
// terms (ARGV[4...]; ARGV[3]: the key prefix) while the project's vis hash
// (KEYS[1]) holds the filter fields ARGV[2] for it (rebuildReach).
var addIfScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
for i = 4, #ARGV do redis.call('SADD', ARGV[3] .. 'at:' .. ARGV[i], ARGV[1]) end
return 1
`)

// anywhereScript reads one project's reach-anywhere postings of some
// terms: per term, the members of its set (writeAnywhere) with their
// scores in the term's posting list (members no longer in the list, left
// by an earlier version's edit, are skipped), or -1 when the set holds
// more than the most asked for (the caller reads the list instead).
//
// KEYS: the project's corpus statistics (the slot). ARGV: key prefix, the
// most members, then the terms. Reply: per term the number of postings
// (or -1), then member, score pairs.
var anywhereScript = goredis.NewScript(`
local p = ARGV[1]
local most = tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV do
  local t = ARGV[i]
  if redis.call('SCARD', p .. 'at:' .. t) > most then
    out[#out + 1] = '-1'
  else
    local ids = redis.call('SMEMBERS', p .. 'at:' .. t)
    local part = {}
    for j = 1, #ids, 500 do
      local chunk = {}
      for x = j, math.min(j + 499, #ids) do chunk[#chunk + 1] = ids[x] end
      local sc = redis.call('ZMSCORE', p .. 't:' .. t, unpack(chunk))
      for x = 1, #chunk do
        if sc[x] then
          part[#part + 1] = chunk[x]
          part[#part + 1] = sc[x]
        end
      end
    end
    out[#out + 1] = tostring(#part / 2)
    for _, v in ipairs(part) do out[#out + 1] = v end
  end
end
return out
`)

// anywhereJob is the reach-anywhere read of one project (readPostings):
// its lists that are another project's (subset, from FormatReach:
// planReads), read from their reach-anywhere postings by anywhereScript
// (a few members each, where the lists hold every memory of the project).
type anywhereJob struct {
	r     *lexRead
	lists []*postingList
}

// anywhereJobs is the reach-anywhere reads of reads (nil for none).
func anywhereJobs(reads []*lexRead) []anywhereJob {
	var jobs []anywhereJob
	for _, r := range reads {
		if r.tag.kind == tagStats {
			continue
		}
		var ls []*postingList
		for _, l := range r.lists {
			if l.subset {
				ls = append(ls, l)
			}
		}
		if len(ls) > 0 {
			jobs = append(jobs, anywhereJob{r, ls})
		}
	}
	return jobs
}

// call is the job's script call: its keys and arguments.
func (j anywhereJob) call(s *Store) ([]string, []any) {
	args := []any{j.r.keys.p, s.anywhereMax}
	for _, l := range j.lists {
		args = append(args, l.term())
	}
	return []string{j.r.keys.stats()}, args
}

// readAnywhere reads the jobs' postings, one script a project in one
// pipeline (readPostings sends them with the posting heads instead, and
// comes here when the script was not loaded).
func (s *Store) readAnywhere(ctx context.Context, jobs []anywhereJob) error {
	if len(jobs) == 0 {
		return nil
	}
	replies, err := s.evalTags(ctx, anywhereScript, len(jobs), func(i int) ([]string, []any) { return jobs[i].call(s) })
	if err != nil {
		return s.wrap("lexical reach-anywhere postings", err)
	}
	return s.keepAnywhere(ctx, jobs, replies)
}

// keepAnywhere keeps the jobs' script replies as their lists' postings,
// and reads as lists those of which the project holds too many that reach
// anywhere.
func (s *Store) keepAnywhere(ctx context.Context, jobs []anywhereJob, replies [][]string) error {
	var whole []*postingList // lists read as lists after all
	for i, j := range jobs {
		d := replies[i]
		at := 0
		for _, l := range j.lists {
			if at >= len(d) {
				return fmt.Errorf("redis lexical: reach-anywhere reply of %d values for %d lists", len(d), len(j.lists))
			}
			n, err := strconv.Atoi(d[at])
			if n == -1 && err == nil {
				// Too many: the list is read as planned for it, and its
				// postings judged by their filter fields.
				l.subset, l.read = false, l.planned
				l.truncated = l.read > 0 && l.read < l.df
				if l.read > 0 {
					whole = append(whole, l)
				}
				at++
				continue
			}
			if err != nil || n < 0 || at+1+2*n > len(d) {
				return fmt.Errorf("redis lexical: reach-anywhere reply: count %q", d[at])
			}
			ps := make([]goredis.Z, n)
			for m := range n {
				sc, err := strconv.ParseFloat(d[at+2+2*m], 64)
				if err != nil {
					return fmt.Errorf("redis lexical: reach-anywhere score %q", d[at+2+2*m])
				}
				ps[m] = goredis.Z{Member: d[at+1+2*m], Score: sc}
			}
			// As a list reads (ZRANGE REV): best first, equal scores in
			// reverse member order.
			slices.SortFunc(ps, func(a, b goredis.Z) int {
				if c := cmp.Compare(b.Score, a.Score); c != 0 {
					return c
				}
				return strings.Compare(b.Member.(string), a.Member.(string))
			})
			l.ps, l.read = ps, int64(n)
			at += 1 + 2*n
		}
	}
	if len(whole) == 0 {
		return nil
	}
	pipe := s.c.Pipeline()
	for _, l := range whole {
		l.queueRead(ctx, pipe)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return s.wrap("lexical postings", err)
	}
	for _, l := range whole {
		l.ps = l.cmd.Val()
	}
	return nil
}

// anywhereReadMax is the most reach-anywhere postings of one term read in
// a project: past it the term's list is read instead, as far as the read
// budget goes (a project whose memories mostly reach anywhere, a common
// term), and its postings judged by their filter fields.
const anywhereReadMax = 2048
