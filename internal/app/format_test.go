package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// The format gauges of a Redis store: the format as the process reads it
// (1 for a new namespace, the latest once the upgrade is finished) beside the
// latest one this version knows, which EngramStoreFormatBehind compares.
func TestFormatGauges(t *testing.T) {
	_, s := formatStore(t, "formatgauges")
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

// A replica refuses a Redis store at a format newer than its own (a later
// version finished its upgrade): its writes would leave what that format
// keeps stale. Behind, it warns; rolled back, it runs.
func TestCheckStoreFormat(t *testing.T) {
	c, s := formatStore(t, "checkformat")
	core, logs := observer.New(zap.WarnLevel)
	if err := app.CheckStoreFormat(t.Context(), s, zap.New(core)); err != nil {
		t.Fatalf("a new namespace: %v", err)
	}
	if logs.FilterMessageSnippet("earlier format").Len() != 1 {
		t.Fatalf("a store behind: logged %v", logs.All())
	}
	// As a later version's finish leaves it (the key format.go names).
	if err := c.Set(t.Context(), s.Namespace()+":{r}:format", redis.FormatLatest+1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	err := app.CheckStoreFormat(t.Context(), s, zap.New(core))
	if err == nil || !strings.Contains(err.Error(), "newer than this version's") || !strings.Contains(err.Error(), "engram upgrade rollback") {
		t.Fatalf("a newer format: %v", err)
	}
	if err := s.SetFormat(t.Context(), redis.FormatBase); err != nil {
		t.Fatal(err)
	}
	if err := app.CheckStoreFormat(t.Context(), s, zap.New(core)); err != nil {
		t.Fatalf("rolled back: %v", err)
	}
	if _, err := s.FinishUpgrade(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := logs.Len()
	if err := app.CheckStoreFormat(t.Context(), s, zap.New(core)); err != nil || logs.Len() != before {
		t.Fatalf("at the latest format: %v, logged %v", err, logs.All()[before:])
	}
}

// formatStore is a Redis store in a namespace of its own, made afresh (a
// run stopped before its clean-up leaves one), and its client; both go at
// the test's end, the namespace first (with a live context: t.Context is
// cancelled before the clean-ups run).
func formatStore(t *testing.T, name string) (*goredis.Client, *redis.Store) {
	t.Helper()
	opts, err := goredis.ParseURL(redisEnv(t, "ENGRAM_TEST_REDIS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	ns := name + "-" + t.Name()
	if err := redis.DeleteNamespace(t.Context(), c, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = redis.DeleteNamespace(context.Background(), c, ns) })
	s, err := redis.New(c, redis.WithNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}
