package redis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// LegacyHash is n in the per-attribute hash form written before packed
// nodes (for the compatibility test).
func LegacyHash(n *memory.Node) map[string]any { return encodeNode(n) }

// NodeKey is the key of a node's hash.
func NodeKey(s *Store, project, id string) string { return s.keys(project).node(id) }

// FieldPacked and FieldVector name the fields of a packed node hash.
const (
	FieldPacked = fPacked
	FieldVector = fVector
)

// SetLexicalBudget sets how many postings a lexical query reads per
// project, and at least per query term.
func SetLexicalBudget(s *Store, budget, minPerTerm int) {
	s.lexBudget, s.lexMinPer = budget, minPerTerm
}

// ReadHeads sets whether lexical reads use the cached heads of posting
// lists (on by default) or the sorted sets themselves.
func ReadHeads(s *Store, on bool) { s.noHeads = !on }

// HeadKey is the key of a term's cached head in a project.
func HeadKey(s *Store, project, term string) string { return s.keys(project).head(term) }

// BriefKnown reports whether s remembers ref's briefing flag as taken now.
func BriefKnown(s *Store, ref memory.SessionRef) bool { return s.briefs.Taken(ref, s.now().UnixNano()) }

// Namespace is the key namespace of s.
func Namespace(s *Store) string { return s.ns }

// VectorKey is the key of a project's vector set of model.
func VectorKey(s *Store, project, model string) string { return s.keys(project).vectors(model) }

// SetRegistryTTL sets how long cross-project recall trusts its copy of the
// project registry.
func SetRegistryTTL(s *Store, d time.Duration) { s.regTTL = d }

// ContradictionHintsKey is the key of a project's contradiction hints.
func ContradictionHintsKey(s *Store, project string) string { return s.keys(project).contradicting() }

// PlannedReads is how many postings a lexical query of terms plans to
// read (over the filter's scope tags), after the dictionary step.
func PlannedReads(ctx context.Context, s *Store, f memory.Filter, terms []string, limit int) (int64, error) {
	tags, err := s.scopeTags(ctx, f)
	if err != nil {
		return 0, err
	}
	reads, err := s.planReads(ctx, tags, memory.LexTerms(terms), max(s.lexMinPer, limit))
	var n int64
	for _, r := range reads {
		for _, l := range r.lists {
			n += l.read
		}
	}
	return n, err
}

// SmallSet reports whether s searches the vector set key on the server's
// main thread (it last answered fewer neighbours than asked).
func SmallSet(s *Store, key string) bool {
	_, ok := s.smallSets.Load(key)
	return ok
}

// WithLabelRepeats runs f while docTokens counts the label n times (1:
// the postings of lexical index version 1), for the migration test.
func WithLabelRepeats(n int, f func()) {
	old := labelRepeats
	labelRepeats = n
	defer func() { labelRepeats = old }()
	f()
}

// StatsKey is the key of a scope's corpus statistics.
func StatsKey(s *Store, project string) string { return s.keys(project).stats() }

// The default lexical read budget (SetLexicalBudget restores it).
const (
	DefaultLexicalBudget     = lexicalBudget
	DefaultLexicalMinPerTerm = lexicalMinPerTerm
)

func ConversationKey(s *Store, project, session string) string {
	return s.keys(project).conversation(session)
}

// Dictionaries answers the lexical dictionary step of terms over the
// filter's scope tags twice: from the cached ranges (with the server's
// plain reads) and from lexDictScript alone.
func Dictionaries(ctx context.Context, s *Store, f memory.Filter, terms []string) (cached, script [][]string, err error) {
	tags, err := s.scopeTags(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	qs := memory.LexTerms(terms)
	args := dictArgs(qs)
	if cached, err = s.dictionaries(ctx, tags, qs, args); err != nil {
		return nil, nil, err
	}
	script, err = s.dictScript(ctx, tags, args)
	return cached, script, err
}

// DictionaryVersionsKey is the key of a project's dictionary versions.
func DictionaryVersionsKey(s *Store, project string) string { return s.keys(project).dictVersions() }

// InjectionsKey is the key of a session's injection records.
func InjectionsKey(s *Store, ref memory.SessionRef) string {
	k, _ := s.sessionKeys(ref)
	return k.injections()
}

// EventsKey is the key of a project's processed events of consumer.
func EventsKey(s *Store, p memory.ProjectRef, consumer string) string {
	return s.keys(space(p)).events(consumer)
}

// GCMargin is how long after its expiry Redis collects a record.
const GCMargin = gcMargin

// AdjacentScripted is Adjacent answered by adjacentScript alone.
func AdjacentScripted(ctx context.Context, s *Store, nodes []memory.Node, k int) (map[string]memory.Adjacency, error) {
	out := map[string]memory.Adjacency{}
	return out, s.adjacentScripted(ctx, nodes, k, out)
}

// BetweenAdjacentReads has Adjacent call f between its two reads.
func BetweenAdjacentReads(s *Store, f func()) { s.adjacentHook = f }

// ScoreInScript has PutBatch score its postings in reindexLexScript (as
// single writes do) instead of in Go.
func ScoreInScript(s *Store, on bool) { s.scoreInScript = on }

// DictFields are the dictionary versions fields of terms, computed in Go
// (dictBucket) and by the scripts' dictField on the server.
func DictFields(ctx context.Context, c goredis.UniversalClient, terms []string) (inGo, inLua []string, err error) {
	args := make([]any, len(terms))
	for i, t := range terms {
		inGo = append(inGo, dictBucket(t))
		args[i] = t
	}
	inLua, err = c.Eval(ctx, luaDictField+`
local out = {}
for i, t in ipairs(ARGV) do out[i] = dictField(t) end
return out
`, nil, args...).StringSlice()
	return inGo, inLua, err
}

// DictScriptSHA is the SHA1 of lexDictScript (what EVALSHA sends).
var DictScriptSHA = lexDictScript.Hash()

// BetweenPendingReads has HasPendingEmbeddings call f between its two
// reads.
func BetweenPendingReads(s *Store, f func()) { s.pendingHook = f }

// PendingKey is the key of a project's embedding backlog.
func PendingKey(s *Store, project string) string { return s.keys(project).pending() }

// StaleNodeCopies lists (as "scope/id") the packed-nodes hash entries
// that are not their node's head (headCopy): a node gone, or changed
// since.
func StaleNodeCopies(ctx context.Context, s *Store) ([]string, error) {
	stale, _, err := nodeCopies(ctx, s)
	return stale, err
}

// MissingNodeCopies lists (as "scope/id") the nodes with a packed value
// and no copy.
func MissingNodeCopies(ctx context.Context, s *Store) ([]string, error) {
	_, missing, err := nodeCopies(ctx, s)
	return missing, err
}

func nodeCopies(ctx context.Context, s *Store) (stale, missing []string, err error) {
	projects, err := s.projects(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range append([]string{""}, projects...) {
		k := s.keys(p)
		copies, err := s.c.HGetAll(ctx, k.packedNodes()).Result()
		if err != nil {
			return nil, nil, err
		}
		ids, err := s.c.ZRange(ctx, k.all(), 0, -1).Result()
		if err != nil {
			return nil, nil, err
		}
		// The head each node's hash calls for ("": no copy), of every
		// node and every copy, each read once.
		heads := map[string]string{}
		for _, id := range append(ids, slices.Collect(maps.Keys(copies))...) {
			if _, done := heads[id]; done {
				continue
			}
			pk, err := s.c.HGet(ctx, k.node(id), fPacked).Result()
			if err != nil && !errors.Is(err, goredis.Nil) {
				return nil, nil, err
			}
			heads[id] = ""
			if pk != "" {
				n, err := unpackNode(pk)
				if err != nil {
					return nil, nil, err
				}
				heads[id] = headCopy(&n)
			}
		}
		for id, v := range copies {
			if v != heads[id] {
				stale = append(stale, p+"/"+id)
			}
		}
		for _, id := range ids {
			if _, ok := copies[id]; heads[id] != "" && !ok {
				missing = append(missing, p+"/"+id)
			}
		}
	}
	slices.Sort(stale)
	slices.Sort(missing)
	return stale, missing, nil
}

// StaleDocFreqs lists (as "scope/term count/length") the terms of the
// dictionary or of the document frequencies hash whose frequency there is
// not their posting list's length (an empty list: no field).
func StaleDocFreqs(ctx context.Context, s *Store) ([]string, error) {
	projects, err := s.projects(ctx)
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, p := range append([]string{""}, projects...) {
		k := s.keys(p)
		dfs, err := s.c.HGetAll(ctx, k.docFreqs()).Result()
		if err != nil {
			return nil, err
		}
		terms, err := s.c.ZRange(ctx, k.terms(), 0, -1).Result()
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, t := range append(terms, slices.Collect(maps.Keys(dfs))...) {
			if seen[t] {
				continue
			}
			seen[t] = true
			n, err := s.c.ZCard(ctx, k.p+"t:"+t).Result()
			if err != nil {
				return nil, err
			}
			want := ""
			if n > 0 {
				want = strconv.FormatInt(n, 10)
			}
			if dfs[t] != want {
				stale = append(stale, fmt.Sprintf("%s/%s %q/%d", p, t, dfs[t], n))
			}
		}
	}
	slices.Sort(stale)
	return stale, nil
}

// MissingReach lists the registered spaces that hold a node of reach
// anywhere (their visibility hash says so) but are not in the reach
// registry, ("space at:term id") each term of such a node missing from its
// reach-anywhere postings and ("space va:model id") each such node's
// vector missing from its reach-anywhere vector set (reach.go,
// FormatReach).
func MissingReach(ctx context.Context, s *Store) ([]string, error) {
	projects, err := s.projects(ctx)
	if err != nil {
		return nil, err
	}
	in, err := s.c.SMembers(ctx, s.reachKey()).Result()
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, p := range projects {
		vis, err := s.c.HGetAll(ctx, s.keys(p).vis()).Result()
		if err != nil {
			return nil, err
		}
		var ids []string
		for id, v := range vis {
			if n, ok := fieldsNode(v, p); ok && n.Reach == memory.ReachAnywhere {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			continue
		}
		if !slices.Contains(in, p) {
			missing = append(missing, p)
		}
		// And each term of each such node in its reach-anywhere postings.
		nodes, err := s.loadTagNodes(ctx, p, ids, true)
		if err != nil {
			return nil, err
		}
		for i := range nodes {
			if m := nodes[i].EmbeddingModel; m != "" && len(nodes[i].Embedding) > 0 {
				ok, err := s.c.VIsMember(ctx, s.keys(p).anywhereVectors(m), nodes[i].ID).Result()
				if err != nil {
					return nil, err
				}
				if !ok {
					missing = append(missing, p+" va:"+m+" "+nodes[i].ID)
				}
			}
			tf, _ := docTokens(&nodes[i])
			for t := range tf {
				ok, err := s.c.SIsMember(ctx, s.keys(p).anywhere(t), nodes[i].ID).Result()
				if err != nil {
					return nil, err
				}
				if !ok {
					missing = append(missing, p+" at:"+t+" "+nodes[i].ID)
				}
			}
		}
	}
	slices.Sort(missing)
	return missing, nil
}

// ForeignSpaces lists the other projects' spaces that f reads (scopeTags).
func ForeignSpaces(ctx context.Context, s *Store, f memory.Filter) ([]string, error) {
	tags, err := s.scopeTags(ctx, f)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range tags {
		if t.kind == tagForeign {
			out = append(out, t.project)
		}
	}
	return out, nil
}

// ReachSpaces lists the reach registry (reach.go).
func ReachSpaces(ctx context.Context, s *Store) ([]string, error) {
	return s.c.SMembers(ctx, s.reachKey()).Result()
}

// SetNoAnywherePostings makes s's cross-project reads as before FormatReach
// (every project of the tenant read whole), whatever the format (reach.go).
func SetNoAnywherePostings(s *Store, on bool) { s.noAnywhere = on }

// AnywhereVectorsKey is the key of a project's reach-anywhere vector set
// of model (project: a key space, see Space).
func AnywhereVectorsKey(s *Store, project, model string) string {
	return s.keys(project).anywhereVectors(model)
}

// SetAnywhereMax sets the most reach-anywhere postings of a term s reads in
// a project before it reads the term's list instead (anywhereReadMax).
func SetAnywhereMax(s *Store, n int) { s.anywhereMax = n }

// VisFields is n's value in its project's vis hash ("" when none).
func VisFields(ctx context.Context, s *Store, n memory.Node) string {
	v, _ := s.c.HGet(ctx, s.keys(spaceOf(&n)).vis(), n.ID).Result()
	return v
}

// RebuildVector sets n's vector in its project's reach-anywhere vector set
// as FinishUpgrade does after a scan that read vis as n's filter fields
// (vaddIfScript): only while the node's hash holds the vector and the vis
// hash those fields. It returns the script's reply (0: not set).
func RebuildVector(ctx context.Context, s *Store, n memory.Node, vis string) (int64, error) {
	k := s.keys(spaceOf(&n))
	return vaddIfScript.Run(ctx, s.c, []string{k.anywhereVectors(n.EmbeddingModel), k.node(n.ID), k.vis()},
		strings.ToUpper(s.quant), n.ID, encodeVector(n.Embedding), vectorAttrs(&n), fVector, vis).Int64()
}

// ReachKey is the key of the reach registry.
func ReachKey(s *Store) string { return s.reachKey() }

// DocFreqsKey is the key of a project's document frequencies hash.
func DocFreqsKey(s *Store, project string) string { return s.keys(project).docFreqs() }

// SetFormatTTL sets how long s trusts the format it last read.
func SetFormatTTL(s *Store, d time.Duration) { s.formatTTL = d }

// Space is the key space of a tenant's project.
func Space(tenant, project string) string {
	return space(memory.ProjectRef{Tenant: tenant, Project: project})
}

// PackedNodesKey is the key of a project's packed-nodes hash (project: a
// key space, see Space).
func PackedNodesKey(s *Store, project string) string { return s.keys(project).packedNodes() }

// PackNode is a node's packed value.
func PackNode(n *memory.Node) string { return packNode(n) }

// HeadCopy is a node's copy in the packed-nodes hash.
func HeadCopy(n *memory.Node) string { return headCopy(n) }

// FormatKey is the key of the store's format.
func FormatKey(s *Store) string { return s.formatKey() }

// SetStatsCache turns the statistics cache of statistics-only projects
// (statscache.go) on or off.
func SetStatsCache(s *Store, on bool) { s.noStatsCache = !on }

// StatsKept reports whether the statistics cache holds project's.
func StatsKept(s *Store, project memory.ProjectRef) bool {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	_, ok := s.stats.m[s.keys(space(project)).p]
	return ok
}

// SetStatsCacheMax sets how many lists the statistics cache holds.
func SetStatsCacheMax(s *Store, n int) {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	s.stats.max = n
}

// StatsRepliesExact compares, for each query, the dictionary replies of
// projects read as statistics-only tags through the statistics cache with
// fresh replies (the cache filled by the queries before).
func StatsRepliesExact(ctx context.Context, s *Store, projects []memory.ProjectRef, queries [][]string) (hits int, err error) {
	tags := make([]scopeTag, len(projects))
	for i, p := range projects {
		tags[i] = scopeTag{project: space(p), kind: tagStats}
	}
	for qn, words := range queries {
		qs := memory.LexTerms(words)
		terms := dictTerms(qs)
		for _, tg := range tags {
			if _, ok := s.stats.get(s.keys(tg.project).p, terms, s.now()); ok {
				hits++
			}
		}
		got, err := s.tagDictionaries(ctx, tags, qs)
		if err != nil {
			return hits, err
		}
		want, err := s.dictionaries(ctx, tags, qs, dictArgs(qs))
		if err != nil {
			return hits, err
		}
		for i := range tags {
			if !slices.Equal(got[i], want[i]) {
				return hits, fmt.Errorf("query %d %v, project %v:\n got %q\nwant %q", qn, words, projects[i], got[i], want[i])
			}
		}
	}
	return hits, nil
}

// IDKey is the id index key that holds id's entry.
func IDKey(s *Store, id string) string { return s.idKey(id) }
