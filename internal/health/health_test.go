package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
	"github.com/engram-memory/engram/pkg/llm"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestEndpoints(t *testing.T) {
	var checks health.Checks
	storeDown := errors.New("store: connection refused")
	var storeErr error
	checks.Add(
		health.Check{Name: "nats", Run: func(context.Context) error { return nil }},
		health.Check{Name: "model", Run: func(context.Context) error { return health.Degraded(errors.New("ollama not running")) }},
		health.Check{Name: "store", Run: func(context.Context) error { return storeErr }},
	)
	reg := prometheus.NewRegistry()
	m, err := health.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := health.Listen("127.0.0.1:0", health.Handler(&checks, reg))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())

	if code, body := get(t, srv.URL()+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	code, body := get(t, srv.URL()+"/readyz")
	var rep health.Report
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatalf("/readyz body %q: %v", body, err)
	}
	if code != 200 || !rep.Ready() || len(rep.Checks) != 3 || rep.Checks[1].Status != health.StatusDegraded ||
		!strings.Contains(rep.Checks[1].Error, "ollama not running") {
		t.Errorf("/readyz with a degraded model = %d %+v", code, rep)
	}
	storeErr = storeDown
	code, body = get(t, srv.URL()+"/readyz")
	_ = json.Unmarshal([]byte(body), &rep)
	if code != http.StatusServiceUnavailable || rep.Ready() || rep.Checks[2].Status != health.StatusFailed ||
		rep.Checks[2].Error != storeDown.Error() {
		t.Errorf("/readyz with the store down = %d %+v", code, rep)
	}

	m.Delivered(runner.Outcome{Worker: "extractor", Type: events.TypeTurnEnded, Result: runner.ResultAcked, Latency: 20 * time.Millisecond})
	m.Delivered(runner.Outcome{Worker: "injector", Type: events.TypeTurnStarted, Result: runner.ResultRetried,
		Delay: time.Second, DeadLetterFailed: true})
	m.Delivered(runner.Outcome{Worker: "extractor", Type: events.TypeTurnEnded, Result: runner.ResultUndurable, Delay: time.Second})
	m.ObserveCall(llm.CallInfo{Op: "chat", Role: llm.RoleExtract, Project: "p", Model: "qwen2.5:3b", Latency: time.Second, PromptTokens: 100, CompletionTokens: 20})
	code, body = get(t, srv.URL()+"/metrics")
	for _, want := range []string{
		`engram_events_handled_total{result="acked",type="turn_ended",worker="extractor"} 1`,
		`engram_handler_duration_seconds_count{type="turn_ended",worker="extractor"} 1`,
		`engram_model_tokens_total{kind="prompt",project="",role="extract"} 100`, // no project ids by default
		`engram_dlq_write_failures_total{worker="injector"} 1`,
		`engram_acks_waiting_durable_total{worker="extractor"} 1`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if srv.Err() != nil {
		t.Fatalf("serve error after shutdown: %v", srv.Err())
	}
}

func TestListenTakenPort(t *testing.T) {
	a, err := health.Listen("127.0.0.1:0", http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	if b, err := health.Listen(a.Addr(), http.NotFoundHandler()); err == nil {
		b.Shutdown(context.Background())
		t.Fatal("second Listen on the same port succeeded")
	}
}

func TestMetricsFromARealRunner(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	for _, s := range []*events.StreamConfig{&topo.In, &topo.Out, &topo.DLQ} {
		s.MaxBytes = 8 << 20
	}
	js := eventstest.Setup(t, nc, topo)
	reg := prometheus.NewRegistry()
	m, err := health.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	lag, err := health.NewLag(reg, js, events.StreamIn, events.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, _ := events.NewClient(nc)
	for i := 0; i < 3; i++ {
		if _, err := cl.PublishTokensReported(ctx, events.Ref{ProjectID: "p", SessionID: "s"}, events.TokensReported{InputTokens: int64(10 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Undecodable: dead-lettered at once.
	if _, err := js.Publish(ctx, topo.Subjects().In(events.TypeTokensReported, "", "p", "s"), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	// The stream stored each event before acknowledging its publish, but
	// the consumer counts it a moment later: the pending count is polled.
	refreshUntil(ctx, t, lag, "pending 4 before the runner", func() bool {
		return gaugeValue(t, reg, "engram_consumer_pending", "compactor") == 4
	})
	if got := gaugeValue(t, reg, "engram_stream_fill_ratio", events.StreamIn); got <= 0 || got > 0.01 {
		t.Fatalf("ENGRAM_IN fill before the runner = %v", got)
	}

	r, err := runner.New(js, runner.ConfigFor(topo, events.ConsumerCompactor), func(ctx context.Context, ev events.Envelope) error {
		return nil
	}, runner.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for sumCounter(t, reg, "engram_events_handled_total") < 4 {
		if time.Now().After(deadline) {
			t.Fatal("runner did not handle the messages")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sumCounter(t, reg, "engram_events_dead_lettered_total"); got != 1 {
		t.Errorf("dead lettered = %v, want 1", got)
	}
	// Interest retention: what the only consumer of the type handled is
	// gone, once the server has processed the acks (asynchronously).
	refreshUntil(ctx, t, lag, "nothing pending and ENGRAM_IN empty after the runner", func() bool {
		return gaugeValue(t, reg, "engram_consumer_pending", "compactor") == 0 &&
			gaugeValue(t, reg, "engram_stream_fill_ratio", events.StreamIn) == 0
	})
	if got := gaugeValue(t, reg, "engram_stream_messages", events.StreamDLQ); got != 1 {
		t.Errorf("DLQ messages = %v, want 1", got)
	}
	if got := gaugeValue(t, reg, "engram_stream_fill_ratio", events.StreamDLQ); got <= 0 {
		t.Errorf("DLQ fill = %v", got)
	}
}

// refreshUntil refreshes the lag gauges until cond holds (the server
// updates consumer counts and interest deletions asynchronously), failing
// after 30 s.
func refreshUntil(ctx context.Context, t *testing.T, lag *health.Lag, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := lag.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gaugeValue is the value of the gauge of name whose label values include label.
func gaugeValue(t *testing.T, g prometheus.Gatherer, name, label string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if lp.GetValue() == label {
					return mt.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{...%q...}", name, label)
	return 0
}

func sumCounter(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, mt := range mf.GetMetric() {
				sum += mt.GetCounter().GetValue()
			}
		}
	}
	return sum
}
