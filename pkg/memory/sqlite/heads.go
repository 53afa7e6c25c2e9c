package sqlite

import (
	"cmp"
	"encoding/hex"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// head is what the index keeps of a node: all of it but the vector and,
// unless keepsText, the body (texts.go), so that GetHeads (the hot path of
// retrieval) is served from memory. It is packed: a memory.Node is 512
// bytes with 17 pointers for the collector to mark, a head 176 bytes with
// three. The strings many heads share (kinds, scope, source, authority,
// reach, tenant, project, session, embedding model) are numbers in the
// index's string table (strTable), the times Unix nanoseconds (nanos: 0 is
// the zero time), the digest its 10 bytes; the rare parts sit behind
// extra. index.fill gives the node back, as head made it before
// (TestHeadRoundTrip).
//
// A node whose fields the packed ones do not hold exactly is odd: a time
// that nanos does not give back as it was (a zone other than UTC, a
// monotonic reading, the Unix epoch itself, a year outside 1678..2262), a
// counter beyond an int32, a digest that is not 20 lower-case hex digits.
// Its head keeps the whole node in extra.exact besides, and the
// comparisons of heads compare such a head's node with pkg/memory's own
// functions. The store's own times are UTC (the write's now), so its
// nodes are not odd unless a caller gave a time in another zone (an
// import of "+02:00" times): the store keeps a caller's times as given
// and its file keeps their offset, so such a head stays odd across
// reloads (about 760 bytes instead of 512 before heads were packed).
type head struct {
	id, label string
	extra     *headExtra // nil: none of its parts

	// Unix nanoseconds (nanos: 0 is the zero time).
	created, updated, accessed, validFrom, validTo, archived, stale int64

	confidence, weight        float64
	access, useful, unhelpful int32

	// Numbers in the index's string table.
	subkind, scope, source, assertedBy, reach, tenant, project, session, model uint32

	digest [digestBytes]byte
	flags  uint8
}

// headExtra is the rare part of a head: the body of one that keeps its
// text, the superseding node's id, paths, entities, and the whole node of
// an odd head.
type headExtra struct {
	body, supersededBy string
	paths              []string
	entities           []memory.Entity
	exact              *memory.Node // odd: the node as the head keeps it
}

const digestBytes = memory.DigestLength / 2

const (
	headPinned      uint8 = 1 << iota
	headReachJudged       // memory.Node.ReachJudged
	headLive              // memory.Node.Live
	headStanding          // memory.IsStanding: the head keeps its body
	headOdd               // extra.exact holds the node (see head)
	headNoPaths           // Paths is empty, not nil (an import's "paths": [])
	headNoEntities        // Entities is empty, not nil
)

func (h *head) live() bool     { return h.flags&headLive != 0 }
func (h *head) standing() bool { return h.flags&headStanding != 0 }

// body is the body the head keeps ("" but for keepsText).
func (h *head) body() string {
	if h.extra == nil {
		return ""
	}
	if h.extra.exact != nil {
		return h.extra.exact.Body
	}
	return h.extra.body
}

// slices is the head's paths and entities.
func (h *head) slices() ([]string, []memory.Entity) {
	switch {
	case h.extra == nil:
		return nil, nil
	case h.extra.exact != nil:
		return h.extra.exact.Paths, h.extra.exact.Entities
	}
	return h.extra.paths, h.extra.entities
}

// hasDigest reports whether the head's digest is d.
func (h *head) hasDigest(d string) bool {
	if h.flags&headOdd != 0 {
		return h.extra.exact.Digest == d
	}
	p, ok := packDigest(d)
	return ok && p == h.digest
}

// head packs what the index keeps of n (any goroutine: the string table
// has its own lock).
func (x *index) head(n *memory.Node) *head {
	t := &x.strs
	h := &head{id: n.ID, label: n.Label,
		confidence: n.Confidence, weight: n.Weight,
		access: int32(n.Access), useful: int32(n.Useful), unhelpful: int32(n.Unhelpful),
		subkind: t.id(string(n.Subkind)), scope: t.id(string(n.Scope)), source: t.id(string(n.Source)),
		assertedBy: t.id(string(n.AssertedBy)), reach: t.id(string(n.Reach)),
		tenant: t.id(n.TenantID), project: t.id(n.ProjectID), session: t.id(n.SessionID), model: t.id(n.EmbeddingModel)}
	exact := int(h.access) == n.Access && int(h.useful) == n.Useful && int(h.unhelpful) == n.Unhelpful
	var ok [8]bool
	h.created, ok[0] = packTime(n.CreatedAt)
	h.updated, ok[1] = packTime(n.UpdatedAt)
	h.accessed, ok[2] = packTime(n.AccessedAt)
	h.validFrom, ok[3] = packTime(n.ValidFrom)
	h.validTo, ok[4] = packTime(n.ValidTo)
	h.archived, ok[5] = packTime(n.ArchivedAt)
	h.stale, ok[6] = packTime(n.StaleAt)
	h.digest, ok[7] = packDigest(n.Digest)
	for _, o := range ok {
		exact = exact && o
	}
	if n.Pinned {
		h.flags |= headPinned
	}
	if n.ReachJudged {
		h.flags |= headReachJudged
	}
	if n.Live() {
		h.flags |= headLive
	}
	var body string
	if keepsText(n) {
		h.flags |= headStanding
		body = n.Body
	}
	if !exact {
		h.flags |= headOdd
		e := *n
		e.Embedding, e.Body = nil, body
		e.Paths, e.Entities = slices.Clone(n.Paths), slices.Clone(n.Entities)
		h.extra = &headExtra{exact: &e}
		return h
	}
	// Empty, not nil: a flag, not an extra part (an import's "paths": [] on
	// every memory would cost each one).
	if n.Paths != nil && len(n.Paths) == 0 {
		h.flags |= headNoPaths
	}
	if n.Entities != nil && len(n.Entities) == 0 {
		h.flags |= headNoEntities
	}
	if body != "" || n.SupersededBy != "" || len(n.Paths) > 0 || len(n.Entities) > 0 {
		h.extra = &headExtra{body: body, supersededBy: n.SupersededBy,
			paths: slices.Clone(n.Paths), entities: slices.Clone(n.Entities)}
	}
	return h
}

// fill sets *n to the node of h: the node without its vector and, unless
// keepsText, its body. Its Paths and Entities are the head's own: a caller
// that hands n out copies them (copyHeads).
func (x *index) fill(n *memory.Node, h *head) {
	x.fillFields(n, h)
	if h.flags&headOdd == 0 {
		n.Digest = hex.EncodeToString(h.digest[:])
	}
}

// fillFields is fill without the digest of a head that is not odd (its
// string would be an allocation: copyHeads makes one for a whole batch,
// and the scans' filters and the orders read none).
func (x *index) fillFields(n *memory.Node, h *head) {
	if h.flags&headOdd != 0 {
		*n = *h.extra.exact
		return
	}
	s := x.strs.all()
	*n = memory.Node{ID: h.id, Label: h.label,
		Subkind: memory.Subkind(s[h.subkind]), Scope: memory.Scope(s[h.scope]), Source: memory.Source(s[h.source]),
		AssertedBy: memory.Authority(s[h.assertedBy]), Reach: memory.Reach(s[h.reach]),
		TenantID: s[h.tenant], ProjectID: s[h.project], SessionID: s[h.session], EmbeddingModel: s[h.model],
		Confidence: h.confidence, Weight: h.weight,
		Access: int(h.access), Useful: int(h.useful), Unhelpful: int(h.unhelpful),
		ReachJudged: h.flags&headReachJudged != 0, Pinned: h.flags&headPinned != 0,
		CreatedAt: fromNanos(h.created), UpdatedAt: fromNanos(h.updated), AccessedAt: fromNanos(h.accessed),
		ValidFrom: fromNanos(h.validFrom), ValidTo: fromNanos(h.validTo),
		ArchivedAt: fromNanos(h.archived), StaleAt: fromNanos(h.stale)}
	if e := h.extra; e != nil {
		n.Body, n.SupersededBy, n.Paths, n.Entities = e.body, e.supersededBy, e.paths, e.entities
	}
	if h.flags&headNoPaths != 0 {
		n.Paths = []string{} // no allocation: zero-sized
	}
	if h.flags&headNoEntities != 0 {
		n.Entities = []memory.Entity{}
	}
}

// packTime is t in Unix nanoseconds (nanos) and whether fromNanos gives t
// back exactly. math.MinInt64 is refused too: order (the comparisons'
// key) gives it to the zero time.
func packTime(t time.Time) (int64, bool) {
	n := nanos(t)
	return n, fromNanos(n) == t && n != math.MinInt64
}

// packDigest is the 10 bytes of a digest of 20 lower-case hex digits.
func packDigest(s string) ([digestBytes]byte, bool) {
	var d [digestBytes]byte
	if len(s) != 2*digestBytes {
		return d, false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return d, false
		}
	}
	_, err := hex.Decode(d[:], []byte(s))
	return d, err == nil
}

// order is a packed time as a key that orders as time.Time.Compare does:
// the zero time (0) before every other.
func order(n int64) int64 {
	if n == 0 {
		return math.MinInt64
	}
	return n
}

// projectOf is memory.ProjectOf of h.
func (x *index) projectOf(h *head) memory.ProjectRef {
	s := x.strs.all()
	return memory.ProjectRef{Tenant: s[h.tenant], Project: s[h.project]}
}

// The orders of pkg/memory on heads: the sorts of the conversation and
// standing lists and the tie-breaks of the lists read them. Odd heads
// (one of a or b) are compared as nodes by pkg/memory's own function
// (TestHeadOrders holds the others to it).

// viaNodes is cmp of the nodes of a and b.
func (x *index) viaNodes(a, b *head, cmp func(a, b *memory.Node) int) int {
	var na, nb memory.Node
	x.fillFields(&na, a)
	x.fillFields(&nb, b)
	return cmp(&na, &nb)
}

func odd(a, b *head) bool { return (a.flags|b.flags)&headOdd != 0 }

// conversationAt is memory.ConversationAt of h.
func (x *index) conversationAt(h *head) int64 {
	if h.flags&headOdd != 0 {
		return memory.ConversationAt(h.extra.exact)
	}
	t := h.created // memory.Written
	if t == 0 || (h.updated != 0 && t > h.updated) {
		t = h.updated
	}
	if t == 0 {
		return zeroMilli
	}
	ms := t / 1e6
	if t%1e6 < 0 {
		ms-- // UnixMilli rounds down
	}
	return ms
}

var zeroMilli = time.Time{}.UnixMilli()

// compareConversation is memory.CompareConversation of heads.
func (x *index) compareConversation(a, b *head) int {
	if c := cmp.Compare(x.conversationAt(a), x.conversationAt(b)); c != 0 {
		return c
	}
	return memory.NaturalCompare(a.id, b.id)
}

// compareStanding is memory.CompareStanding of heads.
func (x *index) compareStanding(a, b *head) int {
	if odd(a, b) {
		return x.viaNodes(a, b, memory.CompareStanding)
	}
	if pa, pb := a.flags&headPinned != 0, b.flags&headPinned != 0; pa != pb {
		if pa {
			return -1
		}
		return 1
	}
	s := x.strs.all()
	if ra, rb := standingRank(s[a.subkind]), standingRank(s[b.subkind]); ra != rb {
		return ra - rb
	}
	if c := cmp.Compare(order(b.updated), order(a.updated)); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// standingRank is the rank of a subkind in memory.CompareStanding.
func standingRank(s string) int {
	switch memory.Subkind(s) {
	case memory.Preference:
		return 0
	case memory.Decision:
		return 1
	case memory.Pattern:
		return 2
	}
	return 3
}

// compareTimeline is memory.CompareTimeline of heads.
func (x *index) compareTimeline(a, b *head) int {
	if odd(a, b) {
		return x.viaNodes(a, b, memory.CompareTimeline)
	}
	if c := cmp.Compare(order(b.updated), order(a.updated)); c != 0 {
		return c
	}
	return strings.Compare(b.id, a.id)
}

// compareCreated orders the embedding backlog: oldest first, then id.
func (x *index) compareCreated(a, b *head) int {
	if odd(a, b) {
		return x.viaNodes(a, b, compareCreated)
	}
	if c := cmp.Compare(order(a.created), order(b.created)); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

func compareCreated(a, b *memory.Node) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// strTable numbers the distinct strings the heads and the gates share; 0
// is "". An erasure forgets those no node uses any more (prune); otherwise it only
// grows, by a string a new kind, scope, tenant, project, session or model.
// The list is read without a lock (a number is only handed out once its
// string is in the list a reader loads), so heads are made outside the
// index lock (the load does).
type strTable struct {
	mu   sync.Mutex
	ids  map[string]uint32
	list atomic.Pointer[[]string]
}

func (t *strTable) all() []string {
	if l := t.list.Load(); l != nil {
		return *l
	}
	return []string{""}
}

func (t *strTable) str(i uint32) string { return t.all()[i] }

// prune forgets the strings whose numbers used does not mark (an
// erasure's: a project's or session's name no node holds any more). The
// list is copied with their slots emptied, since readers hold no lock,
// and a number is never handed out again: a string that comes back gets a
// new one.
func (t *strTable) prune(used []bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.all()
	var l []string
	for i, s := range old {
		if i == 0 || s == "" || (i < len(used) && used[i]) {
			continue
		}
		if l == nil {
			l = slices.Clone(old)
		}
		l[i] = ""
		delete(t.ids, s)
	}
	if l != nil {
		t.list.Store(&l)
	}
}

// pruneStrings forgets the strings of the string table no head uses (a
// gate holds its head's numbers; x.mu write-held): an erasure's project
// and session names. Not
// while the load runs: it makes heads outside the lock, whose numbers no
// committed head may use yet; the load prunes once it ends.
func (x *index) pruneStrings() {
	if x.touched != nil {
		return
	}
	used := make([]bool, len(x.strs.all()))
	for _, h := range x.heads {
		if h != nil {
			for _, n := range [...]uint32{h.subkind, h.scope, h.source, h.assertedBy, h.reach, h.tenant, h.project, h.session, h.model} {
				used[n] = true
			}
		}
	}
	x.strs.prune(used)
}

// lookup is the number of s ("": 0), if it has one.
func (t *strTable) lookup(s string) (uint32, bool) {
	if s == "" {
		return 0, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.ids[s]
	return n, ok
}

// id is the number of s, numbering it when new.
func (t *strTable) id(s string) uint32 {
	if s == "" {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n, ok := t.ids[s]; ok {
		return n
	}
	if t.ids == nil {
		t.ids = map[string]uint32{}
	}
	// Appended in place when there is room: the readers of an older list
	// read only the strings before it.
	l := append(t.all(), strings.Clone(s))
	t.ids[l[len(l)-1]] = uint32(len(l) - 1)
	t.list.Store(&l)
	return uint32(len(l) - 1)
}
