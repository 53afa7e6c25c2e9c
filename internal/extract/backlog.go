package extract

import (
	"context"
	"fmt"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// Kick wakes the backlog embedder (a memory was stored without a vector).
func (x *Extractor) Kick() {
	select {
	case x.kick <- struct{}{}:
	default:
	}
}

// EmbedPending embeds memories that have no vector from the configured
// embedder, in batches, until none is left or a call fails
// (memory.EmbedPending). It returns how many it embedded.
func (x *Extractor) EmbedPending(ctx context.Context) (int, error) {
	if x.emb == nil {
		return 0, nil
	}
	n, err := memory.EmbedPending(ctx, x.store, x.emb, x.cfg.EmbedBatch)
	if err != nil {
		return n, fmt.Errorf("extract: %w", err)
	}
	return n, nil
}

// RunBacklog embeds pending memories every Config.BacklogPeriod and when
// kicked, until ctx ends. Failures (the embedder is down) are reported to
// onErr (may be nil) and retried at the next period, backing off up to a
// minute. It returns when ctx ends.
func (x *Extractor) RunBacklog(ctx context.Context, onErr func(error)) {
	if x.emb == nil {
		<-ctx.Done()
		return
	}
	period := x.cfg.BacklogPeriod
	wait := time.Duration(0) // first pass at once
	for {
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-x.kick:
			timer.Stop()
		}
		_, err := x.EmbedPending(ctx)
		switch {
		case err == nil:
			wait = period
		case ctx.Err() != nil:
			return
		default:
			if onErr != nil {
				onErr(err)
			}
			wait = min(max(2*wait, period), time.Minute)
		}
	}
}
