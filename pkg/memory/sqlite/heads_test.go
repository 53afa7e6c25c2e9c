package sqlite

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// nodeHead is the head as the index kept it before heads were packed: the
// node without its vector and, unless keepsText, its body, with its own
// paths and entities.
func nodeHead(n *memory.Node) memory.Node {
	h := *n
	h.Embedding = nil
	if !keepsText(n) {
		h.Body = ""
	}
	h.Paths, h.Entities = slices.Clone(n.Paths), slices.Clone(n.Entities)
	return h
}

// randomNodes makes n random nodes, every field set in some, from small
// pools of values so that pairs tie on times and ids. odd adds values the
// packed head cannot hold (zones, monotonic readings, the epoch, years out
// of an int64 of nanoseconds, huge counters, odd digests).
func randomNodes(r *rand.Rand, n int, odd bool) []memory.Node {
	pick := func(vs ...string) string { return vs[r.IntN(len(vs))] }
	base := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	pool := []time.Time{base, base.Add(time.Millisecond), base.Add(1500 * time.Microsecond), base.Add(-time.Hour),
		time.Date(1969, 12, 31, 23, 59, 59, 999_999_001, time.UTC), time.Date(1950, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)}
	when := func() time.Time {
		if odd && r.IntN(10) == 0 {
			switch r.IntN(5) {
			case 0:
				return time.Unix(0, 0)
			case 1:
				return time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
			case 2:
				return time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)
			case 3:
				return base.In(time.FixedZone("X", 7200))
			}
			return time.Now()
		}
		switch r.IntN(4) {
		case 0:
			return time.Time{}
		case 1:
			return base.Add(time.Duration(r.Int64N(int64(1000 * time.Hour))))
		}
		return pool[r.IntN(len(pool))]
	}
	count := func() int {
		if odd && r.IntN(20) == 0 {
			return math.MaxInt32 + 1
		}
		return r.IntN(3) * r.IntN(1000)
	}
	var out []memory.Node
	for i := range n {
		m := memory.Node{
			ID:             pick("a", "b", "conv-1-D3-9", "conv-1-D3-10", "n01", "n1", "n10") + pick("", fmt.Sprint(i%7)),
			Subkind:        memory.Subkind(pick("decision", "pattern", "failure", "preference", "observation", "entity", "topic", "")),
			Scope:          memory.Scope(pick("session", "project", "global", "")),
			TenantID:       pick("", "", "acme"),
			ProjectID:      pick("", "p", "q"),
			SessionID:      pick("", "s1", "s2"),
			Label:          pick("", "a label", "what did I buy?"),
			Body:           pick("", "a body\nof two lines"),
			Digest:         memory.Digest(memory.Observation, fmt.Sprint(i), "", ""),
			Confidence:     float64(r.IntN(11)) / 10,
			Weight:         1 + r.Float64()*9,
			Access:         count(),
			Useful:         count(),
			Unhelpful:      count(),
			Source:         memory.Source(pick("agent", "user", "")),
			AssertedBy:     memory.Authority(pick("inferred", "assistant", "user", "user", "")),
			Reach:          memory.Reach(pick("here", "anywhere", "")),
			ReachJudged:    r.IntN(2) == 0,
			Pinned:         r.IntN(3) == 0,
			ArchivedAt:     pick2(r, when(), time.Time{}),
			SupersededBy:   pick("", "", "", "n2"),
			StaleAt:        pick2(r, when(), time.Time{}),
			ValidFrom:      when(),
			ValidTo:        pick2(r, when(), time.Time{}),
			CreatedAt:      when(),
			UpdatedAt:      when(),
			AccessedAt:     when(),
			EmbeddingModel: pick("", "m1", "m2"),
		}
		switch r.IntN(4) {
		case 0:
			m.Paths = []string{"pkg/a.go", "b"}[:1+r.IntN(2)]
		case 1:
			m.Paths = []string{} // as an import's "paths": [] gives it
		}
		switch r.IntN(4) {
		case 0:
			m.Entities = []memory.Entity{{Key: "k", Name: "K"}, {Key: "j", Name: "J"}}[:1+r.IntN(2)]
		case 1:
			m.Entities = []memory.Entity{}
		}
		if r.IntN(2) == 0 {
			m.Embedding = []float32{1, 2}
		}
		if odd && r.IntN(20) == 0 {
			m.Digest = pick("", "ABCDEF0123456789abcd", "short")
		}
		out = append(out, m)
	}
	return out
}

func pick2(r *rand.Rand, a, b time.Time) time.Time {
	if r.IntN(2) == 0 {
		return a
	}
	return b
}

// reload is n as a reopened store reads it: the document the write stored,
// decoded.
func reload(t *testing.T, n memory.Node) memory.Node {
	t.Helper()
	doc, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	var out memory.Node
	if err := decodeNode(doc, &out); err != nil {
		t.Fatal(err)
	}
	out.Embedding, out.EmbeddingModel = n.Embedding, n.EmbeddingModel
	return out
}

// TestHeadRoundTrip: a packed head gives back the node the index kept
// before heads were packed, field for field: for nodes as a reload reads
// them in UTC (not odd) and for nodes with values the packed fields cannot hold
// (odd, kept whole).
func TestHeadRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	x := newIndex(nil)
	check := func(n memory.Node, mayBeOdd bool) {
		t.Helper()
		h := x.head(&n)
		if !mayBeOdd && h.flags&headOdd != 0 {
			t.Fatalf("the head of %+v is odd", n)
		}
		var got memory.Node
		x.fill(&got, h)
		if want := nodeHead(&n); !reflect.DeepEqual(got, want) {
			t.Fatalf("head of\n%+v\ngives\n%+v\nwant\n%+v", n, got, want)
		}
		if h.live() != n.Live() || h.standing() != memory.IsStanding(&n) || x.projectOf(h) != memory.ProjectOf(&n) {
			t.Fatalf("%+v: live %v standing %v project %v", n, h.live(), h.standing(), x.projectOf(h))
		}
		if !h.hasDigest(n.Digest) || h.hasDigest(n.Digest+"0") || h.body() != got.Body {
			t.Fatalf("%+v: digest or body", n)
		}
	}
	odd, kept, extra := 0, 0, 0
	for _, n := range randomNodes(r, 5000, false) {
		check(reload(t, n), false)
		if keepsText(&n) && n.Body != "" {
			kept++
		}
		if len(n.Paths) == 0 && len(n.Entities) == 0 && n.SupersededBy == "" && !keepsText(&n) && x.head(&n).extra != nil {
			t.Fatalf("%+v: an extra for nothing", n)
		}
	}
	for _, n := range randomNodes(r, 5000, true) {
		if h := x.head(&n); h.flags&headOdd != 0 {
			odd++
		} else if h.extra != nil {
			extra++
		}
		check(n, true)
	}
	if kept == 0 || odd < 100 || extra == 0 {
		t.Fatalf("degenerate sample: %d bodies kept, %d odd, %d with extras", kept, odd, extra)
	}
}

// TestHeadOrders: the orders and predicates on heads agree with pkg/memory's
// own on the nodes, on random pairs (ties on times and ids included),
// odd heads among them.
func TestHeadOrders(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x := newIndex(nil)
	var nodes []memory.Node
	for _, n := range randomNodes(r, 1500, false) {
		nodes = append(nodes, reload(t, n))
	}
	nodes = append(nodes, randomNodes(r, 500, true)...)
	heads := make([]*head, len(nodes))
	for i := range nodes {
		heads[i] = x.head(&nodes[i])
		nodes[i] = nodeHead(&nodes[i])
	}
	for range 200_000 {
		i, j := r.IntN(len(nodes)), r.IntN(len(nodes))
		a, b, ha, hb := &nodes[i], &nodes[j], heads[i], heads[j]
		for _, c := range []struct {
			name      string
			got, want int
		}{
			{"CompareConversation", x.compareConversation(ha, hb), memory.CompareConversation(a, b)},
			{"CompareStanding", x.compareStanding(ha, hb), memory.CompareStanding(a, b)},
			{"CompareTimeline", x.compareTimeline(ha, hb), memory.CompareTimeline(a, b)},
			{"compareCreated", x.compareCreated(ha, hb), compareCreated(a, b)},
		} {
			if c.got != c.want {
				t.Fatalf("%s of\n%+v\n%+v\n= %d, want %d", c.name, *a, *b, c.got, c.want)
			}
		}
		if got, want := x.conversationAt(ha), memory.ConversationAt(a); got != want {
			t.Fatalf("ConversationAt of %+v = %d, want %d", *a, got, want)
		}
	}
}

// TestHeadCopiesAllocateOnce: copying a turn's heads allocates per batch,
// not per head (the digests are one string for the batch), as copying
// the unpacked heads did; a scan's visibility check allocates nothing.
func TestHeadCopiesAllocateOnce(t *testing.T) {
	x := headsIndex(2000)
	rids := make([]uint32, 100)
	for i := range rids {
		rids[i] = uint32(1 + i*17)
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := x.copyHeads(nil, rids)
	for i, r := range rids {
		var want memory.Node
		x.fill(&want, x.heads[r])
		if !reflect.DeepEqual(out[i], want) {
			t.Fatalf("copy %d:\n%+v\nwant\n%+v", i, out[i], want)
		}
	}
	if got := testing.AllocsPerRun(20, func() { _ = x.copyHeads(make([]memory.Node, 0, len(rids)), rids) }); got > 4 {
		t.Errorf("copying 100 heads: %v allocations (out, paths, entities, digests)", got)
	}
	q := memory.TimelineQuery{Filter: memory.Filter{ProjectID: "p"}}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var n memory.Node
	if got := testing.AllocsPerRun(5, func() {
		for _, h := range x.heads {
			x.visible(&n, h, &q, now)
		}
	}); got > 0 {
		t.Errorf("a visibility scan of %d heads: %v allocations", len(x.heads), got)
	}
}
