package redis_test

import (
	"context"
	"path/filepath"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory/redacttest/rawcheck"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// privateRedis starts the Redis 8 that scripts/redis8.sh unpacked on a port
// of its own with the append-only file on (fsync on every write) in dir, and
// stops it at the end of the test; it skips where there is none.
func privateRedis(t *testing.T, dir string) *goredis.Client {
	t.Helper()
	return plainClient(t, redisServer(t, "dir "+dir, "appendonly yes", "appendfsync always"))
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
