package health_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

// series lists the label sets of the gauges, "name consumer=c/stream=s".
func series(t *testing.T, reg *prometheus.Registry) map[string]bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[mf.GetName()+" "+labels(m)] = true
		}
	}
	return out
}

func labels(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, "/")
}

// The finding: /metrics kept the series of consumers that no
// longer exist. A deleted consumer's series go at the next refresh, and so
// do a deleted stream's and its consumers', even though reading that
// stream now fails; a stream that cannot be read for another reason keeps
// its last values.
func TestLagForgetsWhatNoLongerExists(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	js := eventstest.Setup(t, nc, topo)
	reg := prometheus.NewRegistry()
	lag, err := health.NewLag(reg, js, topo.In.Name, topo.Out.Name, topo.DLQ.Name)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := lag.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	s := series(t, reg)
	if !s["engram_consumer_pending consumer=extractor/stream=ENGRAM_IN"] || !s["engram_stream_messages stream=ENGRAM_DLQ"] {
		t.Fatalf("series before: %v", s)
	}
	if err := js.DeleteConsumer(ctx, events.StreamIn, events.ConsumerExtractor); err != nil {
		t.Fatal(err)
	}
	if err := lag.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	s = series(t, reg)
	if s["engram_consumer_pending consumer=extractor/stream=ENGRAM_IN"] || s["engram_consumer_waiting consumer=extractor/stream=ENGRAM_IN"] ||
		!s["engram_consumer_pending consumer=injector/stream=ENGRAM_IN"] {
		t.Fatalf("after deleting the extractor's consumer: %v", s)
	}
	// A whole stream goes (an operator's `nats stream rm`).
	if err := js.DeleteStream(ctx, events.StreamIn); err != nil {
		t.Fatal(err)
	}
	if err := lag.Refresh(ctx); err == nil || !strings.Contains(err.Error(), "ENGRAM_IN") {
		t.Fatalf("refresh with a stream gone: %v", err)
	}
	s = series(t, reg)
	for k := range s {
		if strings.Contains(k, "stream=ENGRAM_IN") {
			t.Fatalf("series of the deleted stream ENGRAM_IN kept: %s", k)
		}
	}
	if !s["engram_stream_messages stream=ENGRAM_DLQ"] {
		t.Fatalf("the other streams' series went too: %v", s)
	}
}
