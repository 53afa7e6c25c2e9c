package main

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/engram-memory/engram/internal/health"
)

// engram probe against a real health handler: /healthz passes, /readyz
// fails while a check fails and passes once it is only degraded.
func TestProbe(t *testing.T) {
	var checkErr error
	checks := &health.Checks{}
	checks.Add(health.Check{Name: "store", Run: func(context.Context) error { return checkErr }})
	srv := httptest.NewServer(health.Handler(checks, prometheus.NewRegistry()))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()

	checkErr = errors.New("redis unreachable")
	var out bytes.Buffer
	if err := probe(ctx, &out, []string{"-http", addr}); err != nil {
		t.Fatalf("probe /healthz: %v", err)
	}
	err := probe(ctx, &out, []string{"-http", addr, "-ready"})
	if err == nil || !strings.Contains(err.Error(), "HTTP 503") || !strings.Contains(err.Error(), "redis unreachable") {
		t.Fatalf("probe -ready with a failing check: %v, want HTTP 503 naming the check", err)
	}
	checkErr = health.Degraded(errors.New("model missing"))
	if err := probe(ctx, &out, []string{"-http", addr, "-ready"}); err != nil {
		t.Fatalf("probe -ready while degraded: %v", err)
	}
	if err := probe(ctx, &out, []string{"-http", "127.0.0.1:1", "-timeout", "1s"}); err == nil {
		t.Fatal("probe of a closed port passed")
	}
	if err := probe(ctx, &out, []string{"-http", ""}); !errors.Is(err, errUsage) {
		t.Fatalf("probe with the endpoint off: %v, want a usage error", err)
	}
}
