package runner

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/pkg/events"
)

func qd(tenant, project, session string, deadline time.Time, delivered uint64) *delivery {
	return &delivery{decoded: true, meta: &jetstream.MsgMetadata{NumDelivered: delivered}, deadline: deadline, first: delivered == 1,
		ev: events.Envelope{TenantID: tenant, ProjectID: project, SessionID: session}, from: sender{tenant, project, session}}
}

func name(d *delivery) string { return d.ev.TenantID + "/" + d.ev.ProjectID + "/" + d.ev.SessionID }

// Round-robin at each level: tenants, then a tenant's projects, then a
// project's sessions; oldest first within a session.
func TestQueueOrder(t *testing.T) {
	q := newQueue(true)
	for _, d := range []*delivery{
		qd("A", "p1", "s1", time.Time{}, 1), qd("A", "p1", "s1", time.Time{}, 1), qd("A", "p1", "s2", time.Time{}, 1),
		qd("A", "p2", "s1", time.Time{}, 1), qd("A", "p1", "s1", time.Time{}, 1), qd("B", "p1", "s1", time.Time{}, 1),
		qd("B", "p1", "s1", time.Time{}, 1),
	} {
		q.push(d)
	}
	var got []string
	for q.len() > 0 {
		d, _ := q.pop()
		got = append(got, name(d))
		q.release(d)
	}
	want := []string{"A/p1/s1", "B/p1/s1", "A/p2/s1", "B/p1/s1", "A/p1/s2", "A/p1/s1", "A/p1/s1"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	q.close()
	if _, ok := q.pop(); ok {
		t.Fatal("pop from a closed empty queue")
	}
}

func TestQueueFIFOWhenNotFair(t *testing.T) {
	q := newQueue(false)
	for _, tn := range []string{"A", "B", "A", "C"} {
		q.push(qd(tn, "p", "s", time.Time{}, 1))
	}
	var got string
	for q.len() > 0 {
		d, _ := q.pop()
		got += d.ev.TenantID
		q.release(d)
	}
	if got != "ABAC" {
		t.Fatalf("order %s", got)
	}
}

// purge takes the expired first deliveries at the head of each sender's
// queue, never a redelivery; stale marks what waited too long.
func TestQueuePurgeAndStale(t *testing.T) {
	now := time.Now()
	past, future := now.Add(-time.Second), now.Add(time.Hour)
	q := newQueue(true)
	q.push(qd("A", "p", "s", past, 1))
	q.push(qd("A", "p", "s", past, 1))
	q.push(qd("A", "p", "s", future, 1))
	q.push(qd("B", "p", "s", past, 2)) // a redelivery: the handler decides
	q.push(qd("C", "p", "s", past, 1))
	if got := q.purge(now); len(got) != 3 {
		t.Fatalf("purged %d, want 3", len(got))
	}
	if q.len() != 2 {
		t.Fatalf("%d left", q.len())
	}
	q2 := newQueue(true)
	old := qd("A", "p", "s", time.Time{}, 1)
	old.queued = now.Add(-time.Minute)
	fresh := qd("A", "p", "s", time.Time{}, 1)
	fresh.queued = now
	q2.push(old)
	q2.push(fresh)
	if got := q2.stale(now.Add(-time.Second), now); len(got) != 1 || got[0] != old || !old.queued.Equal(now) {
		t.Fatalf("stale %d", len(got))
	}
	if got := q2.stale(now.Add(-time.Second), now); len(got) != 0 {
		t.Fatal("kept alive twice")
	}
}

// One delivery per session in a handler: the session's next waits for the
// release; other sessions go on meanwhile.
func TestQueueOneAtATimePerSession(t *testing.T) {
	for _, fair := range []bool{true, false} {
		q := newQueue(fair)
		a1, a2, b1 := qd("A", "p", "s", time.Time{}, 1), qd("A", "p", "s", time.Time{}, 1), qd("B", "p", "s", time.Time{}, 1)
		q.push(a1)
		q.push(a2)
		q.push(b1)
		if d, _ := q.pop(); d != a1 {
			t.Fatalf("fair=%v: first %s", fair, name(d))
		}
		if d, _ := q.pop(); d != b1 {
			t.Fatalf("fair=%v: a2 handed out while a1 is in a handler", fair)
		}
		q.mu.Lock()
		none := q.take()
		q.mu.Unlock()
		if none != nil {
			t.Fatalf("fair=%v: %s handed out while its session is busy", fair, name(none))
		}
		q.release(a1)
		if d, _ := q.pop(); d != a2 {
			t.Fatalf("fair=%v: after the release %s", fair, name(d))
		}
	}
}
