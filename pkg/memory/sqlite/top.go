package sqlite

import (
	"slices"

	"github.com/engram-memory/engram/pkg/memory"
)

// top keeps the best k heads by cmp (negative: a before b), in order.
type top struct {
	k     int
	cmp   func(a, b *head) int
	items []topItem
}

type topItem struct {
	rid uint32
	h   *head
}

func newTop(k int, cmp func(a, b *head) int) *top {
	return &top{k: k, cmp: cmp}
}

func (t *top) add(rid uint32, h *head) {
	if len(t.items) == t.k && t.cmp(h, t.items[len(t.items)-1].h) >= 0 {
		return
	}
	i, _ := slices.BinarySearchFunc(t.items, h, func(it topItem, h *head) int { return t.cmp(it.h, h) })
	t.items = slices.Insert(t.items, i, topItem{rid, h})
	if len(t.items) > t.k {
		t.items = t.items[:t.k]
	}
}

func (t *top) rids() []uint32 {
	out := make([]uint32, len(t.items))
	for i, it := range t.items {
		out[i] = it.rid
	}
	return out
}

// scoredTop keeps the best k (rid, score) pairs: higher score first, then
// lower id.
type scoredTop struct {
	k     int
	items []scoredItem
}

type scoredItem struct {
	rid   uint32
	id    string
	score float64
}

func better(a, b scoredItem) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.id < b.id
}

func (t *scoredTop) add(it scoredItem) {
	if len(t.items) == t.k && !better(it, t.items[len(t.items)-1]) {
		return
	}
	i, _ := slices.BinarySearchFunc(t.items, it, func(x, y scoredItem) int {
		if better(x, y) {
			return -1
		}
		if better(y, x) {
			return 1
		}
		return 0
	})
	t.items = slices.Insert(t.items, i, it)
	if len(t.items) > t.k {
		t.items = t.items[:t.k]
	}
}

func (t *scoredTop) scored() []memory.Scored {
	out := make([]memory.Scored, len(t.items))
	for i, it := range t.items {
		out[i] = memory.Scored{ID: it.id, Score: it.score}
	}
	return out
}
