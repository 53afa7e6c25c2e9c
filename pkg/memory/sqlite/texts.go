package sqlite

import (
	"container/list"
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"github.com/engram-memory/engram/pkg/memory"
)

// The heads keep no body (keepsText says which do): the text is in the
// file, and what ranks a memory (postings, gates, vectors, the head's
// other fields) needs none of it. The few readers of the text get it from
// a small LRU cache in front of the file (textCache), keyed by row and
// checked against the head's digest, which changes with the text.

// keepsText reports whether the head of n keeps its body: the standing
// instructions do (a few per project, their lines made on every turn from
// the heads); every other head leaves it in the file.
func keepsText(n *memory.Node) bool { return memory.IsStanding(n) }

// DefaultTextCache is the size of the cache of memory texts read from the
// file (bodies, by bytes): the hits of the last turns and the feedback
// channel's documents.
const DefaultTextCache = 4 << 20

// WithTextCache sets the size in bytes of the cache of memory texts read
// from the file (default DefaultTextCache; 0 or less: the default).
func WithTextCache(bytes int) Option {
	return func(o *options) {
		if bytes > 0 {
			o.textCache = bytes
		}
	}
}

// textCache is a bounded LRU of bodies by rid, each with the digest of the
// node it was read for.
type textCache struct {
	mu    sync.Mutex
	max   int
	bytes int
	ll    *list.List // front: most recently used; values *textEntry
	byRid map[uint32]*list.Element
}

type textEntry struct {
	rid    uint32
	digest string
	body   string
}

// entryCost is what an entry costs besides its body (the element, the
// entry, the map slot, the digest).
const entryCost = 160

func newTextCache(max int) *textCache {
	return &textCache{max: max, ll: list.New(), byRid: map[uint32]*list.Element{}}
}

func (c *textCache) get(rid uint32, digest string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byRid[rid]
	if !ok {
		return "", false
	}
	e := el.Value.(*textEntry)
	if e.digest != digest {
		return "", false
	}
	c.ll.MoveToFront(el)
	return e.body, true
}

func (c *textCache) put(rid uint32, digest, body string) {
	cost := len(body) + entryCost
	if cost > c.max/8 {
		return // one text may not take the cache
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byRid[rid]; ok {
		e := el.Value.(*textEntry)
		c.bytes += len(body) - len(e.body)
		e.digest, e.body = digest, body
		c.ll.MoveToFront(el)
	} else {
		c.byRid[rid] = c.ll.PushFront(&textEntry{rid: rid, digest: digest, body: body})
		c.bytes += cost
	}
	for c.bytes > c.max {
		el := c.ll.Back()
		e := el.Value.(*textEntry)
		c.ll.Remove(el)
		delete(c.byRid, e.rid)
		c.bytes -= len(e.body) + entryCost
	}
}

// drop forgets rids (erasure: an erased text leaves the process too).
func (c *textCache) drop(rids []uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rid := range rids {
		if el, ok := c.byRid[rid]; ok {
			e := el.Value.(*textEntry)
			c.ll.Remove(el)
			delete(c.byRid, rid)
			c.bytes -= len(e.body) + entryCost
		}
	}
}

// dropChanged forgets the texts that committed changes rewrote: an old
// text (a secret redacted since, say) does not outlive its row's rewrite.
func (c *textCache) dropChanged(changes []change) {
	var rids []uint32
	for i := range changes {
		if changes[i].text {
			rids = append(rids, changes[i].rid)
		}
	}
	if len(rids) > 0 {
		c.drop(rids)
	}
}

// GetHeads implements memory.TextStore: GetMany without the bodies but
// those the heads keep (standing instructions), served from memory alone.
func (s *Store) GetHeads(ctx context.Context, ids []string) ([]memory.Node, error) {
	if err := s.memRead(ctx); err != nil {
		return nil, fmt.Errorf("sqlite: get heads: %w", err)
	}
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	return s.idx.copyHeads(make([]memory.Node, 0, len(ids)), s.idx.ridsOf(ids)), nil
}

// FillTexts implements memory.TextStore: the body of each of nodes as
// stored, from the heads (standing instructions), the cache or the file.
// A node whose stored text is no longer the one its digest names (written
// since it was read) is replaced by the stored node, vector left out; a
// node no longer stored is left as it is.
func (s *Store) FillTexts(ctx context.Context, nodes []memory.Node) error {
	if len(nodes) == 0 {
		return nil
	}
	if err := s.memRead(ctx); err != nil {
		return fmt.Errorf("sqlite: fill texts: %w", err)
	}
	rids := make([]uint32, len(nodes))
	s.idx.mu.RLock()
	for i := range nodes {
		rid, ok := s.idx.byID[nodes[i].ID]
		if !ok || int(rid) >= len(s.idx.heads) || s.idx.heads[rid] == nil {
			nodes[i].ID = "" // no longer stored (memory.TextStore)
			rids[i] = noRid
			continue
		}
		if h := s.idx.heads[rid]; h.standing() && h.hasDigest(nodes[i].Digest) {
			nodes[i].Body = h.body()
			rids[i] = noRid
			continue
		}
		rids[i] = rid
	}
	s.idx.mu.RUnlock()
	return s.fillTexts(ctx, nodes, rids)
}

// noRid marks a node fillTexts leaves alone.
const noRid = ^uint32(0)

// fillTexts sets the body of each nodes[i] with rids[i] != noRid from the
// cache or, for those it misses, from the file in one query.
func (s *Store) fillTexts(ctx context.Context, nodes []memory.Node, rids []uint32) error {
	var miss []int
	for i, rid := range rids {
		if rid == noRid {
			continue
		}
		if body, ok := s.texts.get(rid, nodes[i].Digest); ok {
			nodes[i].Body = body
			continue
		}
		miss = append(miss, i)
	}
	if len(miss) == 0 {
		return nil
	}
	read, err := s.readTexts(ctx, rids, miss)
	if err != nil {
		return fmt.Errorf("sqlite: read texts: %w", err)
	}
	var stale []any
	for _, i := range miss {
		t, ok := read[rids[i]]
		if !ok {
			nodes[i].ID = "" // erased since (memory.TextStore)
			continue
		}
		if t.digest == nodes[i].Digest {
			nodes[i].Body = t.body
			s.texts.put(rids[i], t.digest, t.body)
			continue
		}
		stale = append(stale, int64(rids[i]))
	}
	if len(stale) == 0 {
		return nil
	}
	// Written since the head was copied: the stored node, whole.
	whole, err := s.fetchRid(ctx, stale)
	if err != nil {
		return err
	}
	for _, i := range miss {
		if n, ok := whole[int64(rids[i])]; ok && n.ID == nodes[i].ID {
			nodes[i] = n
		}
	}
	return nil
}

type storedText struct {
	digest string
	body   string
}

// readTexts reads the digests and bodies of rows rids[miss].
// The statement texts are padded to a few lengths (textBatch) so that the
// prepared statements stay few.
func (s *Store) readTexts(ctx context.Context, rids []uint32, miss []int) (map[uint32]storedText, error) {
	out := make(map[uint32]storedText, len(miss))
	for len(miss) > 0 {
		part := miss[:min(len(miss), textBatchMax)]
		miss = miss[len(part):]
		n := textBatch(len(part))
		args := make([]any, n)
		for j := range args {
			args[j] = int64(rids[part[min(j, len(part)-1)]])
		}
		st, err := s.stmt(ctx, textQuery(n))
		if err != nil {
			return nil, err
		}
		rows, err := st.QueryContext(ctx, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var (
				rid    int64
				digest string
				body   sql.NullString
			)
			if err := rows.Scan(&rid, &digest, &body); err != nil {
				rows.Close()
				return nil, err
			}
			out[uint32(rid)] = storedText{digest: digest, body: body.String}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// textBatchMax is the most rows one text query reads.
const textBatchMax = 64

// textBatch is the padded length of a text query for n rows: 4, 8, 16,
// 32 or 64 placeholders.
func textBatch(n int) int {
	b := 4
	for b < n {
		b *= 2
	}
	return b
}

var textQueries sync.Map // n -> query text

// textQuery reads rid, digest and body (SQLite's json_extract: the document
// is not decoded in Go) of n rows.
func textQuery(n int) string {
	if q, ok := textQueries.Load(n); ok {
		return q.(string)
	}
	q := `SELECT rid, digest, json_extract(doc, '$.body') FROM nodes WHERE rid IN (` + strings.TrimSuffix(strings.Repeat("?,", n), ",") + `)`
	textQueries.Store(n, q)
	return q
}
