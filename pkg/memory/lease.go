package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrLeaseLost is the cause of HoldLease's context (and wrapped in its
// error) when the lease could not be renewed: another owner may hold it
// now, so the work must stop and be redone by whoever does.
var ErrLeaseLost = errors.New("memory: session lease lost")

// CheckLeaseName reports ErrInvalid for a lease name that is empty, holds
// a colon or is one of the names the Redis store gives a session's other
// keys (m, turns, sum, cur, inj, brief, passat): that store keys a lease
// by the session and the name joined with colons, beside those keys, and
// an erasure (or a listing of sessions) tells a session's leases from the
// keys of another session whose id starts like it by that.
func CheckLeaseName(name string) error {
	if name == "" || strings.Contains(name, ":") || slices.Contains(reservedLeaseNames, name) {
		return fmt.Errorf("%w: lease name %q: want a non-empty name without ':', not one of %s",
			ErrInvalid, name, strings.Join(reservedLeaseNames, ", "))
	}
	return nil
}

var reservedLeaseNames = []string{"m", "turns", "sum", "cur", "inj", "brief", "passat"}

// Leases is the lease part of Sessions.
type Leases interface {
	RenewLease(ctx context.Context, s SessionRef, name, owner string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, s SessionRef, name, owner string) error
}

// HoldLease runs fn under a lease that owner has just acquired, renewing it
// every ttl/3; fn's context ends (with cause ErrLeaseLost) when a renewal
// fails or finds the lease gone, and fn's error is then wrapped with it.
// The lease is released afterwards, even when ctx has ended. Every
// goroutine it starts has returned when it returns.
func HoldLease(ctx context.Context, l Leases, s SessionRef, name, owner string, ttl time.Duration, fn func(context.Context) error) error {
	wctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(max(ttl/3, time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-wctx.Done():
				return
			case <-tick.C:
				ok, err := l.RenewLease(wctx, s, name, owner, ttl)
				if err != nil && wctx.Err() == nil {
					cancel(fmt.Errorf("%w: renew: %w", ErrLeaseLost, err))
					return
				}
				if !ok && wctx.Err() == nil {
					cancel(ErrLeaseLost)
					return
				}
			}
		}
	}()
	err := fn(wctx)
	close(done)
	wg.Wait()
	if cause := context.Cause(wctx); err != nil && errors.Is(cause, ErrLeaseLost) && ctx.Err() == nil {
		err = fmt.Errorf("%s lease of %s: %w", name, s, cause)
	}
	cancel(nil)
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	if rerr := l.ReleaseLease(rctx, s, name, owner); rerr != nil && err == nil {
		err = fmt.Errorf("release %s lease of %s: %w", name, s, rerr)
	}
	return err
}
