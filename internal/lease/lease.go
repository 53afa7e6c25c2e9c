// Package lease holds a per-session lease of the memory store while a
// worker does work on a whole session (an extraction span, a consolidation
// pass, a compaction), so that two replicas never work on one session at
// once, and a holder that dies is replaced once its lease expires.
//
// The lease itself is the store's (memory.Sessions AcquireLease,
// RenewLease, ReleaseLease); Hold renews it while the work runs and ends
// the work's context when it is lost.
package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// Leases is the lease side of the store.
type Leases interface {
	RenewLease(ctx context.Context, s memory.SessionRef, name, owner string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, s memory.SessionRef, name, owner string) error
}

// Hold runs fn while owner holds the lease name of ref (acquired by the
// caller), renewing it every ttl/3. When a renewal fails or is refused,
// fn's context is cancelled with lost (wrapping the renewal's error), and
// Hold's error wraps lost. The lease is released afterwards, also when ctx
// is done.
func Hold(ctx context.Context, l Leases, ref memory.SessionRef, name, owner string, ttl time.Duration, lost error,
	fn func(context.Context) error) error {
	wctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-wctx.Done():
				return
			case <-tick.C:
				ok, err := l.RenewLease(wctx, ref, name, owner, ttl)
				if err != nil && wctx.Err() == nil {
					cancel(fmt.Errorf("%w: renew: %w", lost, err))
					return
				}
				if !ok && wctx.Err() == nil {
					cancel(lost)
					return
				}
			}
		}
	}()
	err := fn(wctx)
	close(done)
	wg.Wait()
	if cause := context.Cause(wctx); err != nil && errors.Is(cause, lost) && ctx.Err() == nil {
		err = fmt.Errorf("%s: %w", ref, cause)
	}
	cancel(nil)
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	if rerr := l.ReleaseLease(rctx, ref, name, owner); rerr != nil && err == nil {
		err = fmt.Errorf("release lease %s of %s: %w", name, ref, rerr)
	}
	return err
}
