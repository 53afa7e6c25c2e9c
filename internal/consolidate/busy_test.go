package consolidate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
)

// TestBusyIdleEventIsNotAcknowledged: an idle event that finds the
// session's lease held is retried, not acknowledged, and consolidates the
// session once the lease is free. The chaos suite found the loss this
// prevents: a killed pass's lease outlived the worker, the idle event's
// redelivery met it, was acknowledged as "the holder covers it", and no
// other idle event came for the ended session.
func TestBusyIdleEventIsNotAcknowledged(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b.Open(t))
		h := consolidate.NewHandler(f.c, nil)
		f.say("I moved the release to Thursdays.", "Noted.")
		// The lease of a worker killed mid-pass: nobody renews it.
		const ttl = 1500 * time.Millisecond
		ok, err := f.st.AcquireLease(f.ctx, ref(), consolidate.LeaseName, "killed-worker", ttl)
		if err != nil || !ok {
			t.Fatalf("acquire: %v %v", ok, err)
		}
		expires := time.Now().Add(ttl)
		idle := events.NewSessionIdle(events.Ref{ProjectID: project, SessionID: session}, events.SessionIdle{LastActivity: time.Now()})

		err = h.Handle(f.ctx, idle)
		if !errors.Is(err, consolidate.ErrBusy) {
			t.Fatalf("handled while another pass holds the session: %v, want ErrBusy", err)
		}
		if runner.IsPermanent(err) || runner.IsUnavailable(err) {
			t.Fatalf("ErrBusy classified %v, want transient (the runner's backoff)", err)
		}
		if n := len(f.srv.ChatRequests()); n != 0 || f.cursor() != 0 {
			t.Fatalf("busy: %d model calls, cursor %d, want none and 0", n, f.cursor())
		}

		time.Sleep(time.Until(expires) + 100*time.Millisecond)
		f.srv.Enqueue(remember("The user releases on Thursdays.", "decision"), done())
		if err := h.Handle(f.ctx, idle); err != nil {
			t.Fatalf("the retry after the lease expired: %v", err)
		}
		if f.cursor() == 0 || len(f.pub.done(t)) != 1 {
			t.Fatalf("after the retry: cursor %d, %d consolidation_done, want past 0 and 1", f.cursor(), len(f.pub.done(t)))
		}
		if _, ok := f.liveTexts()["The user releases on Thursdays."]; !ok {
			t.Fatalf("live %v", f.liveTexts())
		}
	})
}
