package redis_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestPurgeRewritesTheAppendOnlyFile: on a Redis with an append-only file
// (a private server of its own, plain commands, no RDB preamble, so that
// the file can be read), the file still replays an erased session's
// texts after the erasure, and no longer after Purge, run as the
// least-privilege ACL user (redis.ACLCommands); the kept session's texts
// are still there.
func TestPurgeRewritesTheAppendOnlyFile(t *testing.T) {
	dir := t.TempDir()
	addr := redisServer(t, "dir "+dir, "appendonly yes", "aof-use-rdb-preamble no", "appendfsync always")
	c := aclClient(t, addr, append([]string{"~engram:*", "resetchannels"}, strings.Fields(redis.ACLCommands)...)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := redis.New(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, sess := range []string{"gone", "kept"} {
		ref := memory.SessionRef{Project: "p", Session: sess}
		if _, err := st.Upsert(ctx, memory.Node{ProjectID: "p", SessionID: sess, Subkind: memory.Observation, Label: sess + " wombat memory text"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.AppendTranscript(ctx, ref, "t1", []memory.Message{{Role: memory.RoleUser, Content: sess + " wombat said this"}}); err != nil {
			t.Fatal(err)
		}
	}
	aof := func() []byte {
		var all []byte
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.Contains(path, "appendonly") {
				b, _ := os.ReadFile(path)
				all = append(all, b...)
			}
			return nil
		})
		return all
	}
	if _, err := st.Erase(ctx, memory.EraseScope{Project: "p", Session: "gone"}, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(aof(), []byte("gone wombat said this")) {
		t.Fatal("the append-only file does not replay the erased text before Purge: this test cannot tell Purge works")
	}
	rep, err := st.Purge(ctx)
	if err != nil || len(rep.Incomplete) > 0 || !strings.Contains(strings.Join(rep.Done, " "), "BGREWRITEAOF") {
		t.Fatalf("Purge: %+v %v", rep, err)
	}
	after := aof()
	for _, gone := range []string{"gone wombat memory text", "gone wombat said this"} {
		if bytes.Contains(after, []byte(gone)) {
			t.Fatalf("%q is still in the append-only file after Purge", gone)
		}
	}
	for _, kept := range []string{"kept wombat memory text", "kept wombat said this"} {
		if !bytes.Contains(after, []byte(kept)) {
			t.Fatalf("the kept %q is not in the rewritten append-only file", kept)
		}
	}
}

// redis8Server returns the loader command of the Redis 8 that
// scripts/redis8.sh unpacked, or skips.
func redis8Server(t testing.TB) []string {
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
		t.Skip("the private Redis 8 is started from the amd64 layout only")
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
