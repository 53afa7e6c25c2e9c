package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

var _ memory.Erasure = (*Store)(nil)

// Erasure. A tenant's or a project's spaces are erased whole: every key of
// their hash tags, found by SCAN on the slot's node (so a key kind added
// to the layout is erased without being named here), after the edges
// their nodes share with other spaces (the copy under the other end) and
// their entries in the id index and the registries. A session is erased
// within its project: its per-session keys (sessionSuffixes and its
// leases), its passes, and its nodes one by one with every index entry
// (dropNode: the inverse of writeNode). The erased nodes' references in
// the tenant's other spaces (injection records, journal entries) go too.

// sessionSuffixes are the per-session keys (after "s:<session>:") besides
// the leases ("l:<name>"), with what each counts as.
var sessionSuffixes = []string{"m", "turns", "sum", "cur", "inj", "brief", "passat"}

// Erase implements memory.Erasure.
func (s *Store) Erase(ctx context.Context, sc memory.EraseScope, seen memory.Seen) (memory.Erased, error) {
	if err := sc.Check(); err != nil {
		return memory.Erased{}, err
	}
	er := &redisEraser{s: s, sc: sc, seen: seen, gone: map[string]string{}}
	err := er.run(ctx)
	// What this process keeps of the spaces' dictionaries and statistics
	// (lexdict.go, statscache.go) names their terms: gone with them, also
	// when the erasure stopped half-way (a node's erasure drops its
	// space's statistics: dropNode, tagWrites).
	for _, sp := range er.whole {
		p := s.keys(sp).p
		s.stats.drop(p, s.now())
		s.dict.dropPrefix(p)
	}
	if err != nil {
		return memory.Erased{}, fmt.Errorf("redis: erase %s: %w", sc, err)
	}
	s.briefs.Forget(sc.HoldsSession)
	return er.out, nil
}

type redisEraser struct {
	s     *Store
	sc    memory.EraseScope
	seen  memory.Seen
	out   memory.Erased
	whole []string          // spaces erased whole
	gone  map[string]string // erased node id -> its space
	nodes []memory.Node
}

func (er *redisEraser) text(t string) {
	if er.seen != nil && t != "" {
		er.seen(t)
	}
}

func (er *redisEraser) run(ctx context.Context) error {
	s := er.s
	own := space(memory.ProjectRef{Tenant: er.sc.Tenant, Project: er.sc.Project})
	switch {
	case er.sc.Project == "":
		spaces, err := s.spacesOf(ctx, er.sc.Tenant)
		if err != nil {
			return err
		}
		er.whole = spaces
	case er.sc.Session == "":
		er.whole = []string{own}
	}
	// The nodes.
	scan := er.whole
	if er.sc.Session != "" {
		scan = []string{own}
	}
	for _, sp := range scan {
		if err := er.collect(ctx, sp); err != nil {
			return err
		}
	}
	if err := er.edges(ctx); err != nil {
		return err
	}
	if er.sc.Session != "" {
		if err := er.session(ctx, own); err != nil {
			return err
		}
	}
	if len(er.whole) > 0 {
		byPrefix, err := s.keysUnder(ctx, er.whole)
		if err != nil {
			return err
		}
		for _, sp := range er.whole {
			if err := er.space(ctx, sp, byPrefix[s.keys(sp).p]); err != nil {
				return err
			}
		}
	}
	// The id index and the registries.
	if len(er.gone) > 0 {
		pipe := s.c.Pipeline()
		for id := range er.gone {
			pipe.HDel(ctx, s.idKey(id), id)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		for id := range er.gone {
			s.projOf.drop(id)
		}
	}
	if len(er.whole) > 0 {
		s.projOf.reset()
	}
	if len(er.whole) > 0 {
		members := make([]any, len(er.whole))
		for i, sp := range er.whole {
			members[i] = sp
		}
		if err := s.c.SRem(ctx, s.registryKey(), members...).Err(); err != nil {
			return err
		}
		if err := s.c.SRem(ctx, s.heldKey(), members...).Err(); err != nil {
			return err
		}
		if err := s.c.SRem(ctx, s.reachKey(), members...).Err(); err != nil {
			return err
		}
		s.mu.Lock()
		for _, sp := range er.whole {
			delete(s.reg, sp)
			delete(s.held, sp)
			delete(s.reach, sp)
		}
		s.mu.Unlock()
		s.regList.invalidate()
		s.reachList.invalidate()
	}
	if len(er.gone) > 0 {
		return er.references(ctx)
	}
	return nil
}

// spacesOf lists every space of tenant: registered (nodes, passes) or
// held (per-session and per-project records), and its global space.
func (s *Store) spacesOf(ctx context.Context, tenant string) ([]string, error) {
	set := map[string]bool{space(memory.ProjectRef{Tenant: tenant}): true}
	for _, key := range []string{s.registryKey(), s.heldKey()} {
		ps, err := s.c.SMembers(ctx, key).Result()
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			if unspace(p).Tenant == tenant {
				set[p] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

// collect reads the scope's nodes of a space (vectors included: they are
// counted).
func (er *redisEraser) collect(ctx context.Context, sp string) error {
	k := er.s.keys(sp)
	const batch = 500
	for start := int64(0); ; start += batch {
		ids, err := er.s.c.ZRange(ctx, k.all(), start, start+batch-1).Result()
		if err != nil {
			return err
		}
		// Without the vectors (1.5 KB each at 384 dimensions): whether a
		// node has one is asked of its hash.
		nodes, err := er.s.loadTagNodes(ctx, sp, ids, false)
		if err != nil {
			return err
		}
		pipe := er.s.c.Pipeline()
		hasVec := make([]*goredis.BoolCmd, len(nodes))
		for i := range nodes {
			hasVec[i] = pipe.HExists(ctx, k.node(nodes[i].ID), fVector)
		}
		if len(nodes) > 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
		}
		for i := range nodes {
			n := &nodes[i]
			if !er.sc.HoldsNode(n) {
				continue
			}
			er.gone[n.ID] = sp
			er.nodes = append(er.nodes, *n)
			er.out.Memories++
			if hasVec[i].Val() {
				er.out.Vectors++
			}
			memory.NodeTexts(n, er.seen)
		}
		if len(ids) < batch {
			return nil
		}
	}
}

// edges counts the erased nodes' edges and deletes the copies other
// spaces keep of them (the in-copy under a kept destination, the primary
// copy under a kept source). The erased nodes' own edge hashes go with
// them.
func (er *redisEraser) edges(ctx context.Context) error {
	if len(er.nodes) == 0 {
		return nil
	}
	s := er.s
	pipe := s.c.Pipeline()
	outs := make([]*goredis.MapStringStringCmd, len(er.nodes))
	ins := make([]*goredis.MapStringStringCmd, len(er.nodes))
	for i := range er.nodes {
		k := s.keys(er.gone[er.nodes[i].ID])
		outs[i] = pipe.HGetAll(ctx, k.edgesOut(er.nodes[i].ID))
		ins[i] = pipe.HGetAll(ctx, k.edgesIn(er.nodes[i].ID))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	type copyRef struct{ node, field string } // a kept node's copy: its id and the field
	var inCopies, outCopies []copyRef
	for i := range er.nodes {
		for _, v := range outs[i].Val() {
			e, err := decodeEdge(v)
			if err != nil {
				return err
			}
			er.out.Edges++
			if _, erased := er.gone[e.Dst]; !erased {
				inCopies = append(inCopies, copyRef{e.Dst, edgeField(e.Src, e)})
			}
		}
		for _, v := range ins[i].Val() {
			e, err := decodeEdge(v)
			if err != nil {
				return err
			}
			if _, erased := er.gone[e.Src]; !erased {
				er.out.Edges++
				outCopies = append(outCopies, copyRef{e.Src, edgeField(e.Dst, e)})
			}
		}
	}
	if len(inCopies)+len(outCopies) == 0 {
		return nil
	}
	var kept []string
	for _, c := range append(slices.Clone(inCopies), outCopies...) {
		kept = append(kept, c.node)
	}
	projs, err := s.projectsOf(ctx, kept)
	if err != nil {
		return err
	}
	pipe = s.c.Pipeline()
	for _, c := range inCopies {
		if p, ok := projs[c.node]; ok {
			pipe.HDel(ctx, s.keys(p).edgesIn(c.node), c.field)
		}
	}
	for _, c := range outCopies {
		if p, ok := projs[c.node]; ok {
			pipe.HDel(ctx, s.keys(p).edgesOut(c.node), c.field)
		}
	}
	_, err = pipe.Exec(ctx)
	return err
}

// edgeField is the hash field of edge e in the hash of its end that is
// not other's.
func edgeField(other string, e memory.Edge) string {
	if e.Live() {
		return liveField(other, e.Relation)
	}
	return closedField(other, e)
}

// session erases one session within its project: its nodes one by one,
// its per-session keys and its passes.
func (er *redisEraser) session(ctx context.Context, sp string) error {
	s := er.s
	k := s.keys(sp)
	for i := range er.nodes {
		n := &er.nodes[i]
		if _, err := s.c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
			s.dropNode(ctx, pipe, n)
			return nil
		}); err != nil {
			return err
		}
	}
	// Passes of the session.
	ids, err := s.c.ZRange(ctx, k.sessionPassesByAt(er.sc.Session), 0, -1).Result()
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		docs, err := s.c.HMGet(ctx, k.passes(), ids...).Result()
		if err != nil {
			return err
		}
		members := make([]any, len(ids))
		for i, id := range ids {
			members[i] = id
			if str, ok := docs[i].(string); ok {
				er.out.Passes++
				er.passTexts(str)
			}
		}
		if _, err := s.c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
			pipe.HDel(ctx, k.passes(), ids...)
			pipe.ZRem(ctx, k.passesByAt(), members...)
			return nil
		}); err != nil {
			return err
		}
	}
	// The per-session keys: the known ones and the leases.
	prefix := k.session(er.sc.Session)
	keys := make([]string, 0, len(sessionSuffixes)+4)
	for _, suf := range sessionSuffixes {
		keys = append(keys, prefix+suf)
	}
	err = s.scanSlot(ctx, prefix, globEscape(prefix+"l:")+"*", func(found []string) error {
		for _, key := range found {
			if name := strings.TrimPrefix(key, prefix+"l:"); memory.CheckLeaseName(name) == nil {
				keys = append(keys, key) // not a key of a session whose id continues with ":l:"
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return er.deleteKeys(ctx, keys)
}

// dropNode queues, inside a MULTI of the node's slot, the removal of n and
// of every index entry writeNode made for it.
func (s *Store) dropNode(ctx context.Context, pipe goredis.Pipeliner, n *memory.Node) {
	k := s.keys(spaceOf(n))
	id := n.ID
	pipe.Del(ctx, k.node(id), k.edgesOut(id), k.edgesIn(id))
	pipe.HDel(ctx, k.vis(), id)
	pipe.HDel(ctx, k.packedNodes(), id)
	if n.Digest != "" {
		hdelIfScript.Eval(ctx, pipe, []string{k.digests()}, n.Digest, id)
	}
	pipe.ZRem(ctx, k.all(), id)
	pipe.SRem(ctx, k.live(), id)
	pipe.ZRem(ctx, k.standing(), id)
	pipe.ZRem(ctx, k.pending(), id)
	pipe.SRem(ctx, k.contradicting(), id)
	if n.EmbeddingModel != "" {
		pipe.ZRem(ctx, k.embedded(n.EmbeddingModel), id)
		pipe.VRem(ctx, k.vectors(n.EmbeddingModel), id)
		pipe.VRem(ctx, k.anywhereVectors(n.EmbeddingModel), id)
	}
	for _, p := range n.Paths {
		pipe.SRem(ctx, k.path(p), id)
	}
	tf, length := docTokens(n)
	lw := s.tagWrites(k)
	lw.reindex(id, -1, length, 0, tf, nil)
	// Out of every term's reach-anywhere postings, whatever its reach:
	// an earlier version's edit, or a rebuild racing one, can have left
	// it in some.
	writeAnywhere(ctx, pipe, lw, k, id, true, false, tf, nil)
	lw.flush(ctx, pipe)
}

// space erases a space whole: every key of its hash tag, counted by kind
// first.
func (er *redisEraser) space(ctx context.Context, sp string, keys []string) error {
	s := er.s
	k := s.keys(sp)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	// Count (and read the texts of) the records the node and edge counts
	// do not cover.
	pipe := s.c.Pipeline()
	var cs []counted
	for _, key := range keys {
		rest := strings.TrimPrefix(key, k.p)
		switch {
		case rest == "pass":
			cs = append(cs, counted{"pass", pipe.HVals(ctx, key)})
		case strings.HasPrefix(rest, "ev:"):
			cs = append(cs, counted{"ev", pipe.HLen(ctx, key)})
		case strings.HasPrefix(rest, "s:"):
			cs = append(cs, er.sessionKey(ctx, pipe, key, strings.TrimPrefix(rest, "s:"))...)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return err
	}
	for _, c := range cs {
		er.count(c.kind, c.cmd)
	}
	return er.deleteKeys(ctx, keys)
}

// counted is a key whose records an erasure counts, and the command that
// reads them.
type counted struct {
	kind string
	cmd  goredis.Cmder
}

// sessionKey queues the count of a per-session key (rest is what follows
// "s:" in its name). The known suffixes come first: a lease may not be
// named like one (memory.CheckLeaseName), so "<a>:l:m" is the messages of
// session "<a>:l", never a lease "m" of session "<a>".
func (er *redisEraser) sessionKey(ctx context.Context, pipe goredis.Pipeliner, key, rest string) []counted {
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return nil
	}
	switch rest[i+1:] {
	case "m":
		return []counted{{"m", pipe.LRange(ctx, key, 0, -1)}}
	case "turns":
		return []counted{{"turns", pipe.HLen(ctx, key)}}
	case "sum":
		return []counted{{"sum", pipe.LRange(ctx, key, 0, -1)}}
	case "cur":
		return []counted{{"cur", pipe.Exists(ctx, key)}}
	case "inj":
		return []counted{{"inj", pipe.HVals(ctx, key)}}
	case "brief":
		return []counted{{"brief", pipe.Exists(ctx, key)}}
	case "passat":
		return nil
	}
	if j := strings.LastIndexByte(rest[:i], ':'); j >= 0 && rest[j+1:i] == "l" {
		return []counted{{"lease", pipe.Exists(ctx, key)}}
	}
	return nil
}

// count adds a counted key to the receipt (and its texts to Seen).
func (er *redisEraser) count(kind string, cmd goredis.Cmder) {
	switch c := cmd.(type) {
	case *goredis.IntCmd:
		n := int(c.Val())
		switch kind {
		case "ev":
			er.out.Processed += n
		case "turns":
			er.out.Turns += n
		case "cur":
			er.out.Cursors += n
		case "brief":
			er.out.Briefings += n
		case "lease":
			er.out.Leases += n
		}
	case *goredis.StringSliceCmd:
		for _, v := range c.Val() {
			switch kind {
			case "pass":
				er.out.Passes++
				er.passTexts(v)
			case "m":
				er.out.Messages++
				er.messageTexts(v)
			case "sum":
				er.out.Summaries++
				er.summaryTexts(v)
			case "inj":
				er.out.Injections++
				er.injectionTexts(v)
			}
		}
	}
}

func (er *redisEraser) passTexts(doc string) {
	if er.seen == nil {
		return
	}
	if p, err := memory.DecodePass([]byte(doc)); err == nil {
		memory.PassTexts(&p, er.seen)
		return
	}
	er.text(doc)
}

func (er *redisEraser) messageTexts(doc string) {
	if er.seen == nil {
		return
	}
	if ms, err := decodeMessages([]string{doc}); err == nil {
		memory.MessageTexts(&ms[0], er.seen)
		return
	}
	er.text(doc)
}

func (er *redisEraser) summaryTexts(doc string) {
	if er.seen == nil {
		return
	}
	var sum memory.Summary
	if err := jsonUnmarshal(doc, &sum); err == nil {
		er.text(sum.Content)
		return
	}
	er.text(doc)
}

func (er *redisEraser) injectionTexts(doc string) {
	if er.seen == nil {
		return
	}
	var d injectionDoc
	if err := jsonUnmarshal(doc, &d); err == nil {
		er.text(d.Text)
		return
	}
	er.text(doc)
}

// deleteKeys deletes keys of one slot, counting the per-session ones of a
// session erasure as it goes (a whole space was counted by space).
func (er *redisEraser) deleteKeys(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	s := er.s
	if er.sc.Session != "" {
		// Count the session's keys (space counted a whole space's).
		pipe := s.c.Pipeline()
		var cs []counted
		prefix := s.keys(space(memory.ProjectRef{Tenant: er.sc.Tenant, Project: er.sc.Project})).p + "s:"
		for _, key := range keys {
			cs = append(cs, er.sessionKey(ctx, pipe, key, strings.TrimPrefix(key, prefix))...)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
			return err
		}
		for _, c := range cs {
			er.count(c.kind, c.cmd)
		}
	}
	for part := range slices.Chunk(keys, 500) {
		pipe := s.c.Pipeline()
		for _, key := range part {
			pipe.Del(ctx, key) // one key per command: a cluster routes each
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// references removes what the tenant's kept spaces hold of the erased
// nodes: injection records naming one (deleted) and pass journal entries
// holding one (memory.ScrubPass). Every space of the tenant is looked at
// (a node that reaches anywhere may have been recalled in any project):
// its journal hash, and its injection hashes, found in one SCAN of the
// keyspace.
func (er *redisEraser) references(ctx context.Context) error {
	s := er.s
	spaces, err := s.spacesOf(ctx, er.sc.Tenant)
	if err != nil {
		return err
	}
	kept := map[string]string{} // key prefix -> space
	for _, sp := range spaces {
		if !slices.Contains(er.whole, sp) {
			kept[s.keys(sp).p] = sp
		}
	}
	if len(kept) == 0 {
		return nil
	}
	erased := func(id string) bool { _, ok := er.gone[id]; return ok }
	for prefix := range kept {
		key := prefix + "pass"
		docs, err := s.c.HGetAll(ctx, key).Result()
		if err != nil {
			return err
		}
		for id, doc := range docs {
			b, removed, err := memory.ScrubPassDoc([]byte(doc), erased, er.seen)
			if err != nil {
				return err
			}
			if removed == 0 {
				continue
			}
			er.out.JournalEntries += removed
			if err := s.c.HSet(ctx, key, id, b).Err(); err != nil {
				return err
			}
		}
	}
	var injKeys []string
	err = s.scanEvery(ctx, globEscape(s.ns)+":*:s:*:inj", func(found []string) error {
		for _, key := range found {
			if i := strings.Index(key, "}:"); i > 0 {
				if _, ok := kept[key[:i+2]]; ok {
					injKeys = append(injKeys, key)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(injKeys)
	for _, key := range slices.Compact(injKeys) {
		recs, err := s.c.HGetAll(ctx, key).Result()
		if err != nil {
			return err
		}
		var drop []string
		for turn, v := range recs {
			var d injectionDoc
			if err := jsonUnmarshal(v, &d); err != nil {
				var ids []string // a record of before blocks were kept: the ids alone
				if jsonUnmarshal(v, &ids) != nil {
					continue
				}
				d.IDs = ids
			}
			if memory.InjectionNames(d.Injection, erased) {
				drop = append(drop, turn)
				er.text(d.Text)
			}
		}
		if len(drop) > 0 {
			if err := s.c.HDel(ctx, key, drop...).Err(); err != nil {
				return err
			}
			er.out.Injections += len(drop)
		}
	}
	return nil
}

// scanEvery calls fn with the keys matching pattern on every node (a
// cluster's masters).
func (s *Store) scanEvery(ctx context.Context, pattern string, fn func([]string) error) error {
	if cc, ok := s.c.(*goredis.ClusterClient); ok {
		var mu sync.Mutex
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
			return scanAll(ctx, c, pattern, func(keys []string) error {
				mu.Lock()
				defer mu.Unlock()
				return fn(keys)
			})
		})
	}
	return scanAll(ctx, s.c, pattern, fn)
}

// keysUnder lists the keys of spaces, by key prefix: a few spaces with a
// SCAN MATCH each on the slot's node (the server walks its keyspace and
// sends the matching names), many with one walk of the namespace (each
// walk costs the server its whole keyspace; one walk sends every name).
func (s *Store) keysUnder(ctx context.Context, spaces []string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(spaces) <= 4 {
		for _, sp := range spaces {
			p := s.keys(sp).p
			err := s.scanSlot(ctx, p, globEscape(p)+"*", func(keys []string) error {
				out[p] = append(out[p], keys...)
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	want := map[string]bool{}
	for _, sp := range spaces {
		want[s.keys(sp).p] = true
	}
	err := s.scanEvery(ctx, globEscape(s.ns)+":*", func(keys []string) error {
		for _, key := range keys {
			if i := strings.Index(key, "}:"); i > 0 && want[key[:i+2]] {
				out[key[:i+2]] = append(out[key[:i+2]], key)
			}
		}
		return nil
	})
	return out, err
}

// scanCount is the COUNT of an erasure's SCAN: the server walks that many
// buckets per call (a millisecond or two), so a keyspace of millions is
// walked in hundreds of round trips, not thousands.
const scanCount = 5000

// scanSlot calls fn with the keys matching pattern, on the node that
// serves slotKey's slot (every key of one hash tag is there).
func (s *Store) scanSlot(ctx context.Context, slotKey, pattern string, fn func([]string) error) error {
	var c goredis.Cmdable = s.c
	if cc, ok := s.c.(*goredis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, slotKey)
		if err != nil {
			return err
		}
		c = node
	}
	return scanAll(ctx, c, pattern, fn)
}

func scanAll(ctx context.Context, c goredis.Cmdable, pattern string, fn func([]string) error) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, pattern, scanCount).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := fn(keys); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// globEscape escapes the glob characters of a SCAN MATCH pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// SessionIDs implements memory.Erasure: the sessions named by the
// project's per-session keys.
func (s *Store) SessionIDs(ctx context.Context, p memory.ProjectRef) ([]string, error) {
	if err := memory.CheckTenant(p.Tenant); err != nil {
		return nil, fmt.Errorf("%w: %v", memory.ErrInvalid, err)
	}
	k := s.keys(space(p))
	prefix := k.p + "s:"
	set := map[string]bool{}
	err := s.scanSlot(ctx, k.p, globEscape(prefix)+"*", func(keys []string) error {
		for _, key := range keys {
			if sid, ok := sessionOfKey(strings.TrimPrefix(key, prefix)); ok {
				set[sid] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap("session ids", err)
	}
	out := make([]string, 0, len(set))
	for sid := range set {
		out = append(out, sid)
	}
	slices.Sort(out)
	return out, nil
}

// sessionOfKey reads the session id out of what follows "s:" in a
// per-session key.
func sessionOfKey(rest string) (string, bool) {
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 {
		return "", false
	}
	if slices.Contains(sessionSuffixes, rest[i+1:]) {
		return rest[:i], true
	}
	if j := strings.LastIndexByte(rest[:i], ':'); j > 0 && rest[j+1:i] == "l" {
		return rest[:j], true
	}
	return "", false
}

// Summaries implements memory.Erasure.
func (s *Store) Summaries(ctx context.Context, ref memory.SessionRef) ([]memory.Summary, error) {
	k, err := s.sessionKeys(ref)
	if err != nil {
		return nil, err
	}
	raw, err := s.c.LRange(ctx, k.summaries(), 0, -1).Result()
	if err != nil {
		return nil, s.wrap("summaries", err)
	}
	out := make([]memory.Summary, 0, len(raw))
	for _, r := range raw {
		var sum memory.Summary
		if err := jsonUnmarshal(r, &sum); err != nil {
			return nil, fmt.Errorf("redis: bad summary record: %w", err)
		}
		out = append(out, sum)
	}
	return out, nil
}

// Purge implements memory.Erasure: on every node (a cluster's masters and
// replicas), an append-only file is rewritten (BGREWRITEAOF, waited for),
// so that it no longer replays deleted keys; a node that has written a
// snapshot since it started writes a new one (BGSAVE). A user without the
// permission (INFO, BGREWRITEAOF, BGSAVE: see ACLCommands) gets the steps
// as incomplete, not an error.
func (s *Store) Purge(ctx context.Context) (memory.PurgeReport, error) {
	var rep memory.PurgeReport
	purge := func(ctx context.Context, c *goredis.Client) error {
		addr := c.Options().Addr
		done, incomplete, err := purgeNode(ctx, c)
		for _, d := range done {
			rep.Done = append(rep.Done, "redis "+addr+": "+d)
		}
		for _, d := range incomplete {
			rep.Incomplete = append(rep.Incomplete, "redis "+addr+": "+d)
		}
		return err
	}
	var err error
	switch c := s.c.(type) {
	case *goredis.ClusterClient:
		// ForEachShard calls back from a goroutine per node.
		var mu sync.Mutex
		var nodes []*goredis.Client
		err = c.ForEachShard(ctx, func(_ context.Context, n *goredis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			nodes = append(nodes, n)
			return nil
		})
		for _, n := range nodes {
			if err != nil {
				break
			}
			err = purge(ctx, n)
		}
	case *goredis.Client:
		err = purge(ctx, c)
	default:
		rep.Incomplete = append(rep.Incomplete, fmt.Sprintf("redis: a %T client: rewrite the append-only file of every node yourself (BGREWRITEAOF)", s.c))
	}
	if err != nil {
		return rep, fmt.Errorf("redis: purge: %w", err)
	}
	return rep, nil
}

// purgeNode rewrites one node's append-only file and snapshot as needed.
func purgeNode(ctx context.Context, c *goredis.Client) (done, incomplete []string, err error) {
	info, err := persistence(ctx, c)
	if isNoPerm(err) {
		return nil, []string{"not permitted to read INFO persistence: rewrite the append-only file (BGREWRITEAOF) and snapshot (BGSAVE) as an administrator"}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if info["aof_enabled"] == "1" {
		if err := c.BgRewriteAOF(ctx).Err(); err != nil && !strings.Contains(err.Error(), "already in progress") {
			if isNoPerm(err) {
				incomplete = append(incomplete, "append-only file on, but BGREWRITEAOF is not permitted: run it as an administrator")
			} else {
				return done, incomplete, err
			}
		} else {
			// A rewrite already running may have started before the
			// erasure: wait for it, then for one of our own.
			if err := waitPersistence(ctx, c, "aof_rewrite_in_progress", "aof_rewrite_scheduled"); err != nil {
				return done, incomplete, err
			}
			if err := c.BgRewriteAOF(ctx).Err(); err != nil && !strings.Contains(err.Error(), "already in progress") {
				return done, incomplete, err
			}
			if err := waitPersistence(ctx, c, "aof_rewrite_in_progress", "aof_rewrite_scheduled"); err != nil {
				return done, incomplete, err
			}
			info, err = persistence(ctx, c)
			if err != nil {
				return done, incomplete, err
			}
			if st := info["aof_last_bgrewrite_status"]; st != "ok" {
				return done, incomplete, fmt.Errorf("append-only file rewrite: status %s", st)
			}
			done = append(done, "append-only file rewritten (BGREWRITEAOF)")
		}
	}
	if saves, _ := strconv.Atoi(info["rdb_saves"]); saves > 0 {
		if err := waitPersistence(ctx, c, "rdb_bgsave_in_progress"); err != nil {
			return done, incomplete, err
		}
		if err := c.BgSave(ctx).Err(); err != nil && !strings.Contains(err.Error(), "already in progress") {
			if isNoPerm(err) {
				incomplete = append(incomplete, "snapshots are written, but BGSAVE is not permitted: run it as an administrator")
				return done, incomplete, nil
			}
			return done, incomplete, err
		}
		if err := waitPersistence(ctx, c, "rdb_bgsave_in_progress"); err != nil {
			return done, incomplete, err
		}
		done = append(done, "snapshot rewritten (BGSAVE)")
	}
	if len(done) == 0 && len(incomplete) == 0 {
		done = append(done, "no append-only file and no snapshot written since start: nothing on disk to rewrite")
	}
	return done, incomplete, nil
}

func persistence(ctx context.Context, c *goredis.Client) (map[string]string, error) {
	txt, err := c.Info(ctx, "persistence").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(txt, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// waitPersistence waits until every flag of INFO persistence is 0.
func waitPersistence(ctx context.Context, c *goredis.Client, flags ...string) error {
	for {
		info, err := persistence(ctx, c)
		if err != nil {
			return err
		}
		busy := false
		for _, f := range flags {
			if info[f] != "0" && info[f] != "" {
				busy = true
			}
		}
		if !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", strings.Join(flags, ", "), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func isNoPerm(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOPERM") }

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// ScanRaw calls fn with every key of the store's namespace on every node
// (a cluster's masters) and what it holds (a hash's fields and values, a
// list's or set's members, a sorted set's members, a vector set's
// elements); where is the key. A verification of an erasure looks there
// for what it erased. Keys are read a SCAN page at a time, in two
// pipelines (their types, then their contents).
func (s *Store) ScanRaw(ctx context.Context, fn func(where string, data []byte) error) error {
	var mu sync.Mutex // a cluster's masters are scanned in parallel
	scan := func(ctx context.Context, c goredis.Cmdable) error {
		return scanAll(ctx, c, globEscape(s.ns)+":*", func(keys []string) error {
			datas, err := rawKeys(ctx, c, keys)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for i, key := range keys {
				if err := fn(key, datas[i]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	var err error
	if cc, ok := s.c.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.c)
	}
	return s.wrap("scan raw", err)
}

// rawKeys reads keys' names and contents, one line each.
func rawKeys(ctx context.Context, c goredis.Cmdable, keys []string) ([][]byte, error) {
	pipe := c.Pipeline()
	types := make([]*goredis.StatusCmd, len(keys))
	for i, key := range keys {
		types[i] = pipe.Type(ctx, key)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	pipe = c.Pipeline()
	reads := make([]goredis.Cmder, len(keys))
	for i, key := range keys {
		switch types[i].Val() {
		case "string":
			reads[i] = pipe.Get(ctx, key)
		case "hash":
			reads[i] = pipe.HGetAll(ctx, key)
		case "set":
			reads[i] = pipe.SMembers(ctx, key)
		case "zset":
			reads[i] = pipe.ZRange(ctx, key, 0, -1)
		case "list":
			reads[i] = pipe.LRange(ctx, key, 0, -1)
		case "vectorset":
			reads[i] = pipe.VRandMemberCount(ctx, key, 1<<30)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, err
	}
	out := make([][]byte, len(keys))
	for i, key := range keys {
		b := []byte(key + "\n")
		add := func(vs ...string) {
			for _, v := range vs {
				b = append(append(b, v...), '\n')
			}
		}
		switch r := reads[i].(type) {
		case *goredis.StringCmd:
			add(r.Val())
		case *goredis.MapStringStringCmd:
			for k, v := range r.Val() {
				add(k, v)
			}
		case *goredis.StringSliceCmd:
			add(r.Val()...)
		case nil:
			if t := types[i].Val(); t != "none" {
				add("(a " + t + ", not read)")
			}
		}
		out[i] = b
	}
	return out, nil
}
