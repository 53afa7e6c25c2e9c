package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/credurl"
	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// pinger is what a store offers to check it can be reached.
type pinger interface {
	Ping(ctx context.Context) error
}

// OpenStore opens the memory store cfg selects: SQLite in the data dir, or
// Redis 8 at ENGRAM_REDIS_URL (a comma-separated list of host:port is a
// Redis Cluster). The caller closes it. A SQLite store is returned with
// every memory loaded (the command-line tools need the whole graph); the
// processes' StoreModule opens it with the load in the background instead.
func OpenStore(ctx context.Context, cfg config.Config) (memory.Store, error) {
	return openStore(ctx, cfg)
}

// SQLiteOptions are extra options for a process's SQLite store (tests
// supply them to the fx graph, e.g. sqlite.WithLoadHook).
type SQLiteOptions []sqlite.Option

func openStore(ctx context.Context, cfg config.Config, sqliteOpts ...sqlite.Option) (memory.Store, error) {
	// the tenants whose writes lose their personal data (validated with
	// the configuration)
	if err := memory.SetPIIRedaction(cfg.RedactPII); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	switch cfg.Store.Kind {
	case config.StoreRedis:
		tlsCfg, err := cfg.Store.RedisTLS()
		if err != nil {
			return nil, fmt.Errorf("app: %w", err)
		}
		client, err := redisClient(cfg.Store.RedisURL, tlsCfg)
		if err != nil {
			return nil, err
		}
		s, err := redis.New(client, redis.WithCloseClient(), redis.WithVectorQuantization(cfg.Store.RedisVectorQuant),
			redis.WithReplicaWait(cfg.Store.RedisReplicaWait))
		if err != nil {
			_ = client.Close()
			return nil, fmt.Errorf("app: redis store: %w", err)
		}
		if err := s.Ping(ctx); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("app: redis store at %s: %w", credurl.Redact(cfg.Store.RedisURL), credurl.Error(err))
		}
		// Once per namespace written by an earlier version: a read of every
		// node's edge fields; afterwards one SISMEMBER per project.
		if err := s.EnsureContradictionHints(ctx); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("app: redis store at %s: %w", credurl.Redact(cfg.Store.RedisURL), credurl.Error(err))
		}
		// Likewise once per scope indexed before the label weighed twice:
		// every node's postings rewritten (idempotent, so an interrupted
		// start redoes only what is left); afterwards one HGET per project.
		if _, err := s.EnsureLexicalIndex(ctx); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("app: redis store at %s: %w", credurl.Redact(cfg.Store.RedisURL), credurl.Error(err))
		}
		// And once per scope written before the conversation index: every
		// node added to its conversation's set.
		if _, err := s.EnsureConversationIndex(ctx); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("app: redis store at %s: %w", credurl.Redact(cfg.Store.RedisURL), credurl.Error(err))
		}
		return s, nil
	case config.StoreSQLite:
		return openSQLite(ctx, cfg.SQLitePath(), sqliteOpts...)
	}
	return nil, fmt.Errorf("%w: %q", errNoStore, cfg.Store.Kind)
}

// redisClient makes the client of ENGRAM_REDIS_URL: one URL
// (redis://[user:password@]host:port/db, rediss:// for TLS, or a bare
// host:port) is a standalone server; a comma-separated list of them is a
// Redis Cluster, whose credentials and TLS come from the elements that carry
// them. tlsCfg (ENGRAM_REDIS_CA/CERT/KEY, config.Store.RedisTLS), when not
// nil, replaces go-redis's TLS configuration of rediss:// URLs, keeping its
// server name (the URL's host).
func redisClient(raw string, tlsCfg *tls.Config) (goredis.UniversalClient, error) {
	var parts []string
	for _, p := range strings.Split(raw, ",") {
		if p = strings.TrimSpace(p); p != "" {
			if !strings.Contains(p, "://") {
				p = "redis://" + p
			}
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return nil, errors.New("app: empty Redis URL")
	}
	if len(parts) == 1 {
		opts, err := goredis.ParseURL(parts[0])
		if err != nil {
			return nil, fmt.Errorf("app: redis URL %s: %w", credurl.Redact(parts[0]), credurl.Error(err))
		}
		opts.TLSConfig = withTLS(opts.TLSConfig, tlsCfg)
		return goredis.NewClient(opts), nil
	}
	co := &goredis.ClusterOptions{}
	for _, p := range parts {
		o, err := goredis.ParseURL(p)
		if err != nil {
			return nil, fmt.Errorf("app: redis cluster URL %s: %w", credurl.Redact(p), credurl.Error(err))
		}
		co.Addrs = append(co.Addrs, o.Addr)
		if o.Username != "" {
			co.Username = o.Username
		}
		if o.Password != "" {
			co.Password = o.Password
		}
		if o.TLSConfig != nil {
			co.TLSConfig = withTLS(o.TLSConfig, tlsCfg)
		}
	}
	return goredis.NewClusterClient(co), nil
}

// withTLS is the TLS configuration of a parsed URL (nil: plain redis://)
// with the configured CA and client certificate.
func withTLS(fromURL, configured *tls.Config) *tls.Config {
	if fromURL == nil || configured == nil {
		return fromURL
	}
	c := configured.Clone()
	c.ServerName = fromURL.ServerName
	c.InsecureSkipVerify = fromURL.InsecureSkipVerify // ?skip_verify=true in the URL
	return c
}

// loadReporter is a store that loads in-memory indexes after it opens
// (sqlite.Store).
type loadReporter interface {
	LoadStatus() memory.LoadStatus
}

// StoreCheck is the store's readiness check: failed when the store does
// not answer or its in-memory index failed to load, degraded while the
// index is loading (the injector answers from the memories loaded so far;
// the other workers wait, see StoreGate) and while the vector index is
// built (the vector channel answers by exact search).
func StoreCheck(s memory.Store) health.Check {
	return health.Check{Name: "store", Run: func(ctx context.Context) error {
		if err := reach(ctx, s); err != nil {
			return err
		}
		lr, ok := s.(loadReporter)
		if !ok {
			return nil
		}
		st := lr.LoadStatus()
		switch {
		case st.Err != nil:
			return fmt.Errorf("memory index failed to load: %w", st.Err)
		case !st.Nodes:
			return health.Degraded(fmt.Errorf("memory index loading: %d of %d memories; the injector answers from those, without the vector channel", st.Loaded, st.Total))
		case !st.Vectors:
			return health.Degraded(errors.New("vector index loading: the vector channel answers by exact search until it is built"))
		}
		return nil
	}}
}

// reach is a read that reaches the store's database or server.
func reach(ctx context.Context, s memory.Store) error {
	if p, ok := s.(pinger); ok {
		return p.Ping(ctx)
	}
	// A read that reaches the database (not an in-memory index).
	_, err := s.EventProcessed(ctx, memory.ProjectRef{Project: "engram-health"}, "engram-health", "probe")
	return err
}

// errLoading is StoreGate's answer while the in-memory index loads.
var errLoading = errors.New("memory index loading")

// loadGate fails while s is loading its in-memory index (when partial is
// false) or when loading failed.
func loadGate(s memory.Store, partial bool) error {
	lr, ok := s.(loadReporter)
	if !ok {
		return nil
	}
	st := lr.LoadStatus()
	switch {
	case st.Err != nil:
		return fmt.Errorf("memory index failed to load: %w", st.Err)
	case !st.Nodes && !partial:
		return fmt.Errorf("%w: %d of %d memories", errLoading, st.Loaded, st.Total)
	}
	return nil
}

// RegisterFormatGauges exports a Redis store's format (the process
// registers them for its Redis store; deploy tests them):
// engram_store_format is the format this replica reads the store at,
// engram_store_format_latest the latest this version knows; an alert
// (EngramStoreFormatBehind) asks for `engram upgrade finish` when the two
// differ for long.
func RegisterFormatGauges(reg prometheus.Registerer, s *redis.Store) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "engram_store_format",
			Help: "The Redis store's format as this process reads it (engram upgrade status; read from Redis at most 5 s ago).",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			return float64(s.CurrentFormat(ctx))
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "engram_store_format_latest",
			Help: "The latest Redis store format this version knows (engram upgrade finish raises the store to it).",
		}, func() float64 { return redis.FormatLatest }),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("app: store metrics: %w", err)
		}
	}
	return nil
}

// CheckStoreFormat reads a Redis store's format at start: behind this
// version's latest, it logs what to do once every replica runs this
// version; ahead of it (a replica of a later version finished its upgrade,
// and this one is an older version started after it), it refuses: this
// version's writes would leave what the newer format keeps stale (a
// posting list's document frequency, a node's copy), and its readers would
// not know. Rolling the store back (`engram upgrade rollback`, with either
// version: the base layout is kept by every version) lets it run. A format
// that cannot be read is not an error here: the readers fall back to the
// base layout, and the health check reports the store.
func CheckStoreFormat(ctx context.Context, rs *redis.Store, log *zap.Logger) error {
	f, err := rs.Format(ctx)
	switch {
	case err != nil:
		log.Warn("the Redis store's format cannot be read", zap.Error(err))
	case f > redis.FormatLatest:
		return fmt.Errorf("the Redis store is at format %d, newer than this version's %d (a later version finished its upgrade): "+
			"run that version, or roll the store back first with `engram upgrade rollback`", f, redis.FormatLatest)
	case f < redis.FormatLatest:
		log.Warn("the Redis store is at an earlier format: once every replica runs this version, run `engram upgrade finish`",
			zap.Int("format", f), zap.Int("latest", redis.FormatLatest))
	}
	return nil
}
