package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

const howTo = `eval "$(bash scripts/redis8.sh env)" starts Redis 8 (standalone and cluster) and sets it`

var (
	clientOnce sync.Once
	client     *goredis.Client
	clientErr  string
)

// need stops a test that lacks a service: it fails when CI is set and
// skips otherwise.
func need(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set, so this fails instead of skipping); %s", what, howTo)
	}
	t.Skipf("%s; %s", what, howTo)
}

// testClient returns the shared client of ENGRAM_TEST_REDIS_URL.
func testClient(t testing.TB) *goredis.Client {
	t.Helper()
	clientOnce.Do(func() {
		url := os.Getenv("ENGRAM_TEST_REDIS_URL")
		if url == "" {
			clientErr = "ENGRAM_TEST_REDIS_URL is not set"
			return
		}
		opt, err := goredis.ParseURL(url)
		if err != nil {
			clientErr = "ENGRAM_TEST_REDIS_URL: " + err.Error()
			return
		}
		opt.PoolSize = 32
		opt.ReadTimeout = 2 * time.Minute // a bulk PutBatch is one long EXEC
		c := goredis.NewClient(opt)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Ping(ctx).Err(); err != nil {
			clientErr = "Redis at " + url + " is not reachable: " + err.Error()
			_ = c.Close()
			return
		}
		client = c
	})
	if client == nil {
		need(t, clientErr)
	}
	return client
}

func randomNamespace() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "engramtest-" + hex.EncodeToString(b[:])
}

// openStore returns a store on a fresh namespace that is deleted when the
// test ends.
func openStore(t testing.TB, c goredis.UniversalClient, opts ...redis.Option) *redis.Store {
	t.Helper()
	ns := randomNamespace()
	s, err := redis.New(c, append([]redis.Option{redis.WithNamespace(ns)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	// At the latest format, as a deployment runs once its upgrade is
	// finished (format.go).
	if rep, err := s.FinishUpgrade(t.Context()); err != nil || rep.To != redis.FormatLatest {
		t.Fatalf("FinishUpgrade of a fresh namespace = %+v, %v", rep, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// Every test's writes left each node's copy as its own hash holds
		// it: a stale copy, or one of a node gone, would be read as the
		// node (format.go).
		if bad, err := redis.StaleNodeCopies(ctx, s); err != nil {
			t.Errorf("StaleNodeCopies: %v", err)
		} else if len(bad) > 0 {
			t.Errorf("node copies that differ from their nodes: %v", bad)
		}
		// And each term's document frequency its list's length (format.go,
		// FormatDocFreqs).
		if bad, err := redis.StaleDocFreqs(ctx, s); err != nil {
			t.Errorf("StaleDocFreqs: %v", err)
		} else if len(bad) > 0 {
			t.Errorf("document frequencies that differ from their lists: %v", bad)
		}
		// And every project holding a memory of reach anywhere in the
		// reach registry (reach.go, FormatReach).
		if missing, err := redis.MissingReach(ctx, s); err != nil {
			t.Errorf("MissingReach: %v", err)
		} else if len(missing) > 0 {
			t.Errorf("projects with memories of reach anywhere missing from the reach registry: %v", missing)
		}
		if err := redis.DeleteNamespace(ctx, c, ns); err != nil {
			t.Errorf("DeleteNamespace: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	c := testClient(t)
	memorytest.Run(t, func(t *testing.T, now func() time.Time) memory.Store {
		s := openStore(t, c, redis.WithClock(now))
		if err := s.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestNewValidatesOptions(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	_, err := redis.New(c, redis.WithNamespace("a{b}"), redis.WithClock(nil), redis.WithVectorQuantization("fp8"))
	if err == nil {
		t.Fatal("New accepted three bad options")
	}
	for _, want := range []string{"namespace", "clock", "quantization"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if _, err := redis.New(nil); err == nil {
		t.Error("New accepted a nil client")
	}
}

func TestUnavailable(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	s, err := redis.New(c)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(t.Context(), "x")
	if !errorsIs(err, memory.ErrUnavailable) {
		t.Fatalf("Get on a closed port: %v, want ErrUnavailable", err)
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
