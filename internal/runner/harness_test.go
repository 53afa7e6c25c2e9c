package runner_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/internal/runner/dlq"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
	"github.com/engram-memory/engram/pkg/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitLong bounds every wait: generous for a loaded 2-core machine.
const waitLong = 30 * time.Second

type harness struct {
	t      *testing.T
	nc     *nats.Conn
	js     jetstream.JetStream
	client *events.Client
	topo   events.Topology
	obs    *recorder
}

// newHarness starts a server with the default topology; edit changes the
// extractor consumer (the one the tests use).
func newHarness(t *testing.T, edit func(c *events.ConsumerConfig)) *harness {
	t.Helper()
	return newHarnessTopology(t, func(topo *events.Topology) {
		for i := range topo.Consumers {
			if topo.Consumers[i].Name == events.ConsumerExtractor && edit != nil {
				edit(&topo.Consumers[i])
			}
		}
	})
}

// newHarnessTopology starts a server with the test topology changed by edit.
func newHarnessTopology(t *testing.T, edit func(topo *events.Topology)) *harness {
	t.Helper()
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	edit(&topo)
	js := eventstest.Setup(t, nc, topo)
	c, err := events.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, nc: nc, js: js, client: c, topo: topo, obs: newRecorder()}
}

// config is the extractor's runner config with fast test timings.
func (h *harness) config() runner.Config {
	c := runner.ConfigFor(h.topo, events.ConsumerExtractor)
	c.BackoffBase = 20 * time.Millisecond
	c.BackoffMax = 200 * time.Millisecond
	c.UnavailableDelay = 50 * time.Millisecond
	c.GateInterval = 100 * time.Millisecond
	c.FetchWait = time.Second
	return c
}

// start runs a runner until the test ends.
func (h *harness) start(cfg runner.Config, hd runner.Handler, opts ...runner.Option) *runner.Runner {
	h.t.Helper()
	opts = append([]runner.Option{runner.WithLogger(zaptest.NewLogger(h.t)), runner.WithObserver(h.obs)}, opts...)
	r, err := runner.New(h.js, cfg, hd, opts...)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			h.t.Errorf("stop: %v", err)
		}
	})
	return r
}

// publish sends n turn_ended events.
func (h *harness) publish(n int) []events.Envelope {
	h.t.Helper()
	var out []events.Envelope
	for i := range n {
		e, err := h.client.PublishTurnEnded(context.Background(),
			events.Ref{ProjectID: "proj", SessionID: "sess", TurnID: fmt.Sprintf("t%d", i)},
			events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: fmt.Sprintf("message %d", i)}}})
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// publishSessions sends n turn_ended events, each of a session of its own
// (the runner hands a session's events out one at a time).
func (h *harness) publishSessions(n int) []events.Envelope {
	h.t.Helper()
	var out []events.Envelope
	for i := range n {
		e, err := h.client.PublishTurnEnded(context.Background(),
			events.Ref{ProjectID: "proj", SessionID: fmt.Sprintf("sess%d", i), TurnID: "t"},
			events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: fmt.Sprintf("message %d", i)}}})
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func (h *harness) letters() []dlq.Letter {
	h.t.Helper()
	ls, err := dlq.NewStore(h.js, events.StreamDLQ).List(context.Background(), 0, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return ls
}

func (h *harness) consumer() *jetstream.ConsumerInfo {
	h.t.Helper()
	c, err := h.js.Consumer(context.Background(), events.StreamIn, events.ConsumerExtractor)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return info
}

// eventually polls cond until it holds or waitLong passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recorder is an Observer that keeps everything.
type recorder struct {
	mu       sync.Mutex
	outcomes []runner.Outcome
	pauses   []error
	captured []dlq.Letter
}

func newRecorder() *recorder { return &recorder{} }

func (r *recorder) Delivered(o runner.Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes = append(r.outcomes, o)
}

func (r *recorder) Paused(_ string, cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pauses = append(r.pauses, cause)
}

func (r *recorder) Captured(_ string, l dlq.Letter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.captured = append(r.captured, l)
}

func (r *recorder) all() []runner.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]runner.Outcome(nil), r.outcomes...)
}

func (r *recorder) count(res runner.Result) int {
	n := 0
	for _, o := range r.all() {
		if o.Result == res {
			n++
		}
	}
	return n
}

func (r *recorder) pauseLog() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.pauses...)
}

func (r *recorder) captures() []dlq.Letter {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]dlq.Letter(nil), r.captured...)
}

var _ runner.Observer = (*recorder)(nil)

// memProcessed is an in-process Processed record for the tests (the real
// ones are memory.Store backends, tested by their own conformance suite).
type memProcessed struct {
	mu    sync.Mutex
	done  map[string]time.Duration
	fail  error
	marks int
}

func newMemProcessed() *memProcessed { return &memProcessed{done: map[string]time.Duration{}} }

func (m *memProcessed) key(p memory.ProjectRef, consumer, id string) string {
	return p.Tenant + "\x00" + p.Project + "\x00" + consumer + "\x00" + id
}

func (m *memProcessed) EventProcessed(_ context.Context, project memory.ProjectRef, consumer, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return false, m.fail
	}
	_, ok := m.done[m.key(project, consumer, id)]
	return ok, nil
}

func (m *memProcessed) MarkEventProcessed(_ context.Context, project memory.ProjectRef, consumer, id string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done[m.key(project, consumer, id)] = ttl
	m.marks++
	return nil
}

var _ runner.Processed = (*memProcessed)(nil)
