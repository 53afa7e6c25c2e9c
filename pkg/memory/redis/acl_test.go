package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestConformanceUnderACL runs the store contract as a Redis ACL user that
// has only redis.ACLCommands on the test namespaces' keys: docs/security.md's
// least-privilege user is enough for everything the store does, and a
// command outside it (FLUSHALL) is refused.
func TestConformanceUnderACL(t *testing.T) {
	admin := testClient(t)
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	user, pw := "engramtest-acl-"+hex.EncodeToString(b[:]), "pw-"+hex.EncodeToString(b[:])
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">" + pw, "resetkeys", "~engramtest-*", "resetchannels"}
	for _, r := range strings.Fields(redis.ACLCommands) {
		args = append(args, r)
	}
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER with redis.ACLCommands: %v", err)
	}
	t.Cleanup(func() { _ = admin.Do(context.Background(), "ACL", "DELUSER", user).Err() })

	opt := *admin.Options()
	opt.Username, opt.Password = user, pw
	opt.PoolSize = 16
	opt.ReadTimeout = 2 * time.Minute
	c := goredis.NewClient(&opt)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping as the ACL user: %v", err)
	}
	if err := c.FlushAll(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("FLUSHALL as the ACL user: %v, want NOPERM", err)
	}
	if err := c.Set(ctx, "not-engram", "x", time.Second).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("a key outside the namespace pattern: %v, want NOPERM", err)
	}
	memorytest.Run(t, func(t *testing.T, now func() time.Time) memory.Store {
		s := openStore(t, c, redis.WithClock(now))
		if err := s.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
		return s
	})
}
