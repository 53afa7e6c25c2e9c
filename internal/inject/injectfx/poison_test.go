package injectfx_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/app/apptest"
	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/internal/inject/injectfx"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/llmtest"

	"go.uber.org/fx"
)

// The reproduction on a whole process: ENGRAM_DLQ at its limit,
// 256 poison turn_started (as many as the injector's max ack pending then),
// then 96 valid turns from platforms waiting for their blocks. Before
// parking, 0 of the 96 were answered over 80 s and /readyz said ready;
// now every one is answered and the readiness check "dead-letters" says
// the letters wait in the store.
func TestValidTurnsAnsweredWithAFullDLQ(t *testing.T) {
	const poison, valid = 256, 96
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := llmtest.New(t)
	cfg := apptest.Config(t, srv.Config())
	cfg.Events.DLQMaxBytes = 4 << 10
	cfg.Events.MaxAckPending = poison // the injector's limit when the issue ran it
	run := apptest.StartConfig(ctx, t, cfg, "injectfx-poison", events.ConsumerInjector, []fx.Option{injectfx.Module()},
		events.WithInjectTimeout(20*time.Second))
	js, err := jetstream.New(run.Conn)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		m := nats.NewMsg(cfg.Topology().Subjects().DLQ("filler"))
		m.Data = make([]byte, 512)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			break
		}
		if i > 100 {
			t.Fatal("the DLQ never filled")
		}
	}
	for i := range poison {
		m := nats.NewMsg(cfg.Topology().Subjects().In(events.TypeTurnStarted, "", "p1", fmt.Sprintf("poison%d", i)))
		m.Data = []byte(`{"id":"x","type":"turn_started"`) // cut short
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	var answered atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, valid)
	for i := range valid {
		wg.Go(func() {
			_, err := run.Client.Inject(ctx, events.Ref{ProjectID: "p1", SessionID: fmt.Sprintf("s%d", i), TurnID: "t1"},
				events.TurnStarted{Text: "what did we decide?"})
			if err != nil {
				errs <- err
				return
			}
			answered.Add(1)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("turn not answered: %v", err)
	}
	t.Logf("%d of %d valid turns answered in %v with a full DLQ and %d poison events", answered.Load(), valid,
		time.Since(start).Round(time.Millisecond), poison)

	// The poison comes first in the stream, but a few letters may still be
	// on their way to the store when the last turn is answered.
	var check error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		check = errors.New("no dead-letters check")
		for _, c := range run.Process.Workers.Checks() {
			if c.Name == "dead-letters" {
				check = c.Run(ctx)
			}
		}
		if check != nil && strings.Contains(check.Error(), fmt.Sprintf("%d dead letters parked in the store", poison)) {
			break
		}
	}
	if !errors.Is(check, health.ErrDegraded) || !strings.Contains(check.Error(), "256 dead letters parked in the store") ||
		!strings.Contains(check.Error(), "maximum bytes exceeded") {
		t.Fatalf("dead-letters check = %v", check)
	}
}
