package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestUpgradeCommand takes a Redis store written by an earlier version (no
// format key) through `engram upgrade status`, `finish` and `rollback`
// with the built binary, on a database of its own (db 11) of the test
// server, and checks what reads see at each format.
func TestUpgradeCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the engram binary")
	}
	url := os.Getenv("ENGRAM_TEST_REDIS_URL")
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("ENGRAM_TEST_REDIS_URL is not set (CI is set, so this fails instead of skipping)")
		}
		t.Skip("ENGRAM_TEST_REDIS_URL is not set")
	}
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	opts.DB = 11
	c := goredis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.FlushDB(context.Background()).Err() })

	bin := buildEngram(t)
	dir := t.TempDir()
	env := []string{"ENGRAM_DATA=" + filepath.Join(dir, "data"), "ENGRAM_STORE=redis",
		"ENGRAM_REDIS_URL=redis://" + opts.Addr + "/11", "ENGRAM_NATS_URL=nats://127.0.0.1:1", "ENGRAM_LOG_LEVEL=error"}
	if opts.Password != "" {
		t.Skip("the test server has a password; this test builds its own URL")
	}
	run := func(args ...string) string {
		t.Helper()
		stdout, stderr, code := runBin(t, bin, env, args...)
		if code != 0 {
			t.Fatalf("engram %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
		}
		return stdout
	}
	if out := run("memory", "import", filepath.Join("..", "..", "examples", "graph.jsonl")); !strings.HasPrefix(out, "imported 8 nodes") {
		t.Fatalf("import: %s", out)
	}
	// A namespace starts at the base format (no replica can know that none
	// of an earlier version writes it); this version's writes keep the
	// copies all the same.
	if out := run("upgrade", "status"); !strings.HasPrefix(out, "format 1 of 4: once every replica runs this version, run `engram upgrade finish`") {
		t.Fatalf("status of a new store: %q", out)
	}
	s, err := redis.New(c)
	if err != nil {
		t.Fatal(err)
	}
	pn := redis.DefaultNamespace + ":{p:acme/web}:pn" // pkg/memory/redis format.go
	copies, err := c.HGetAll(ctx, pn).Result()
	if err != nil || len(copies) == 0 {
		t.Fatalf("the example's project has no node copies (%v)", err)
	}
	if err := c.Del(ctx, pn).Err(); err != nil { // as an earlier version leaves it
		t.Fatal(err)
	}
	dfk := redis.DefaultNamespace + ":{p:acme/web}:df" // the document frequencies (format 3)
	dfs, err := c.HGetAll(ctx, dfk).Result()
	if err != nil || len(dfs) == 0 {
		t.Fatalf("the example's project has no document frequencies (%v)", err)
	}
	if err := c.Del(ctx, dfk).Err(); err != nil { // as an earlier version leaves it
		t.Fatal(err)
	}
	reach := redis.DefaultNamespace + ":{r}:reach" // the reach registry (format 4)
	if n, err := c.SCard(ctx, reach).Result(); err != nil || n != 1 {
		t.Fatalf("the reach registry holds %d projects (%v), want the example's one of reach anywhere", n, err)
	}
	if err := c.Del(ctx, reach).Err(); err != nil { // as an earlier version leaves it
		t.Fatal(err)
	}
	out := run("upgrade", "finish")
	if !strings.HasPrefix(out, "format 1 -> 4: ") || !strings.Contains(out, " node copies written") ||
		!strings.Contains(out, fmt.Sprintf(" %d document frequencies of ", len(dfs))) ||
		!strings.Contains(out, " 1 projects with memories of reach anywhere") {
		t.Fatalf("finish: %q", out)
	}
	again, err := c.HGetAll(ctx, pn).Result()
	if err != nil || len(again) != len(copies) {
		t.Fatalf("after finish the example's project has %d copies, want %d (%v)", len(again), len(copies), err)
	}
	for id, v := range copies {
		if again[id] != v {
			t.Fatalf("copy of %s rebuilt differently", id)
		}
	}
	if again, err := c.HGetAll(ctx, dfk).Result(); err != nil || !maps.Equal(again, dfs) {
		t.Fatalf("document frequencies rebuilt differently: %v (%v), want %v", again, err, dfs)
	}
	if out := run("upgrade", "status"); out != "format 4 (the latest)\n" {
		t.Fatalf("status after finish: %q", out)
	}
	if out := run("upgrade", "rollback"); !strings.HasPrefix(out, "format 1: ") {
		t.Fatalf("rollback: %q", out)
	}
	if f, err := s.Format(ctx); err != nil || f != redis.FormatBase {
		t.Fatalf("format after the rollback: %d (%v)", f, err)
	}
	if _, stderr, code := runBin(t, bin, env, "upgrade", "sideways"); code == 0 || !strings.Contains(stderr, "engram upgrade status | finish | rollback") {
		t.Fatalf("an unknown subcommand: exit %d, %s", code, stderr)
	}
	sq := []string{"ENGRAM_DATA=" + filepath.Join(dir, "sq"), "ENGRAM_STORE=sqlite"}
	if stdout, stderr, code := runBin(t, bin, sq, "upgrade", "finish"); code != 0 || !strings.Contains(stdout, "no format to finish") {
		t.Fatalf("upgrade finish on SQLite: exit %d\n%s%s", code, stdout, stderr)
	}
}
