package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/credurl"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// OpenScratchStore opens a fresh, empty store of the kind cfg selects that
// holds nothing of the user's data: SQLite in a new temporary directory, or
// a new namespace on ENGRAM_REDIS_URL. The returned cleanup closes it and
// deletes what it wrote (`engram eval`).
func OpenScratchStore(ctx context.Context, cfg config.Config) (memory.Store, func() error, error) {
	switch cfg.Store.Kind {
	case config.StoreRedis:
		tlsCfg, err := cfg.Store.RedisTLS()
		if err != nil {
			return nil, nil, fmt.Errorf("app: %w", err)
		}
		client, err := redisClient(cfg.Store.RedisURL, tlsCfg)
		if err != nil {
			return nil, nil, err
		}
		var b [6]byte
		_, _ = rand.Read(b[:])
		ns := "engram-scratch-" + hex.EncodeToString(b[:])
		s, err := redis.New(client, redis.WithNamespace(ns), redis.WithVectorQuantization(cfg.Store.RedisVectorQuant))
		if err != nil {
			_ = client.Close()
			return nil, nil, fmt.Errorf("app: redis scratch store: %w", err)
		}
		if err := s.Ping(ctx); err != nil {
			_ = client.Close()
			return nil, nil, fmt.Errorf("app: redis scratch store at %s: %w", credurl.Redact(cfg.Store.RedisURL), credurl.Error(err))
		}
		// The namespace is this process's alone: at the latest format, as
		// a deployment runs once its upgrade is finished.
		if _, err := s.FinishUpgrade(ctx); err != nil {
			_ = client.Close()
			return nil, nil, fmt.Errorf("app: redis scratch store at %s: %w", credurl.Redact(cfg.Store.RedisURL), credurl.Error(err))
		}
		cleanup := func() error {
			dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := redis.DeleteNamespace(dctx, client, ns)
			return errors.Join(err, s.Close(), client.Close())
		}
		return s, cleanup, nil
	case config.StoreSQLite:
		dir, err := os.MkdirTemp("", "engram-scratch-")
		if err != nil {
			return nil, nil, fmt.Errorf("app: sqlite scratch store: %w", err)
		}
		s, err := openSQLite(ctx, filepath.Join(dir, "engram.db"))
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, nil, err
		}
		return s, func() error { return errors.Join(s.Close(), os.RemoveAll(dir)) }, nil
	}
	return nil, nil, fmt.Errorf("%w: %q", errNoStore, cfg.Store.Kind)
}
