package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/credurl"
	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/internal/natsembed"
	"github.com/engram-memory/engram/pkg/events"
)

// Bus is the process's NATS connection, and the embedded server when the
// process runs one.
type Bus struct {
	Conn     *nats.Conn
	JS       jetstream.JetStream
	Embedded *natsembed.Server // nil when connected to external servers
	URL      string            // what clients connect to
}

// OpenBus connects to cfg.NATS.URL, or, when embed is set and the URL is
// empty, starts an embedded server with its store in the data dir and
// connects to it. name identifies the connection on the server.
func OpenBus(ctx context.Context, cfg config.Config, embed bool, name string, log *zap.Logger) (*Bus, error) {
	b := &Bus{}
	opts := []nats.Option{
		nats.Name(name),
		nats.Timeout(cfg.NATS.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS disconnected", zap.Error(err))
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS reconnected", zap.String("url", credurl.Redact(nc.ConnectedUrl())))
		}),
	}
	var url string
	if embed && cfg.Embedded() {
		srv, err := natsembed.Start(natsembed.Options{
			StoreDir: cfg.NATSStoreDir(),
			Listen:   cfg.NATS.Listen,
			Logger:   natsLogger{log.Named("nats-server").Sugar()},
		})
		if err != nil {
			return nil, err
		}
		b.Embedded = srv
		url = srv.ClientURL()
		opts = append(opts, nats.InProcessServer(srv.NATS()))
	} else {
		url = cfg.ClientNATSURL()
	}
	b.URL = url
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		if b.Embedded != nil {
			b.Embedded.Shutdown()
		}
		return nil, fmt.Errorf("app: connect to NATS at %s: %w", credurl.Redact(url), credurl.Error(err))
	}
	b.Conn = nc
	js, err := jetstream.New(nc)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("app: jetstream: %w", err)
	}
	b.JS = js
	return b, nil
}

// Check is the bus's readiness check: connected (and the embedded server
// running).
func (b *Bus) Check() health.Check {
	return health.Check{Name: "nats", Run: func(ctx context.Context) error {
		if b.Embedded != nil {
			if err := b.Embedded.Ready(); err != nil {
				return err
			}
		}
		if !b.Conn.IsConnected() {
			return fmt.Errorf("not connected (%s)", b.Conn.Status())
		}
		if _, err := b.JS.AccountInfo(ctx); err != nil {
			return fmt.Errorf("JetStream: %w", err)
		}
		return nil
	}}
}

// Close drains the connection and stops the embedded server.
func (b *Bus) Close() {
	if b.Conn != nil {
		if err := b.Conn.Drain(); err == nil {
			deadline := time.Now().Add(5 * time.Second)
			for !b.Conn.IsClosed() && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
		}
		b.Conn.Close()
	}
	if b.Embedded != nil {
		b.Embedded.Shutdown()
	}
}

// EnsureTopology creates or updates the streams and consumers of cfg.
func EnsureTopology(ctx context.Context, js jetstream.JetStream, cfg config.Config) (events.Topology, error) {
	topo := cfg.Topology()
	if err := events.EnsureTopology(ctx, js, topo); err != nil {
		return topo, err
	}
	return topo, nil
}

// errNoStore is returned by OpenStore for a store kind that is not built in.
var errNoStore = errors.New("app: store backend not available")
