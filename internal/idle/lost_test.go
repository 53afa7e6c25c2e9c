package idle_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/idle"
)

// A read of the activity bucket whose reply is lost (a NATS node killed
// under it) is sent again after an attempt's timeout (events.Retried)
// instead of holding the idle worker's event until its handler's deadline.
func TestObserveRepeatsALostRead(t *testing.T) {
	nc, js, cl := setup(t)
	clk := &fakeClock{now: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	newDetector(t, js, cl, clk, "a") // the bucket, created on a reliable path
	// A relay for the bucket's reads that loses the first direct get and
	// passes every other request on.
	var mu sync.Mutex
	gets, lost := 0, 0
	sub, err := nc.Subscribe("LOSSY.API.>", func(m *nats.Msg) {
		rest := strings.TrimPrefix(m.Subject, "LOSSY.API.")
		if strings.HasPrefix(rest, "DIRECT.GET.") {
			mu.Lock()
			gets++
			first := gets == 1
			if first {
				lost++
			}
			mu.Unlock()
			if first {
				return
			}
		}
		to := "$JS.API." + rest
		if strings.HasPrefix(rest, "$KV.") {
			to = rest // a bucket's write, prefixed by the API prefix too
		}
		resp, err := nc.RequestMsg(&nats.Msg{Subject: to, Data: m.Data, Header: m.Header}, 5*time.Second)
		if err != nil {
			return
		}
		_ = m.RespondMsg(&nats.Msg{Data: resp.Data, Header: resp.Header})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	lossy, err := jetstream.NewWithAPIPrefix(nc, "LOSSY.API")
	if err != nil {
		t.Fatal(err)
	}
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
	if lost != 1 || gets < 2 {
		t.Fatalf("%d direct gets, %d lost: the read was not repeated through the relay", gets, lost)
	}
}
