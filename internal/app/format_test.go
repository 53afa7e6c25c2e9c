package app_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// The format gauges of a Redis store: the format as the process reads it
// (1 for a new namespace, the latest once the upgrade is finished) beside the
// latest one this version knows, which EngramStoreFormatBehind compares.
func TestFormatGauges(t *testing.T) {
	url := redisEnv(t, "ENGRAM_TEST_REDIS_URL")
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(opts)
	defer c.Close()
	ns := "formatgauges-" + t.Name()
	// A run stopped before its cleanup leaves the namespace: start afresh.
	// (t.Context is cancelled before the cleanups run.)
	if err := redis.DeleteNamespace(t.Context(), c, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = redis.DeleteNamespace(context.Background(), c, ns) })
	s, err := redis.New(c, redis.WithNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := app.RegisterFormatGauges(reg, s); err != nil {
		t.Fatal(err)
	}
	gauges := func() map[string]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			out[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
		}
		return out
	}
	if g := gauges(); g["engram_store_format"] != 1 || g["engram_store_format_latest"] != redis.FormatLatest {
		t.Fatalf("a new namespace: %v", g)
	}
	if _, err := s.FinishUpgrade(t.Context()); err != nil {
		t.Fatal(err)
	}
	if g := gauges(); g["engram_store_format"] != redis.FormatLatest {
		t.Fatalf("after finish: %v", g)
	}
}
