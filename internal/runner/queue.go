package runner

import (
	"container/list"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/pkg/events"
)

// delivery is a message the runner holds: pulled, waiting in the queue or
// being handled.
type delivery struct {
	msg     jetstream.Msg
	meta    *jetstream.MsgMetadata
	metaErr error
	// decoded: ev and evErr are set (the intake decodes when the runner
	// schedules fairly or knows deadlines; otherwise the worker does).
	decoded  bool
	ev       events.Envelope
	evErr    error
	deadline time.Time // zero: none
	queued   time.Time // when the intake queued it, or its last InProgress
	// failovers is the durable store's failover count when its handler
	// last began (counted: it did); redone how many times a failover got
	// it handled again (Runner.lostWrites).
	failovers   uint64
	counted     bool
	redone      int
	redoPending bool // a run again for a failover is due or failed: the processed record does not answer for it
	owedNoted   bool // the run again a failover seen while waiting for durability calls for is recorded as owed
	// first: nothing can have been done for it yet (see Runner.firstDelivery).
	first bool
	// from is its sender (senderOf), which the queue serves in turn and
	// one delivery at a time.
	from sender
	// Its handler said Wait: how often, since when, and when it is due.
	waits     int
	waitSince time.Time
	due       time.Time
	slotless  bool // back from a wait: holds no window slot
	// lane is the consumer it came from, whose window slot it holds.
	lane *lane
}

// expired: past its deadline on its first delivery, before any handler
// call, so it can be dropped without any work (a redelivery, or a delivery
// back from a wait, may have been answered before: it goes to the handler,
// which knows what to do with a late event).
func (d *delivery) expired(now time.Time) bool {
	return !d.deadline.IsZero() && now.After(d.deadline) && d.first
}

// senderLevels is how deep the fair queue goes: tenant, project, session.
const senderLevels = 3

// sender is where a delivery queues: its tenant, project and session, read
// from its subject (which the bus's permissions vouch for; the body must
// say the same, which the handler's path checks). A subject that does not
// parse queues apart, as a sender of its own.
type sender [senderLevels]string

// queue holds the deliveries the runner pulled and no worker took yet.
//
// One session at a time: a session's next delivery is not handed out while
// another of the same session is in a handler, so a session's events are
// handled one after the other, in stream order (a worker with two handlers
// used to store a session's turns out of order now and then: t3 before t2).
//
// Fair (WithFairness), it serves senders in turn, round-robin at each level:
// the next tenant with something queued, within it the next project, within
// it the next session, that session's oldest delivery; then each moves to
// the back of its ring. A flood from one tenant (any number of its projects
// and sessions) therefore gets one turn in two while another tenant has
// something queued, one session's backlog never comes before another
// session's next event, and a sender that sends once is served within one
// round, however long the others' backlogs. Not fair: first in, first out
// (the oldest delivery whose session is free).
type queue struct {
	fair bool

	mu       sync.Mutex
	root     *qnode         // fair
	fifo     []*delivery    // not fair
	n        int            // deliveries queued
	inflight map[sender]int // sessions with a delivery in a handler
	closed   bool
	wake     chan struct{} // a push, a release or close happened (capacity 1)
}

// qnode is a tenant, project or session (a leaf, holding deliveries). A
// node is in its parent's ring exactly while something below it is queued.
type qnode struct {
	key      string
	full     sender // leaf: the session
	parent   *qnode
	elem     *list.Element // in parent.ring
	ring     *list.List    // of *qnode with something queued
	children map[string]*qnode
	items    []*delivery // leaf: FIFO, from head
	head     int
	n        int
}

func newQueue(fair bool) *queue {
	return &queue{fair: fair, root: newQNode("", nil), inflight: map[sender]int{}, wake: make(chan struct{}, 1)}
}

func newQNode(key string, parent *qnode) *qnode {
	return &qnode{key: key, parent: parent, ring: list.New(), children: map[string]*qnode{}}
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// push queues d (never blocks: the runner's window bounds what it holds).
func (q *queue) push(d *delivery) {
	q.mu.Lock()
	q.n++
	if !q.fair {
		q.fifo = append(q.fifo, d)
		q.mu.Unlock()
		q.signal()
		return
	}
	n := q.root
	for _, k := range d.from {
		c := n.children[k]
		if c == nil {
			c = newQNode(k, n)
			n.children[k] = c
		}
		n = c
	}
	n.full = d.from
	n.items = append(n.items, d)
	for n != q.root {
		n.n++
		if n.elem == nil {
			n.elem = n.parent.ring.PushBack(n)
		}
		n = n.parent
	}
	q.root.n++
	q.mu.Unlock()
	q.signal()
}

// pop takes the next delivery whose session is free and marks its session
// busy until release; it waits while there is none and returns false once
// the queue is closed and empty.
func (q *queue) pop() (*delivery, bool) {
	for {
		q.mu.Lock()
		if d := q.take(); d != nil {
			q.inflight[d.from]++
			more := q.n > 0
			q.mu.Unlock()
			if more {
				q.signal() // another worker may take the next
			}
			return d, true
		}
		if q.closed && q.n == 0 {
			q.mu.Unlock()
			q.signal()
			return nil, false
		}
		q.mu.Unlock()
		<-q.wake
	}
}

// release marks d's session free again (its handler returned).
func (q *queue) release(d *delivery) {
	q.mu.Lock()
	if q.inflight[d.from]--; q.inflight[d.from] <= 0 {
		delete(q.inflight, d.from)
	}
	more := q.n > 0
	q.mu.Unlock()
	if more {
		q.signal()
	}
}

// take removes the next delivery whose session is free (lock held); nil
// when there is none.
func (q *queue) take() *delivery {
	if !q.fair {
		for i, d := range q.fifo {
			if q.inflight[d.from] == 0 {
				q.fifo = append(q.fifo[:i], q.fifo[i+1:]...)
				q.n--
				return d
			}
		}
		return nil
	}
	leaf := q.freeLeaf(q.root)
	if leaf == nil {
		return nil
	}
	return q.removeHead(leaf, true)
}

// freeLeaf is the first session in ring order with something queued and
// no delivery in a handler (at most as many are busy as there are
// handlers, so the search is short).
func (q *queue) freeLeaf(n *qnode) *qnode {
	if n.ring.Len() == 0 {
		if n != q.root && n.n > 0 && q.inflight[n.full] == 0 {
			return n
		}
		return nil
	}
	for e := n.ring.Front(); e != nil; e = e.Next() {
		if l := q.freeLeaf(e.Value.(*qnode)); l != nil {
			return l
		}
	}
	return nil
}

// removeHead takes the leaf's first delivery out of the queue (lock held).
// served: it is handed out (take), so the leaf and its ancestors that still
// hold something move to the back of their rings (round-robin); purge
// drops expired ones without touching the order.
func (q *queue) removeHead(leaf *qnode, served bool) *delivery {
	d := leaf.items[leaf.head]
	leaf.items[leaf.head] = nil
	leaf.head++
	if leaf.head == len(leaf.items) {
		leaf.items, leaf.head = leaf.items[:0], 0
	}
	q.n--
	q.root.n--
	for n := leaf; n != q.root; n = n.parent {
		n.n--
		p := n.parent
		if n.n == 0 {
			p.ring.Remove(n.elem)
			n.elem = nil
			delete(p.children, n.key)
		} else if served {
			p.ring.MoveToBack(n.elem)
		}
	}
	return d
}

// purge removes the expired first deliveries at the head of every sender's
// queue (a sender's events come in order, so their deadlines mostly do
// too) and returns them: they free their window slots at once, without
// waiting for their sender's turn.
func (q *queue) purge(now time.Time) []*delivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*delivery
	if !q.fair {
		keep := q.fifo[:0]
		for _, d := range q.fifo {
			if d.expired(now) {
				out = append(out, d)
				q.n--
			} else {
				keep = append(keep, d)
			}
		}
		clear(q.fifo[len(keep):])
		q.fifo = keep
		return out
	}
	var leaves []*qnode
	q.collectLeaves(q.root, &leaves)
	for _, leaf := range leaves {
		for leaf.n > 0 && leaf.items[leaf.head].expired(now) {
			out = append(out, q.removeHead(leaf, false))
		}
	}
	return out
}

func (q *queue) collectLeaves(n *qnode, out *[]*qnode) {
	if n.ring.Len() == 0 {
		if n != q.root && n.n > 0 {
			*out = append(*out, n)
		}
		return
	}
	for e := n.ring.Front(); e != nil; e = e.Next() {
		q.collectLeaves(e.Value.(*qnode), out)
	}
}

// queued returns every queued delivery (lock held).
func (q *queue) queued() []*delivery {
	if !q.fair {
		return q.fifo
	}
	var leaves []*qnode
	q.collectLeaves(q.root, &leaves)
	var out []*delivery
	for _, leaf := range leaves {
		out = append(out, leaf.items[leaf.head:]...)
	}
	return out
}

// stale returns the deliveries queued (or last kept alive) before cutoff
// and marks them kept alive at now: the caller sends each an InProgress,
// so that a delivery waiting its turn is not redelivered by the server.
func (q *queue) stale(cutoff, now time.Time) []*delivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*delivery
	for _, d := range q.queued() {
		if d.queued.Before(cutoff) {
			d.queued = now
			out = append(out, d)
		}
	}
	return out
}

// len is how many deliveries wait.
func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// close wakes the workers; pop then drains what is left and ends.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

// drain removes and returns everything queued, busy sessions' too.
func (q *queue) drain() []*delivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := append([]*delivery(nil), q.queued()...)
	q.fifo, q.root, q.n = nil, newQNode("", nil), 0
	return out
}
