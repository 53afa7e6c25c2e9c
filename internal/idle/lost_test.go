package idle_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/idle"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

// A read of the activity bucket whose reply is lost (a NATS node killed
// under it) is sent again after an attempt's timeout (events.Retried)
// instead of holding the idle worker's event until its handler's deadline.
func TestObserveRepeatsALostRead(t *testing.T) {
	nc, js, cl := setup(t)
	clk := &fakeClock{now: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	newDetector(t, js, cl, clk, "a") // the bucket, created on a reliable path
	// A relay for the bucket's requests that loses the first direct get and
	// passes every other request on.
	var mu sync.Mutex
	gets := 0
	lossy := eventstest.LossyJetStream(t, nc, func(subject string) eventstest.Loss {
		if !strings.HasPrefix(subject, "DIRECT.GET.") {
			return eventstest.Pass
		}
		mu.Lock()
		defer mu.Unlock()
		if gets++; gets == 1 {
			return eventstest.LoseRequest
		}
		return eventstest.Pass
	})
	d, err := idle.New(ctxT(t), lossy, cl, idle.Options{Quiet: quiet, Clock: clk, Owner: "b", Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	// A handler's context: 15 minutes away.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Observe(ctx, "", "acme", "s1", clk.Now()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("observe: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("observe still waiting for a lost reply after 30 s")
	}
	mu.Lock()
	defer mu.Unlock()
	if gets < 2 {
		t.Fatalf("%d direct gets, the first lost: the read was not repeated through the relay", gets)
	}
}
