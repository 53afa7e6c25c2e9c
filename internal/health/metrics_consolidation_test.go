package health_test

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/engram-memory/engram/internal/health"
)

// TestConsolidationPassesByVerdict: passes and the messages of their
// windows by verdict; skipped messages were moved past unconsolidated.
func TestConsolidationPassesByVerdict(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := health.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.ConsolidationPass("done", 20)
	m.ConsolidationPass("done", 12)
	m.ConsolidationPass("skipped", 5)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, x := range mf.GetMetric() {
			if n := mf.GetName(); n == "engram_consolidation_passes_total" || n == "engram_consolidation_messages_total" {
				got[n+"/"+x.GetLabel()[0].GetValue()] = x.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{"engram_consolidation_passes_total/done": 2, "engram_consolidation_passes_total/skipped": 1,
		"engram_consolidation_messages_total/done": 32, "engram_consolidation_messages_total/skipped": 5}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("metrics %v, want %v", got, want)
	}
}
