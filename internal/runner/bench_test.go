package runner_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

// BenchmarkRunnerThroughput: events pulled, decoded, handled (no-op),
// recorded as processed and acked, per event, by concurrency.
func BenchmarkRunnerThroughput(b *testing.B) {
	for _, conc := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			_, nc := eventstest.RunServer(b)
			topo := eventstest.Topology()
			js := eventstest.Setup(b, nc, topo)
			c, err := events.NewClient(nc)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			n := b.N
			for i := range n {
				if _, err := c.PublishTurnEnded(ctx, events.Ref{ProjectID: "p", SessionID: "s", TurnID: fmt.Sprint(i)},
					events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: "x"}}}); err != nil {
					b.Fatal(err)
				}
			}
			var done atomic.Int64
			all := make(chan struct{})
			cfg := runner.ConfigFor(topo, events.ConsumerExtractor)
			cfg.Concurrency = conc
			cfg.FetchWait = time.Second
			r, err := runner.New(js, cfg, func(context.Context, events.Envelope) error {
				if done.Add(1) == int64(n) {
					close(all)
				}
				return nil
			}, runner.WithProcessed(newMemProcessed()))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			if err := r.Start(ctx); err != nil {
				b.Fatal(err)
			}
			select {
			case <-all:
			case <-time.After(5 * time.Minute):
				b.Fatal("not all handled")
			}
			b.StopTimer()
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := r.Stop(sctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}
