package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/lease"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

var errLost = errors.New("test: lease lost")

func TestHoldRenewsAndReleases(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		ctx := context.Background()
		ref := memory.SessionRef{Project: "p", Session: "s"}
		ttl := 300 * time.Millisecond
		if ok, err := st.AcquireLease(ctx, ref, "work", "me", ttl); !ok || err != nil {
			t.Fatal(ok, err)
		}
		err := lease.Hold(ctx, st, ref, "work", "me", ttl, errLost, func(ctx context.Context) error {
			time.Sleep(3 * ttl) // longer than the TTL: only renewals keep it
			if ok, err := st.AcquireLease(ctx, ref, "work", "other", ttl); ok || err != nil {
				t.Errorf("another owner took a renewed lease: %v %v", ok, err)
			}
			return ctx.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := st.AcquireLease(ctx, ref, "work", "other", ttl); !ok || err != nil {
			t.Fatalf("the lease was not released: %v %v", ok, err)
		}
	})
}

func TestHoldEndsTheWorkWhenLost(t *testing.T) {
	st := storetest.OpenSQLite(t)
	ctx := context.Background()
	ref := memory.SessionRef{Project: "p", Session: "s"}
	ttl := 150 * time.Millisecond
	if ok, err := st.AcquireLease(ctx, ref, "work", "me", ttl); !ok || err != nil {
		t.Fatal(ok, err)
	}
	// Another owner takes it over (as after an expiry): the next renewal
	// is refused and the work's context ends.
	if err := st.ReleaseLease(ctx, ref, "work", "me"); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.AcquireLease(ctx, ref, "work", "other", time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	err := lease.Hold(ctx, st, ref, "work", "me", ttl, errLost, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
			return nil
		}
	})
	if !errors.Is(err, errLost) {
		t.Fatalf("error %v, want the lost sentinel", err)
	}
	if ok, _ := st.AcquireLease(ctx, ref, "work", "third", time.Minute); ok {
		t.Fatal("Hold released a lease it did not hold")
	}
}
