package health_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/pkg/llm"
)

// Issue 23: /metrics needs no credentials, so by default no metric names a
// project (a tenant); with project labels on, an attacker choosing project
// ids still cannot grow the series past MaxProjectLabels.
func TestMetricsProjectLabels(t *testing.T) {
	call := func(m *health.Metrics, project string) {
		m.ObserveCall(llm.CallInfo{Op: "chat", Role: llm.RoleExtract, Project: project, Model: "m",
			Latency: time.Millisecond, PromptTokens: 3, CompletionTokens: 1})
	}
	gather := func(reg *prometheus.Registry) string {
		var b strings.Builder
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					fmt.Fprintf(&b, "%s %s=%q\n", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
		return b.String()
	}

	reg := prometheus.NewRegistry()
	m, err := health.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		call(m, fmt.Sprintf("tenant-%d", i))
	}
	if out := gather(reg); strings.Contains(out, "tenant-") {
		t.Errorf("a project id is on a label by default:\n%s", out)
	}
	if n := count(t, reg, "engram_model_calls_total", "engram_model_tokens_total"); n != 3 {
		t.Errorf("%d series for 500 projects, want 3 (calls, prompt and completion tokens)", n)
	}

	reg = prometheus.NewRegistry()
	m, err = health.NewMetrics(reg, health.WithProjectLabels())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		call(m, fmt.Sprintf("tenant-%d", i))
	}
	call(m, "tenant-7") // seen before the cap: keeps its series
	out := gather(reg)
	if !strings.Contains(out, `engram_model_calls_total project="tenant-7"`) || !strings.Contains(out, `project="`+health.OtherProject+`"`) {
		t.Errorf("opt-in labels lack tenant-7 or %s:\n%.2000s", health.OtherProject, out)
	}
	if strings.Contains(out, `project="tenant-100"`) {
		t.Error("the 101st project got its own series")
	}
	if n := count(t, reg, "engram_model_calls_total"); n != health.MaxProjectLabels+1 {
		t.Errorf("%d call series, want %d", n, health.MaxProjectLabels+1)
	}
}

// count is the number of series of the named metrics.
func count(t *testing.T, reg *prometheus.Registry, names ...string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		for _, name := range names {
			if mf.GetName() == name {
				n += len(mf.GetMetric())
			}
		}
	}
	return n
}

// The compactor's refusals are counted by reason.
func TestCompactionRefusals(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := health.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.CompactionRefused("cut_off")
	m.CompactionRefused("cut_off")
	m.CompactionRefused("not_smaller")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "engram_compaction_refusals_total" {
			for _, s := range mf.GetMetric() {
				got[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
			}
		}
	}
	if got["cut_off"] != 2 || got["not_smaller"] != 1 || len(got) != 2 {
		t.Fatalf("refusals %v", got)
	}
}
