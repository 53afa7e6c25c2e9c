package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/internal/idle"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
)

// Telemetry is the process's metrics registry, metrics and readiness checks.
type Telemetry struct {
	Registry *prometheus.Registry
	Metrics  *health.Metrics
	Checks   *health.Checks
}

// NewTelemetry creates a registry with the Go and process collectors and
// Engram's metrics (project ids on labels only with
// ENGRAM_METRICS_PROJECT_LABELS).
func NewTelemetry(cfg config.Config) (*Telemetry, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	var opts []health.MetricsOption
	if cfg.HTTP.MetricsProjectLabels {
		opts = append(opts, health.WithProjectLabels())
	}
	m, err := health.NewMetrics(reg, opts...)
	if err != nil {
		return nil, err
	}
	return &Telemetry{Registry: reg, Metrics: m, Checks: &health.Checks{}}, nil
}

// HTTP is the running health endpoint and lag refresher.
type HTTP struct {
	Server *health.Server
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// StartHTTP serves /healthz, /readyz and /metrics on cfg.HTTP.Addr and
// refreshes the lag gauges of bus's streams every cfg.HTTP.LagRefresh.
// With an empty address it only refreshes the gauges.
func StartHTTP(cfg config.Config, bus *Bus, topo events.Topology, tel *Telemetry, log *zap.Logger) (*HTTP, error) {
	h := &HTTP{}
	lag, err := health.NewLag(tel.Registry, bus.JS, topo.In.Name, topo.Out.Name, topo.DLQ.Name)
	if err != nil {
		return nil, err
	}
	tel.Checks.Add(health.TopologyCheck(bus.JS, topo, 0))
	if cfg.HTTP.Addr != "" {
		srv, err := health.Listen(cfg.HTTP.Addr, health.Handler(tel.Checks, tel.Registry))
		if err != nil {
			return nil, err
		}
		h.Server = srv
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		lag.Run(ctx, cfg.HTTP.LagRefresh, func(err error) { log.Warn("lag refresh failed", zap.Error(err)) })
	}()
	return h, nil
}

// URL is the endpoint's base URL ("" when off).
func (h *HTTP) URL() string {
	if h.Server == nil {
		return ""
	}
	return h.Server.URL()
}

// Stop stops the endpoint and the refresher.
func (h *HTTP) Stop(ctx context.Context) error {
	h.stop()
	h.wg.Wait()
	if h.Server != nil {
		return h.Server.Shutdown(ctx)
	}
	return nil
}

// NewLLM returns the model client of cfg reporting to obs (may be nil) and
// its readiness check, degraded (not failing) when Ollama or a model is
// missing: work then waits in the stream.
func NewLLM(cfg config.Config, obs llm.Observer) (*llm.Client, health.Check, error) {
	var opts []llm.Option
	if obs != nil {
		opts = append(opts, llm.WithObserver(obs))
	}
	c, err := llm.New(cfg.LLM, opts...)
	if err != nil {
		return nil, health.Check{}, fmt.Errorf("app: model client: %w", err)
	}
	// The alert rules' model-call series exist at 0 from the start (see
	// health.Metrics.InitModel).
	if in, ok := obs.(interface{ InitModel(op, role, model string) }); ok {
		for _, r := range llm.ChatRoles {
			if mc, _ := cfg.LLM.Model(r); mc.Name != "" {
				in.InitModel("chat", string(r), mc.Name)
			}
		}
		if mc, _ := cfg.LLM.Model(llm.RoleEmbed); mc.Name != "" {
			in.InitModel("embed", string(llm.RoleEmbed), mc.Name)
		}
	}
	return c, health.Check{Name: "model", Run: func(ctx context.Context) error {
		_, err := c.Check(ctx)
		return health.Degraded(err)
	}}, nil
}

// Idle is the running idle detector.
type Idle struct {
	Detector *idle.Detector
	stop     context.CancelFunc
	done     chan struct{}
}

// StartIdle starts the idle detector of cfg on bus: it consumes activity
// with its consumer (the topology must have it: cfg.Topology() adds it when
// the detector is on) and publishes session_idle with client.
func StartIdle(ctx context.Context, cfg config.Config, bus *Bus, topo events.Topology, client *events.Client, metrics *health.Metrics, log *zap.Logger) (*Idle, error) {
	o := idle.Options{
		Quiet:    cfg.Idle.Quiet,
		Sweep:    cfg.IdleSweep(),
		Replicas: cfg.Events.Replicas,
		OnError:  func(err error) { log.Warn("idle detector", zap.Error(err)) },
	}
	if metrics != nil {
		o.OnPublished = metrics.IdlePublished
	}
	d, err := idle.New(ctx, bus.JS, client, o)
	if err != nil {
		return nil, err
	}
	cons, err := bus.JS.Consumer(ctx, topo.In.Name, idle.ConsumerName)
	if err != nil {
		return nil, fmt.Errorf("app: idle detector consumer: %w", err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	i := &Idle{Detector: d, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(i.done)
		if err := d.Run(rctx, cons, topo.Subjects()); err != nil {
			log.Error("idle detector stopped", zap.Error(err))
		}
	}()
	return i, nil
}

// Stop stops the detector and waits for it (or ctx).
func (i *Idle) Stop(ctx context.Context) error {
	i.stop()
	select {
	case <-i.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("app: idle detector stop: %w", ctx.Err())
	}
}

// shutdownTimeout is the stop budget of a process: the drain plus slack.
func shutdownTimeout(cfg config.Config) time.Duration {
	return cfg.Work.ShutdownTimeout + 10*time.Second
}
