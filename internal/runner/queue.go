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
	// first: nothing can have been done for it yet (see Runner.firstDelivery).
	first bool
	// Its handler said Wait: how often, since when, and when it is due.
	waits     int
	waitSince time.Time
	due       time.Time
	slotless  bool // back from a wait: holds no window slot
}

// expired: past its deadline on its first delivery, so it can be dropped
// without any work (a redelivery may have been answered before: it goes to
// the handler, which knows what to do with a late event).
func (d *delivery) expired(now time.Time) bool {
	return !d.deadline.IsZero() && now.After(d.deadline) && d.first
}

// senderLevels is how deep the fair queue goes: tenant, project, session.
const senderLevels = 3

// senderOf is where a delivery queues: its tenant, project and session.
// An undecodable message queues apart, as a sender of its own.
func senderOf(d *delivery) [senderLevels]string {
	if !d.decoded || d.evErr != nil {
		return [senderLevels]string{"\x00undecodable"}
	}
	return [senderLevels]string{d.ev.TenantID, d.ev.ProjectID, d.ev.SessionID}
}

// queue holds the deliveries the runner pulled and no worker took yet.
//
// Fair (WithFairness), it serves senders in turn, round-robin at each level:
// the next tenant with something queued, within it the next project, within
// it the next session, that session's oldest delivery; then each moves to
// the back of its ring. A flood from one tenant (any number of its projects
// and sessions) therefore gets one turn in two while another tenant has
// something queued, one session's backlog never comes before another
// session's next event, and a sender that sends once is served within one
// round, however long the others' backlogs. Not fair, everything is one
// sender: first in, first out.
type queue struct {
	fair bool

	mu     sync.Mutex
	root   *qnode
	n      int
	closed bool
	wake   chan struct{} // a push or close happened (capacity 1)
}

// qnode is a tenant, project or session (a leaf, holding deliveries). A
// node is in its parent's ring exactly while something below it is queued.
type qnode struct {
	key      string
	parent   *qnode
	elem     *list.Element // in parent.ring
	ring     *list.List    // of *qnode with something queued
	children map[string]*qnode
	items    []*delivery // leaf: FIFO, from head
	head     int
	n        int
}

func newQueue(fair bool) *queue {
	return &queue{fair: fair, root: newQNode("", nil), wake: make(chan struct{}, 1)}
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
	var keys [senderLevels]string
	if q.fair {
		keys = senderOf(d)
	}
	q.mu.Lock()
	n := q.root
	for _, k := range keys {
		c := n.children[k]
		if c == nil {
			c = newQNode(k, n)
			n.children[k] = c
		}
		n = c
	}
	n.items = append(n.items, d)
	for n != q.root {
		n.n++
		if n.elem == nil {
			n.elem = n.parent.ring.PushBack(n)
		}
		n = n.parent
	}
	q.root.n++
	q.n++
	q.mu.Unlock()
	q.signal()
}

// pop takes the next delivery in fair order; it waits while the queue is
// empty and returns false once it is closed and empty.
func (q *queue) pop() (*delivery, bool) {
	for {
		q.mu.Lock()
		if q.n > 0 {
			d := q.take()
			more := q.n > 0
			q.mu.Unlock()
			if more {
				q.signal() // another worker may take the next
			}
			return d, true
		}
		if q.closed {
			q.mu.Unlock()
			q.signal()
			return nil, false
		}
		q.mu.Unlock()
		<-q.wake
	}
}

// take removes the next delivery (lock held, q.n > 0).
func (q *queue) take() *delivery {
	n := q.root
	for n.ring.Len() > 0 {
		n = n.ring.Front().Value.(*qnode)
	}
	d := n.items[n.head]
	n.items[n.head] = nil
	n.head++
	if n.head == len(n.items) {
		n.items, n.head = n.items[:0], 0
	}
	q.n--
	q.root.n--
	for ; n != q.root; n = n.parent {
		n.n--
		p := n.parent
		if n.n == 0 {
			p.ring.Remove(n.elem)
			n.elem = nil
			delete(p.children, n.key)
		} else {
			p.ring.MoveToBack(n.elem)
		}
	}
	return d
}

// remove drops the leaf's first delivery (lock held; used by purge).
func (q *queue) removeHead(leaf *qnode) *delivery {
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
		if n.n == 0 {
			n.parent.ring.Remove(n.elem)
			n.elem = nil
			delete(n.parent.children, n.key)
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
	var leaves []*qnode
	q.collectLeaves(q.root, &leaves)
	for _, leaf := range leaves {
		for leaf.n > 0 && leaf.items[leaf.head].expired(now) {
			out = append(out, q.removeHead(leaf))
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

// stale returns the deliveries queued (or last kept alive) before cutoff
// and marks them kept alive at now: the caller sends each an InProgress,
// so that a delivery waiting its turn is not redelivered by the server.
func (q *queue) stale(cutoff, now time.Time) []*delivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	var leaves []*qnode
	q.collectLeaves(q.root, &leaves)
	var out []*delivery
	for _, leaf := range leaves {
		for _, d := range leaf.items[leaf.head:] {
			if d.queued.Before(cutoff) {
				d.queued = now
				out = append(out, d)
			}
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

// drain removes and returns everything queued.
func (q *queue) drain() []*delivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*delivery
	for q.n > 0 {
		out = append(out, q.take())
	}
	return out
}
