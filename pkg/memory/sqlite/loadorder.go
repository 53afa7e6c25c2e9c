package sqlite

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// loadOrder is the background load's plan by project (see Loading in the
// package doc): the rows still to load of each tenant's project, the
// projects a read asked for (loaded before the others) and a channel per
// project closed once its rows are loaded.
type loadOrder struct {
	mu      sync.Mutex
	mapped  chan struct{} // closed once pending is known (or the load ended)
	pending map[memory.ProjectRef][]int64
	order   []memory.ProjectRef // projects by first row, global ones first
	next    int                 // index in order of the next project to load unasked
	asked   []memory.ProjectRef // projects a read waits for, oldest first
	done    map[memory.ProjectRef]chan struct{}
	over    bool // the load ended: nothing is pending any more
}

func newLoadOrder() *loadOrder {
	return &loadOrder{mapped: make(chan struct{}), done: map[memory.ProjectRef]chan struct{}{}}
}

// plan records the rows of every project (rows in ascending order within
// each), global projects (Project "") first, the others by first row.
func (o *loadOrder) plan(rows map[memory.ProjectRef][]int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending = rows
	for p := range rows {
		o.order = append(o.order, p)
	}
	slices.SortFunc(o.order, func(a, b memory.ProjectRef) int {
		if (a.Project == "") != (b.Project == "") {
			if a.Project == "" {
				return -1
			}
			return 1
		}
		return int(rows[a][0] - rows[b][0])
	})
	close(o.mapped)
}

// take returns up to n rows to load next: those of the oldest project a
// read asked for that still has rows, else (unless askedOnly) of the next
// project in order; nil when nothing is left. It closes the done channel of a project whose
// last rows it hands out only in finished, after they are mirrored.
func (o *loadOrder) take(n int, askedOnly bool) (memory.ProjectRef, []int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.asked) > 0 {
		p := o.asked[0]
		if rows := o.pending[p]; len(rows) > 0 {
			return p, o.cut(p, n)
		}
		o.asked = o.asked[1:]
	}
	if askedOnly {
		return memory.ProjectRef{}, nil
	}
	for o.next < len(o.order) {
		p := o.order[o.next]
		if len(o.pending[p]) > 0 {
			return p, o.cut(p, n)
		}
		o.next++
	}
	return memory.ProjectRef{}, nil
}

func (o *loadOrder) cut(p memory.ProjectRef, n int) []int64 {
	rows := o.pending[p]
	part := rows[:min(n, len(rows))]
	o.pending[p] = rows[len(part):]
	return part
}

// finished marks a chunk of p's rows mirrored: p is loaded once it has none
// pending.
func (o *loadOrder) finished(p memory.ProjectRef) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.pending[p]) > 0 {
		return
	}
	delete(o.pending, p)
	if ch, ok := o.done[p]; ok {
		close(ch)
		delete(o.done, p)
	}
}

// chunkLoaded marks a chunk of p's rows mirrored (finished); when it was p's
// last, p's conversation lists are sorted before a read waiting for p is
// released (Adjacent answers nothing from a list the load is filling).
func (s *Store) chunkLoaded(p memory.ProjectRef) {
	if s.order.last(p) {
		s.idx.sortConversations()
	}
	s.order.finished(p)
}

// last reports whether p has no rows pending any more.
func (o *loadOrder) last(p memory.ProjectRef) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pending[p]) == 0
}

// end marks the load over (done or failed): every waiter is released.
func (o *loadOrder) end() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.over {
		return
	}
	o.over = true
	select {
	case <-o.mapped:
	default:
		close(o.mapped)
	}
	for p, ch := range o.done {
		close(ch)
		delete(o.done, p)
	}
	o.pending = nil
}

// await asks for p's rows to be loaded first and waits until they are, or
// until ctx ends (the read then answers from what is loaded). A global
// project is loaded before every other one: waiting for a project waits
// for those too.
func (o *loadOrder) await(ctx context.Context, p memory.ProjectRef, ended <-chan struct{}) {
	select {
	case <-o.mapped:
	case <-ctx.Done():
		return
	case <-ended:
		return
	}
	o.mu.Lock()
	if o.over {
		o.mu.Unlock()
		return
	}
	var waits []chan struct{}
	for _, q := range []memory.ProjectRef{{Tenant: p.Tenant}, p} {
		if _, ok := o.pending[q]; !ok {
			continue
		}
		ch, ok := o.done[q]
		if !ok {
			ch = make(chan struct{})
			o.done[q] = ch
		}
		if !slices.Contains(o.asked, q) {
			o.asked = append(o.asked, q)
		}
		waits = append(waits, ch)
		if q == p {
			break
		}
	}
	o.mu.Unlock()
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-ended:
			return
		}
	}
}

// DefaultProjectWait is how long a read waits at most for its project to
// be loaded during a background load (WithProjectWait): under the
// platform's default reply deadline (1.5 s), so that a turn of a project
// too big to load in time is answered from what is loaded rather than late.
const DefaultProjectWait = time.Second

// awaitProject waits, while a background load runs, until the memories of
// the filter's project (and the global ones of its tenant) are loaded,
// asking for them first; at most until ctx ends or the store's project wait
// has passed. Reads served from memory call it before they take the index
// lock.
func (s *Store) awaitProject(ctx context.Context, p memory.ProjectRef) {
	if s.order == nil {
		return
	}
	select {
	case <-s.loaded:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, s.projectWait)
	defer cancel()
	s.order.await(ctx, p, s.loaded)
}

// projectRows reads the rows up to last by tenant's project, in row order:
// the index on (tenant, project, digest) answers it without reading a
// document.
func (s *Store) projectRows(ctx context.Context, last int64) (map[memory.ProjectRef][]int64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT rid, tenant, project FROM nodes WHERE rid <= ? ORDER BY rid`, last)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[memory.ProjectRef][]int64{}
	for rows.Next() {
		var (
			rid int64
			p   memory.ProjectRef
		)
		if err := rows.Scan(&rid, &p.Tenant, &p.Project); err != nil {
			return nil, err
		}
		out[p] = append(out[p], rid)
	}
	return out, rows.Err()
}

// loadAsked loads, ahead of everything else, the projects reads are
// waiting for (between steps of the standing-instruction search). It
// returns how many rows it loaded.
func (s *Store) loadAsked(ctx context.Context) (int, error) {
	n := 0
	for {
		p, part := s.order.take(s.chunk, true)
		if part == nil {
			return n, nil
		}
		if err := s.loadRids(ctx, int64s(part)); err != nil {
			return n, err
		}
		s.chunkLoaded(p)
		n += len(part)
	}
}

func int64s(v []int64) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}
