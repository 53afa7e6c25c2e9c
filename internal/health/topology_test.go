package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

func readyz(t *testing.T, h http.Handler) (int, health.CheckResult) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var rep health.Report
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Checks {
		if c.Name == "topology" {
			return rec.Code, c
		}
	}
	t.Fatalf("no topology check in %s", rec.Body)
	return 0, health.CheckResult{}
}

// /readyz: ok; degraded with events pending for a role no worker runs;
// failed (503) once a consumer or a stream is deleted.
func TestTopologyCheckReportsMissingAndUnworked(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	js := eventstest.Setup(t, nc, topo)
	checks := &health.Checks{}
	checks.Add(health.TopologyCheck(js, topo, 200*time.Millisecond))
	h := health.Handler(checks, nil)
	ctx := context.Background()

	time.Sleep(250 * time.Millisecond) // consumers older than idleAfter
	if code, c := readyz(t, h); code != 200 || c.Status != health.StatusOK {
		t.Fatalf("fresh topology: %d %+v", code, c)
	}
	cl, _ := events.NewClient(nc)
	for range 2 {
		if _, err := cl.PublishSessionIdle(ctx, events.Ref{ProjectID: "p", SessionID: "s"}, events.SessionIdle{LastActivity: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	// A worker pulling: not reported while its pull request waits.
	cons, _ := js.Consumer(ctx, events.StreamIn, events.ConsumerInjector)
	pulling := make(chan struct{})
	go func() {
		defer close(pulling)
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(3*time.Second))
		if err == nil {
			for range b.Messages() {
			}
		}
	}()
	if _, err := cl.PublishTurnStarted(ctx, events.Ref{ProjectID: "p", SessionID: "s", TurnID: "t"}, events.TurnStarted{Text: "x"}); err != nil {
		t.Fatal(err)
	}
	<-pulling
	// The consumers count the published events asynchronously, and a
	// consumer is reported once idle for idleAfter: poll (bounded).
	code, c := readyz(t, h)
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(c.Error, "consumer consolidator: 2 events pending") && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		code, c = readyz(t, h)
	}
	if code != 200 || c.Status != health.StatusDegraded ||
		!strings.Contains(c.Error, "consumer consolidator: 2 events pending and no worker pulling") ||
		strings.Contains(c.Error, "injector") {
		t.Fatalf("pending without a worker: %d %+v", code, c)
	}
	st, err := health.Inspect(ctx, js, topo, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range st.Consumers {
		if cs.NoWorker != (cs.Name == events.ConsumerConsolidator) {
			t.Fatalf("consumer %+v", cs)
		}
	}
	if st.Streams[0].Name != events.StreamIn || st.Streams[0].Msgs != 3 || st.Streams[0].Fill() <= 0 ||
		st.Streams[0].Retention != jetstream.InterestPolicy {
		t.Fatalf("ENGRAM_IN %+v", st.Streams[0])
	}

	if err := js.DeleteConsumer(ctx, events.StreamIn, events.ConsumerCompactor); err != nil {
		t.Fatal(err)
	}
	code, c = readyz(t, h)
	if code != http.StatusServiceUnavailable || c.Status != health.StatusFailed ||
		!strings.Contains(c.Error, "consumer compactor on ENGRAM_IN missing") {
		t.Fatalf("consumer deleted: %d %+v", code, c)
	}
	if err := js.DeleteStream(ctx, events.StreamOut); err != nil {
		t.Fatal(err)
	}
	if code, c = readyz(t, h); code != http.StatusServiceUnavailable || !strings.Contains(c.Error, "stream ENGRAM_OUT missing") {
		t.Fatalf("stream deleted: %d %+v", code, c)
	}
	// engram setup puts them back.
	if err := events.EnsureTopology(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	if code, c = readyz(t, h); code != 200 || c.Status == health.StatusFailed {
		t.Fatalf("after setup: %d %+v", code, c)
	}
}

// A stream over FillWarn is degraded.
func TestTopologyCheckReportsFullStream(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	topo.DLQ.MaxBytes = 4 << 10
	js := eventstest.Setup(t, nc, topo)
	for i := range 4 {
		if _, err := js.Publish(context.Background(), "engram.dlq.extractor", []byte(strings.Repeat("x", 900+i))); err != nil {
			t.Fatal(err)
		}
	}
	err := health.TopologyCheck(js, topo, 0).Run(context.Background())
	if !errors.Is(err, health.ErrDegraded) || !strings.Contains(err.Error(), "stream ENGRAM_DLQ") || !strings.Contains(err.Error(), "% full") {
		t.Fatalf("full DLQ: %v", err)
	}
}
