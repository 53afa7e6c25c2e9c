package redis_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory/redacttest/rawcheck"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// privateRedis starts the Redis 8 that scripts/redis8.sh unpacked on a port
// of its own with the append-only file on (fsync on every write) in dir, and
// stops it at the end of the test; it skips where there is none.
func privateRedis(t *testing.T, dir string) *goredis.Client {
	t.Helper()
	if os.Getenv("ENGRAM_TEST_REDIS_URL") == "" {
		t.Skip("no Redis 8 (ENGRAM_TEST_REDIS_URL unset)")
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the unpacked Redis 8 layout is known for amd64 only")
	}
	cache := os.Getenv("ENGRAM_CACHE")
	if cache == "" {
		h, _ := os.UserHomeDir()
		cache = filepath.Join(h, ".cache", "engram")
	}
	lib := filepath.Join(cache, "redis8", "root", "usr", "lib", "x86_64-linux-gnu")
	loader, bin := filepath.Join(lib, "ld-linux-x86-64.so.2"), filepath.Join(cache, "redis8", "root", "usr", "bin", "redis-check-rdb")
	for _, p := range []string{loader, bin} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("Redis 8 not unpacked (%v): bash scripts/redis8.sh install", err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(loader, "--library-path", lib, "--argv0", "redis-server", bin,
		"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "yes",
		"--appendfsync", "always", "--protected-mode", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	t.Cleanup(func() { _ = c.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("private Redis did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c
}

// Issue 31: the credential forms found stored in clear, written through the
// store's write paths (node, transcript, summary), are not in the
// append-only file. The same file does hold the text around them.
func TestNoSecretInTheAppendOnlyFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := privateRedis(t, dir)
	st, err := redis.New(c)
	if err != nil {
		t.Fatal(err)
	}
	secrets := rawcheck.WriteSecrets(t, ctx, st)
	aof := filepath.Join(dir, "appendonlydir")
	if found := rawcheck.FindInDir(t, aof, []string{"noted: ", "## Critical context"}); len(found) < 2 {
		t.Fatalf("the append-only file does not hold the written text (%v): the check reads nothing", found)
	}
	for _, f := range rawcheck.FindInDir(t, aof, secrets) {
		t.Error(f)
	}
}
