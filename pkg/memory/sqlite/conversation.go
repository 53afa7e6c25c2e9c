package sqlite

import (
	"context"
	"fmt"
	"slices"

	"github.com/engram-memory/engram/pkg/memory"
)

// The conversation index: per conversation (tenant, project and session,
// as the gates intern them), the rids of its memories in
// memory.CompareConversation order, so that Adjacent finds a memory's
// neighbours with one binary search. The lists hold rids only (no
// pointers for the collector to scan).
//
// A write moves its node within its list (or to another list) under the
// index lock, one batch of a commit merged in at once. The rows the load
// reads are appended as they come and the lists they touch are sorted
// when the load is done, outside the lock where nothing changed them
// meanwhile (sortConversations): at a million memories one sort instead
// of a merge per batch of a hundred. Until then Adjacent answers nothing
// for an unsorted list, as the vector channel finds nothing while loading.

type convKey struct{ tenant, project, session uint32 }

type convList struct {
	rids     []uint32
	unsorted bool   // appended by the load, not sorted yet
	gen      uint64 // bumped by every change (sortConversations swaps only an unchanged list)
}

func (g *gate) conv() convKey { return convKey{g.tenant, g.project, g.session} }

// convFind is the position of the node whose head is h in a sorted list.
func (x *index) convFind(l *convList, h *head) (int, bool) {
	return slices.BinarySearchFunc(l.rids, h, func(r uint32, h *head) int {
		return x.compareConversation(x.heads[r], h)
	})
}

// convRemove takes rid, whose head is still old, out of the list of key
// (x.mu write-held).
func (x *index) convRemove(key convKey, rid uint32, old *head) {
	l := x.convs[key]
	if l == nil {
		return
	}
	l.gen++
	if !l.unsorted {
		if i, ok := x.convFind(l, old); ok && l.rids[i] == rid {
			l.rids = slices.Delete(l.rids, i, i+1)
			return
		}
	}
	l.rids = slices.DeleteFunc(l.rids, func(r uint32) bool { return r == rid })
}

// convAdd puts the rids (whose heads are set) into the list of key: in
// order into a sorted list, appended to one the load is filling (load:
// the rows the load read) (x.mu write-held).
func (x *index) convAdd(key convKey, rids []uint32, load bool) {
	l := x.convs[key]
	if l == nil {
		l = &convList{}
		x.convs[key] = l
	}
	l.gen++
	if load || l.unsorted {
		if !l.unsorted {
			x.convFilled = append(x.convFilled, l)
		}
		l.unsorted = true
		l.rids = append(l.rids, rids...)
		return
	}
	cmpRid := func(a, b uint32) int { return x.compareConversation(x.heads[a], x.heads[b]) }
	if len(rids) == 1 {
		i, _ := x.convFind(l, x.heads[rids[0]])
		l.rids = slices.Insert(l.rids, i, rids[0])
		return
	}
	slices.SortFunc(rids, cmpRid)
	// Each new one's place by binary search from the last one's, the runs
	// between copied whole: a batch of m costs m log n comparisons and
	// one copy of the list (a seeding of 100,000 memories in batches of
	// 250 at places all over the list spent seconds comparing every
	// element of a merge).
	merged := make([]uint32, 0, len(l.rids)+len(rids))
	prev := 0
	for _, r := range rids {
		at, _ := slices.BinarySearchFunc(l.rids[prev:], x.heads[r], func(e uint32, h *head) int {
			return x.compareConversation(x.heads[e], h)
		})
		merged = append(merged, l.rids[prev:prev+at]...)
		merged = append(merged, r)
		prev += at
	}
	l.rids = append(merged, l.rids[prev:]...)
}

// convCommit mirrors a commit's node changes in the conversation index
// (x.mu write-held): olds[i] and oldGates[i] are changes[i]'s previous
// head and gate (nil: a new node), the new heads and gates are set.
func (x *index) convCommit(changes []change, olds []*head, oldGates []gate, load bool) {
	var adds map[convKey][]uint32
	for i := range changes {
		rid, h, old := changes[i].rid, x.heads[changes[i].rid], olds[i]
		key := x.gates[rid].conv()
		if old != nil {
			okey := oldGates[i].conv()
			if okey == key && old.id == h.id && x.conversationAt(old) == x.conversationAt(h) {
				continue // its place did not change
			}
			x.convRemove(okey, rid, old)
		}
		if adds == nil {
			adds = map[convKey][]uint32{}
		}
		adds[key] = append(adds[key], rid)
	}
	for key, rids := range adds {
		x.convAdd(key, rids, load)
	}
}

// sortConversations sorts the lists the load filled so far: each is
// copied and sorted under the read lock only, and swapped in under the
// write lock when nothing changed it meanwhile (else sorted there). The
// load runs it when it has loaded a project (so that the project a turn
// asked for has its conversations before the rest of the store is loaded)
// and when it is done; a list it appends to again later is sorted again.
func (x *index) sortConversations() {
	type job struct {
		l    *convList
		gen  uint64
		rids []uint32
	}
	var jobs []job
	x.mu.Lock()
	filled := x.convFilled
	x.convFilled = nil
	x.mu.Unlock()
	x.mu.RLock()
	for _, l := range filled {
		if l.unsorted {
			jobs = append(jobs, job{l, l.gen, slices.Clone(l.rids)})
		}
	}
	for _, j := range jobs {
		slices.SortFunc(j.rids, func(a, b uint32) int { return x.compareConversation(x.heads[a], x.heads[b]) })
	}
	x.mu.RUnlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, j := range jobs {
		if !j.l.unsorted {
			continue
		}
		if j.l.gen == j.gen {
			j.l.rids = j.rids
		} else {
			slices.SortFunc(j.l.rids, func(a, b uint32) int { return x.compareConversation(x.heads[a], x.heads[b]) })
		}
		j.l.unsorted = false
		j.l.gen++
	}
}

// Adjacent implements memory.Conversations from the conversation index:
// a binary search per node. A list the load is still filling answers
// nothing.
func (s *Store) Adjacent(ctx context.Context, nodes []memory.Node, k int) (map[string]memory.Adjacency, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: adjacent: %w", err)
	}
	out := make(map[string]memory.Adjacency, len(nodes))
	if k <= 0 {
		return out, nil
	}
	gap := memory.ConversationGap.Milliseconds()
	x := s.idx
	x.mu.RLock()
	defer x.mu.RUnlock()
	for i := range nodes {
		rid, ok := x.byID[nodes[i].ID]
		if !ok || x.heads[rid] == nil {
			continue
		}
		h := x.heads[rid]
		l := x.convs[x.gates[rid].conv()]
		if l == nil || l.unsorted {
			continue
		}
		at, found := x.convFind(l, h)
		if !found || l.rids[at] != rid {
			continue
		}
		t := x.conversationAt(h)
		var a memory.Adjacency
		for j := at - 1; j >= 0 && len(a.Before) < k; j-- {
			if n := x.heads[l.rids[j]]; t-x.conversationAt(n) <= gap {
				a.Before = append(a.Before, n.id)
			} else {
				break
			}
		}
		for j := at + 1; j < len(l.rids) && len(a.After) < k; j++ {
			if n := x.heads[l.rids[j]]; x.conversationAt(n)-t <= gap {
				a.After = append(a.After, n.id)
			} else {
				break
			}
		}
		out[h.id] = a
	}
	return out, nil
}

var _ memory.Conversations = (*Store)(nil)
