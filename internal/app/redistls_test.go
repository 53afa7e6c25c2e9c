package app_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/testpki"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// redis8Server returns the loader command of the Redis 8 that
// scripts/redis8.sh unpacked, or skips.
func redis8Server(t *testing.T) []string {
	t.Helper()
	if os.Getenv("ENGRAM_TEST_REDIS_URL") == "" {
		t.Skip("no Redis 8 (ENGRAM_TEST_REDIS_URL unset)")
	}
	cache := os.Getenv("ENGRAM_CACHE")
	if cache == "" {
		h, _ := os.UserHomeDir()
		cache = filepath.Join(h, ".cache", "engram")
	}
	root := filepath.Join(cache, "redis8", "root")
	if runtime.GOARCH != "amd64" {
		t.Skip("the Redis 8 TLS test knows the amd64 layout only")
	}
	lib := filepath.Join(root, "usr", "lib", "x86_64-linux-gnu")
	loader := filepath.Join(lib, "ld-linux-x86-64.so.2")
	bin := filepath.Join(root, "usr", "bin", "redis-check-rdb")
	for _, p := range []string{loader, bin} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("Redis 8 not unpacked (%v): bash scripts/redis8.sh install", err)
		}
	}
	return []string{loader, "--library-path", lib, "--argv0", "redis-server", bin}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestRedisTLS runs a TLS-only Redis 8 (the one scripts/redis8.sh unpacks,
// started here on its own port and stopped at the end) that requires client
// certificates and the least-privilege ACL user of docs/security.md (redis.ACLCommands),
// and opens the store through rediss:// with
// ENGRAM_REDIS_CA, ENGRAM_REDIS_CERT and ENGRAM_REDIS_KEY. Without the
// client certificate, or without the CA, the store does not open.
func TestRedisTLS(t *testing.T) {
	server := redis8Server(t)
	p := testpki.New(t, t.TempDir())
	port := freePort(t)
	conf := filepath.Join(p.Dir, "redis.conf")
	if err := os.WriteFile(conf, []byte(strings.Join([]string{
		"port 0", fmt.Sprintf("tls-port %d", port), "bind 127.0.0.1",
		"tls-cert-file " + p.ServerCert, "tls-key-file " + p.ServerKey, "tls-ca-cert-file " + p.CA,
		"tls-auth-clients yes", `save ""`, "appendonly no", "dir " + p.Dir,
		"user default off",
		"user engram on >tls-test-pw ~engram:* resetchannels " + redis.ACLCommands,
	}, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(server[1:], conf)
	cmd := exec.Command(server[0], args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("TLS Redis did not start: %v\n%s", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	cfg := testConfig(t)
	cfg.Store.Kind = config.StoreRedis
	cfg.Store.RedisURL = fmt.Sprintf("rediss://engram:tls-test-pw@127.0.0.1:%d/0", port)
	cfg.Store.RedisCA, cfg.Store.RedisCert, cfg.Store.RedisKey = p.CA, p.ClientCert, p.ClientKey
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := app.OpenStore(ctx, cfg)
	if err != nil {
		t.Fatalf("open over TLS: %v\n%s", err, out.String())
	}
	if err := app.StoreCheck(s).Run(ctx); err != nil {
		t.Error(err)
	}
	_ = s.Close()

	noCert := cfg
	noCert.Store.RedisCert, noCert.Store.RedisKey = "", ""
	if s, err := app.OpenStore(ctx, noCert); err == nil {
		_ = s.Close()
		t.Error("opened without the client certificate the server requires")
	}
	noCA := cfg
	noCA.Store.RedisCA = ""
	if s, err := app.OpenStore(ctx, noCA); err == nil {
		_ = s.Close()
		t.Error("opened without the CA: the server's certificate was not verified")
	} else if strings.Contains(err.Error(), "tls-test-pw") {
		t.Errorf("the error repeats the password: %v", err)
	}
}
