package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

func TestHoldLease(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		ctx := context.Background()
		ref := memory.SessionRef{Project: "p", Session: "s"}
		// Renewed every ttl/3: 150 ms left a renewal 100 ms to be late,
		// which a loaded machine (a whole suite beside it) overran.
		const ttl = 600 * time.Millisecond
		if ok, err := st.AcquireLease(ctx, ref, "job", "a", ttl); err != nil || !ok {
			t.Fatal(ok, err)
		}
		// Renewed while fn runs longer than the TTL, released after.
		err := memory.HoldLease(ctx, st, ref, "job", "a", ttl, func(ctx context.Context) error {
			time.Sleep(3 * ttl)
			if ok, err := st.AcquireLease(ctx, ref, "job", "b", ttl); err != nil || ok {
				t.Errorf("the held lease was taken: %v %v", ok, err)
			}
			return ctx.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := st.AcquireLease(ctx, ref, "job", "b", ttl); err != nil || !ok {
			t.Fatalf("not released: %v %v", ok, err)
		}
		// Lost: another owner holds it, so the first renewal fails and fn's
		// context ends with ErrLeaseLost.
		err = memory.HoldLease(ctx, st, ref, "job", "a", ttl, func(ctx context.Context) error {
			<-ctx.Done()
			if !errors.Is(context.Cause(ctx), memory.ErrLeaseLost) {
				t.Errorf("cause %v", context.Cause(ctx))
			}
			return ctx.Err()
		})
		if !errors.Is(err, memory.ErrLeaseLost) {
			t.Fatalf("err %v, want ErrLeaseLost", err)
		}
		// The other owner's lease survives a's release.
		if ok, err := st.RenewLease(ctx, ref, "job", "b", ttl); err != nil || !ok {
			t.Fatalf("b's lease: %v %v", ok, err)
		}
	})
}
