package app_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// replicatedStore keeps processed-event records and, like the Redis store
// with replicas, says its writes are not on a replica for its first
// Durable calls (storetest.Replicas' refusals).
type replicatedStore struct {
	storetest.Replicas
	mu   sync.Mutex
	done map[string]bool
}

func (s *replicatedStore) EventProcessed(_ context.Context, p memory.ProjectRef, consumer, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done[p.Tenant+"/"+p.Project+"/"+consumer+"/"+id], nil
}

func (s *replicatedStore) MarkEventProcessed(_ context.Context, p memory.ProjectRef, consumer, id string, _ time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done[p.Tenant+"/"+p.Project+"/"+consumer+"/"+id] = true
	return nil
}

// A worker whose store can wait for its replicas (the Redis store) has its
// events acknowledged only once the store says its writes are durable:
// StartWorkers takes Durable from the worker's processed-event store. A
// worker marked AckUndurable (the injector) does not ask.
func TestWorkersAcknowledgeOnceTheStoreIsDurable(t *testing.T) {
	for _, undurable := range []bool{false, true} {
		t.Run(map[bool]string{false: "durable", true: "undurable"}[undurable], func(t *testing.T) {
			st := &replicatedStore{done: map[string]bool{}}
			st.Refuse(2)
			ackOne(t, app.Worker{Role: events.ConsumerExtractor, Handler: func(context.Context, events.Envelope) error { return nil },
				Processed: st, AckUndurable: undurable})
			if want := map[bool]int{false: 3, true: 0}[undurable]; st.Calls() != want {
				t.Fatalf("Durable called %d times before the acknowledgement, want %d", st.Calls(), want)
			}
		})
	}
}

// ackOne starts w, publishes a turn_ended and waits until it is
// acknowledged.
func ackOne(t *testing.T, w app.Worker) {
	t.Helper()
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	js := eventstest.Setup(t, nc, topo)
	cfg := testConfig(t)
	cfg.Work.Workers = []string{w.Role}
	ctx := context.Background()
	ws, err := app.StartWorkers(ctx, js, topo, cfg, []app.Worker{w}, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Stop(ctx)
	cl, err := events.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.PublishTurnEnded(ctx, events.Ref{ProjectID: "p", SessionID: "s", TurnID: "t1"},
		events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: "hello"}}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := js.Consumer(ctx, topo.In.Name, events.ConsumerExtractor)
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.AckFloor.Stream == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("not acknowledged after a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The Redis store counts failovers: a worker's runner, given it as its
// Processed record, runs a handler again after one (runner.WithDurable).
var _ runner.Failovers = (*redis.Store)(nil)
