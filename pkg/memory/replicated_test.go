package memory_test

import (
	"context"
	"errors"
	"testing"

	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// SettleWritten makes the writes again after each failover and waits
// again, up to memory.RewriteTries waits; a write made again that fails
// ends it with that error; replicas that never acknowledge end it with
// ErrNotReplicated and nothing written again.
func TestSettleWritten(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		failing  int
		refuse   bool
		againErr error
		want     error
		again    int
	}{
		{name: "no failover", want: nil, again: 0},
		{name: "one failover", failing: 1, want: nil, again: 1},
		{name: "a failover at every wait", failing: 1 << 10, want: memory.ErrFailedOver, again: memory.RewriteTries - 1},
		{name: "writing again fails", failing: 1, againErr: memory.ErrUnavailable, want: memory.ErrUnavailable, again: 1},
		{name: "no replica acknowledges", refuse: true, want: memory.ErrNotReplicated, again: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &storetest.Replicas{}
			failing := c.failing
			r.OnDurable = func() {
				if failing > 0 {
					failing--
					r.Failover() // while the writes were waited for
				}
			}
			if c.refuse {
				r.Refuse(1 << 10)
			}
			again := 0
			err := memory.SettleWritten(ctx, r, r.Failovers(), func(context.Context) error {
				again++
				return c.againErr
			})
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if again != c.again {
				t.Fatalf("written again %d times, want %d", again, c.again)
			}
		})
	}
}
