package app

import (
	"context"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// pinger is what a store offers to check it can be reached.
type pinger interface {
	Ping(ctx context.Context) error
}

// OpenStore opens the memory store cfg selects: SQLite in the data dir, or
// Redis 8 at ENGRAM_REDIS_URL (a comma-separated list of host:port is a
// Redis Cluster). The caller closes it.
func OpenStore(ctx context.Context, cfg config.Config) (memory.Store, error) {
	switch cfg.Store.Kind {
	case config.StoreRedis:
		client, err := redisClient(cfg.Store.RedisURL)
		if err != nil {
			return nil, err
		}
		s, err := redis.New(client, redis.WithCloseClient())
		if err != nil {
			_ = client.Close()
			return nil, fmt.Errorf("app: redis store: %w", err)
		}
		if err := s.Ping(ctx); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("app: redis store at %s: %w", redactURL(cfg.Store.RedisURL), err)
		}
		return s, nil
	case config.StoreSQLite:
		return openSQLite(ctx, cfg.SQLitePath())
	}
	return nil, fmt.Errorf("%w: %q", errNoStore, cfg.Store.Kind)
}

func redisClient(raw string) (goredis.UniversalClient, error) {
	if strings.Contains(raw, ",") || !strings.Contains(raw, "://") {
		var addrs []string
		for _, a := range strings.Split(raw, ",") {
			a = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(a, "redis://"), "rediss://"))
			if a != "" {
				addrs = append(addrs, a)
			}
		}
		return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs}), nil
	}
	opts, err := goredis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("app: redis URL %s: %w", redactURL(raw), err)
	}
	return goredis.NewClient(opts), nil
}

// redactURL drops a password from a URL for messages.
func redactURL(raw string) string {
	if i := strings.Index(raw, "@"); i >= 0 {
		if j := strings.Index(raw, "://"); j >= 0 && j < i {
			return raw[:j+3] + "***" + raw[i:]
		}
	}
	return raw
}

// StoreCheck is the store's readiness check.
func StoreCheck(s memory.Store) health.Check {
	return health.Check{Name: "store", Run: func(ctx context.Context) error {
		if p, ok := s.(pinger); ok {
			return p.Ping(ctx)
		}
		// A read that reaches the database (not an in-memory index).
		_, err := s.EventProcessed(ctx, "engram-health", "engram-health", "probe")
		return err
	}}
}
