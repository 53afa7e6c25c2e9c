package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/dig"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// WorkersGroup is the fx value group workers are contributed to.
const WorkersGroup = `group:"workers"`

// ProvideWorker registers a worker constructor: ctor is any function
// returning (Worker) or (Worker, error); its parameters are resolved from
// the graph (config.Config, *zap.Logger, *Bus, jetstream.JetStream,
// *nats.Conn, events.Topology, *events.Client, memory.Store, *llm.Client,
// *Telemetry).
func ProvideWorker(ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.ResultTags(WorkersGroup)))
}

// ConfigModule supplies the configuration.
func ConfigModule(cfg config.Config) fx.Option {
	return fx.Module("config", fx.Supply(cfg))
}

// LoggerModule provides the *zap.Logger and routes fx's own events to it at
// debug level.
func LoggerModule() fx.Option {
	return fx.Module("logger",
		fx.Provide(func(cfg config.Config) (*zap.Logger, error) { return NewLogger(cfg.Log) }),
		fx.Invoke(func(lc fx.Lifecycle, l *zap.Logger) {
			lc.Append(fx.StopHook(func() { _ = l.Sync() }))
		}),
	)
}

// FxLogger routes fx's own events to the *zap.Logger at debug level. It
// must be a top-level option (fx applies WithLogger per module).
func FxLogger() fx.Option {
	return fx.WithLogger(func(l *zap.Logger) fxevent.Logger {
		z := &fxevent.ZapLogger{Logger: l.Named("fx")}
		z.UseLogLevel(zapcore.DebugLevel)
		// A failure is returned by Start and reported once, as one line
		// (errStartup); fx's own error events (with the dependency graph
		// and a stack trace) are for debugging.
		z.UseErrorLevel(zapcore.DebugLevel)
		return z
	})
}

// TelemetryModule provides the metrics registry and readiness checks.
func TelemetryModule() fx.Option {
	return fx.Module("telemetry", fx.Provide(NewTelemetry))
}

// BusModule provides the NATS connection (*Bus, jetstream.JetStream,
// *nats.Conn); with embed and no ENGRAM_NATS_URL it runs the embedded
// server. name labels the connection.
func BusModule(embed bool, name string) fx.Option {
	return fx.Module("nats",
		fx.Provide(func(lc fx.Lifecycle, rel *Releases, cfg config.Config, tel *Telemetry, log *zap.Logger) (*Bus, error) {
			bus, err := OpenBus(context.Background(), cfg, embed, name, log)
			if err != nil {
				return nil, err
			}
			tel.Checks.Add(bus.Check())
			lc.Append(fx.StopHook(rel.Add(bus.Close)))
			return bus, nil
		}),
		fx.Provide(func(b *Bus) jetstream.JetStream { return b.JS }),
		fx.Provide(func(b *Bus) *nats.Conn { return b.Conn }),
	)
}

// TopologyModule provides the events.Topology after creating or updating it
// on the server, and the *events.Client publishing on it.
func TopologyModule() fx.Option {
	return fx.Module("topology",
		fx.Provide(func(cfg config.Config, bus *Bus) (events.Topology, error) {
			ctx, cancel := context.WithTimeout(context.Background(), cfg.NATS.ConnectTimeout+10*time.Second)
			defer cancel()
			if !bus.MaySetup() {
				// A least-privilege worker: `engram setup` made them.
				return CheckTopology(ctx, bus.JS, cfg)
			}
			topo, err := EnsureTopology(ctx, bus.JS, cfg)
			if storageRefused(err) {
				return topo, sizingError(ctx, err, topo, bus)
			}
			return topo, err
		}),
		fx.Provide(func(cfg config.Config, bus *Bus, topo events.Topology) (*events.Client, error) {
			return events.NewClient(bus.Conn, events.WithPrefix(topo.Prefix), events.WithJetStream(bus.JS),
				events.WithMaxEventBytes(topo.MaxEventBytes), events.WithReplyPrefixes(cfg.Events.ReplyPrefixes...))
		}),
	)
}

type storeIn struct {
	fx.In
	Lifecycle fx.Lifecycle
	Releases  *Releases
	Config    config.Config
	Telemetry *Telemetry
	Log       *zap.Logger
	SQLite    SQLiteOptions `optional:"true"`
}

// StoreModule provides the memory.Store of the configuration. It is opened
// when something needs it (a worker), and closed at stop. A SQLite store
// loads its memories into memory in the background (sqlite.WithBackgroundLoad):
// the process is ready at once, the injector answers from what is loaded,
// the other workers wait for the whole graph (StoreGate), /readyz and the
// engram_store_index_loading gauge say how far it is, and the log says when
// the memories and the vector index are loaded.
func StoreModule() fx.Option {
	return fx.Module("store",
		fx.Provide(func(in storeIn) (memory.Store, error) {
			ctx, cancel := context.WithTimeout(context.Background(), in.Config.NATS.ConnectTimeout+10*time.Second)
			defer cancel()
			opts := append([]sqlite.Option{sqlite.WithBackgroundLoad()}, in.SQLite...)
			s, err := openStore(ctx, in.Config, opts...)
			if err != nil {
				return nil, err
			}
			in.Telemetry.Checks.Add(StoreCheck(s))
			stopWatch := func() {}
			if ss, ok := s.(*sqlite.Store); ok {
				if err := RegisterLoadGauges(in.Telemetry.Registry, ss); err != nil {
					_ = s.Close()
					return nil, err
				}
				stopWatch = watchLoad(ss, in.Log.Named("store"))
			}
			if rs, ok := s.(*redis.Store); ok {
				if err := RegisterFormatGauges(in.Telemetry.Registry, rs); err != nil {
					_ = s.Close()
					return nil, err
				}
				if err := CheckStoreFormat(ctx, rs, in.Log.Named("store")); err != nil {
					_ = s.Close()
					return nil, err
				}
			}
			in.Lifecycle.Append(fx.StopHook(in.Releases.Add(func() {
				stopWatch()
				_ = s.Close()
			})))
			return s, nil
		}),
	)
}

// LLMModule provides the *llm.Client (reporting to the metrics) when
// something needs it, and adds the model readiness check.
func LLMModule() fx.Option {
	return fx.Module("llm",
		fx.Provide(func(cfg config.Config, tel *Telemetry) (*llm.Client, error) {
			c, check, err := NewLLM(cfg, tel.Metrics)
			if err != nil {
				return nil, err
			}
			tel.Checks.Add(check)
			return c, nil
		}),
	)
}

// HTTPModule serves /healthz, /readyz and /metrics and refreshes the lag
// gauges. It provides *HTTP.
func HTTPModule() fx.Option {
	return fx.Module("http",
		fx.Provide(func(lc fx.Lifecycle, rel *Releases, cfg config.Config, bus *Bus, topo events.Topology, tel *Telemetry, log *zap.Logger) (*HTTP, error) {
			h, err := StartHTTP(cfg, bus, topo, tel, log)
			if err != nil {
				return nil, err
			}
			lc.Append(fx.StopHook(rel.Add(func() { _ = h.Stop(context.Background()) })))
			return h, nil
		}),
		fx.Invoke(func(*HTTP) {}),
	)
}

// IdleModule runs the idle detector when the configuration turns it on.
func IdleModule() fx.Option {
	return fx.Module("idle",
		fx.Invoke(func(lc fx.Lifecycle, cfg config.Config, bus *Bus, topo events.Topology, client *events.Client, tel *Telemetry, log *zap.Logger) {
			if !cfg.Idle.Enabled {
				return
			}
			var d *Idle
			lc.Append(fx.Hook{
				OnStart: func(ctx context.Context) (err error) {
					d, err = StartIdle(ctx, cfg, bus, topo, client, tel.Metrics, log.Named("idle"))
					return err
				},
				OnStop: func(ctx context.Context) error { return d.Stop(ctx) },
			})
		}),
	)
}

type workersIn struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Bus       *Bus
	Topology  events.Topology
	Telemetry *Telemetry
	Log       *zap.Logger
	Workers   []Worker `group:"workers"`
}

// WorkersModule starts a runner per registered worker at start and stops
// them, draining in-flight messages within ENGRAM_SHUTDOWN_TIMEOUT, at stop.
// It provides *Workers.
func WorkersModule() fx.Option {
	return fx.Module("workers",
		fx.Provide(func(in workersIn) *Workers {
			w := &Workers{}
			in.Lifecycle.Append(fx.Hook{
				OnStart: func(ctx context.Context) error {
					started, err := StartWorkers(ctx, in.Bus.JS, in.Topology, in.Config, in.Workers, in.Telemetry.Metrics, in.Log)
					if err != nil {
						return err
					}
					*w = *started
					in.Telemetry.Checks.Add(w.Checks()...)
					if p := w.Parking(); p != nil {
						if err := in.Telemetry.Metrics.WatchParking(in.Telemetry.Registry, p); err != nil {
							_ = w.Stop(ctx)
							return err
						}
					}
					return nil
				},
				OnStop: func(ctx context.Context) error {
					sctx, cancel := context.WithTimeout(ctx, in.Config.Work.ShutdownTimeout)
					defer cancel()
					return w.Stop(sctx)
				},
			})
			return w
		}),
		fx.Invoke(func(*Workers) {}),
	)
}

// Releases collects the release functions of resources that constructors
// acquire (the NATS connection and embedded server, the store, the HTTP
// listener). fx runs OnStop hooks only after a successful start; when
// building the graph fails (fx.New), Release frees what was acquired.
type Releases struct {
	mu  sync.Mutex
	fns []func()
}

// Add records fn and returns a function that runs it at most once.
func (r *Releases) Add(fn func()) func() {
	var once sync.Once
	f := func() { once.Do(fn) }
	r.mu.Lock()
	r.fns = append(r.fns, f)
	r.mu.Unlock()
	return f
}

// Release runs the recorded functions in reverse order.
func (r *Releases) Release() {
	r.mu.Lock()
	fns := r.fns
	r.fns = nil
	r.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// Core is every module of a process but its workers: config, logger,
// telemetry, NATS (embedded when embed is set and no URL is configured),
// topology, store, model client, health endpoint, idle detector and the
// workers runner. rel frees acquired resources when building fails (may be
// nil: a fresh one).
func Core(cfg config.Config, embed bool, name string, rel *Releases) fx.Option {
	if rel == nil {
		rel = &Releases{}
	}
	return fx.Options(
		fx.Supply(rel),
		ConfigModule(cfg),
		LoggerModule(),
		FxLogger(),
		TelemetryModule(),
		BusModule(embed, name),
		TopologyModule(),
		StoreModule(),
		LLMModule(),
		HTTPModule(),
		IdleModule(),
		WorkersModule(),
		fx.StartTimeout(cfg.NATS.ConnectTimeout+30*time.Second),
		fx.StopTimeout(shutdownTimeout(cfg)),
	)
}

// errStartup is a start-up failure as one line: its cause, without the
// dependency graph fx and dig wrap around it (a tokens file of mode 644
// used to end 5.9 KB of graph and stack traces with "chmod 600 it").
func errStartup(err error) error { return fmt.Errorf("app: start: %w", dig.RootCause(err)) }
