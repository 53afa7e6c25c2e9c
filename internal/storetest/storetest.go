// Package storetest opens every memory backend for tests of the packages
// built on the store (workers, import/export, benchmarks): SQLite in a
// temporary directory always, and Redis 8 when ENGRAM_TEST_REDIS_URL names a
// server (required when CI is set: then an unreachable server fails the test).
package storetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
	redisstore "github.com/engram-memory/engram/pkg/memory/redis"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// Backend opens a fresh, empty store of one kind.
type Backend struct {
	Name string
	Open func(t testing.TB, opts ...Option) memory.Store
}

// Option configures a test store.
type Option func(*options)

type options struct{ now func() time.Time }

// WithClock gives the store a controllable clock.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// Backends returns the backends available to this test run. SQLite is always
// there; Redis when ENGRAM_TEST_REDIS_URL is set (and mandatory under CI).
func Backends(t testing.TB) []Backend {
	out := []Backend{{Name: "sqlite", Open: OpenSQLite}}
	if url := os.Getenv("ENGRAM_TEST_REDIS_URL"); url != "" || os.Getenv("CI") != "" {
		out = append(out, Backend{Name: "redis", Open: OpenRedis})
	} else {
		t.Logf("storetest: ENGRAM_TEST_REDIS_URL is not set: Redis runs are skipped (make redis starts one)")
	}
	return out
}

// Each runs f once per available backend, as a subtest named after it.
func Each(t *testing.T, f func(t *testing.T, b Backend)) {
	for _, b := range Backends(t) {
		t.Run(b.Name, func(t *testing.T) { f(t, b) })
	}
}

func collect(opts []Option) options {
	o := options{now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// OpenSQLite opens a fresh SQLite store in a temporary directory.
func OpenSQLite(t testing.TB, opts ...Option) memory.Store {
	t.Helper()
	o := collect(opts)
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "engram.db"), sqlite.WithClock(o.now))
	if err != nil {
		t.Fatalf("storetest: open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

var namespaceSeq atomic.Int64

// OpenRedis opens a fresh Redis store in its own namespace on the server at
// ENGRAM_TEST_REDIS_URL, and deletes the namespace when the test ends.
func OpenRedis(t testing.TB, opts ...Option) memory.Store {
	t.Helper()
	url := os.Getenv("ENGRAM_TEST_REDIS_URL")
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("storetest: CI is set but ENGRAM_TEST_REDIS_URL is not: scripts/test.sh starts Redis 8")
		}
		t.Skip("storetest: ENGRAM_TEST_REDIS_URL is not set (make redis starts a Redis 8)")
	}
	o := collect(opts)
	ropts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatalf("storetest: ENGRAM_TEST_REDIS_URL: %v", err)
	}
	client := goredis.NewClient(ropts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		t.Fatalf("storetest: Redis at %s is not reachable: %v", url, err)
	}
	ns := fmt.Sprintf("t%d-%d", time.Now().UnixNano(), namespaceSeq.Add(1))
	st, err := redisstore.New(client, redisstore.WithClock(o.now), redisstore.WithNamespace(ns))
	if err != nil {
		_ = client.Close()
		t.Fatalf("storetest: open redis: %v", err)
	}
	// At the latest format, as a deployment runs once its upgrade is
	// finished (pkg/memory/redis format.go).
	if _, err := st.FinishUpgrade(ctx); err != nil {
		_ = client.Close()
		t.Fatalf("storetest: redis format: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = redisstore.DeleteNamespace(ctx, client, ns)
		_ = st.Close()
		_ = client.Close()
	})
	return st
}
