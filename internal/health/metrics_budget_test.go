package health_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

// A call refused for a spent token budget is counted with its own outcome
// (the "token budget spent" alert), not as a plain transient failure.
func TestModelCallsCountBudgetExhausted(t *testing.T) {
	srv := llmtest.New(t)
	srv.OnChatAlways(nil, llmtest.Text("ok").Tokens(60, 40))
	reg := prometheus.NewRegistry()
	m, err := health.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := srv.Config()
	cfg.DailyTokenBudget = 100
	c, err := llm.New(cfg, llm.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{Role: llm.RoleExtract, Project: "p", Messages: []llm.Message{{Author: "user", Content: "q"}}}
	if _, err := c.Chat(context.Background(), req); err != nil {
		t.Fatalf("call within the budget: %v", err)
	}
	if _, err := c.Chat(context.Background(), req); !errors.Is(err, llm.ErrBudgetExhausted) {
		t.Fatalf("call over the budget: %v, want ErrBudgetExhausted", err)
	}
	calls, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range calls {
		if mf.GetName() != "engram_model_calls_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "outcome" {
					got[l.GetValue()] += mt.GetCounter().GetValue()
				}
			}
		}
	}
	if got["ok"] != 1 || got[health.OutcomeBudgetExhausted] != 1 || len(got) != 2 {
		t.Fatalf("engram_model_calls_total by outcome = %v, want ok 1 and %s 1", got, health.OutcomeBudgetExhausted)
	}
}
