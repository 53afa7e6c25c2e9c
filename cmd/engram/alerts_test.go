package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestServeExportsAlertCountersAtStart: right after start, before anything
// happened, /metrics holds at 0 every counter that an alert rule watches
// with increase() or rate(), for every worker (and every model role) the
// process runs. A counter that first appears at its first increment has a
// single sample then, and increase() over one sample is empty: the first
// dead letter would never alert (deploy/prometheus/alerts_test.yml shows
// both cases).
func TestServeExportsAlertCountersAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the engram binary")
	}
	rules, err := os.ReadFile(filepath.Join("..", "..", "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	workers := []string{"compactor", "consolidator", "extractor", "injector"}
	// The series each counter must have at start, by the labels the rules
	// group it by.
	want := map[string][]string{}
	for _, w := range workers {
		want["engram_events_dead_lettered_total"] = append(want["engram_events_dead_lettered_total"],
			`engram_events_dead_lettered_total{source="handler",worker="`+w+`"} 0`,
			`engram_events_dead_lettered_total{source="advisory",worker="`+w+`"} 0`)
		want["engram_dlq_write_failures_total"] = append(want["engram_dlq_write_failures_total"],
			`engram_dlq_write_failures_total{worker="`+w+`"} 0`)
		want["engram_acks_waiting_durable_total"] = append(want["engram_acks_waiting_durable_total"],
			`engram_acks_waiting_durable_total{worker="`+w+`"} 0`)
	}
	for _, role := range []string{"extract", "consolidate", "summarize"} {
		for _, outcome := range []string{"budget_exhausted", "ok", "permanent", "transient"} {
			want["engram_model_calls_total"] = append(want["engram_model_calls_total"],
				`engram_model_calls_total{model="qwen2.5:3b",op="chat",outcome="`+outcome+`",project="",role="`+role+`"} 0`)
		}
	}
	// Every counter a rule takes increase() or rate() of is listed above.
	for _, m := range regexp.MustCompile(`(?:increase|rate)\((engram_[a-z_]+)`).FindAllStringSubmatch(string(rules), -1) {
		if _, ok := want[m[1]]; !ok {
			t.Errorf("alerts.yml watches %s with increase() or rate(): list the series it must have at start here", m[1])
		}
	}
	bin := buildEngram(t)
	s := startServe(t, bin, filepath.Join(t.TempDir(), "data"), nil)
	resp, err := http.Get(s.httpURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for name, series := range want {
		for _, line := range series {
			// Prometheus sorts the labels by name; empty labels are written
			// only by some encoders: accept the line without project="".
			alt := strings.Replace(line, `project="",`, "", 1)
			if !strings.Contains(string(body), "\n"+line+"\n") && !strings.Contains(string(body), "\n"+alt+"\n") {
				t.Errorf("/metrics at start lacks %s (of %s)", line, name)
			}
		}
	}
	s.stop(t)
}
