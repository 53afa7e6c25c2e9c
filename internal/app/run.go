package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/credurl"
)

// Process is a started Engram process.
type Process struct {
	app     *fx.App
	Bus     *Bus
	HTTP    *HTTP
	Workers *Workers
	Log     *zap.Logger
	// Started is how long start-up took, from Start's call to ready.
	Started time.Duration
	notes   []ReadyNote
}

// ReadyGroup is the fx value group of ReadyNotes.
const ReadyGroup = `group:"ready"`

// ReadyNote adds fields to the process's one "ready" line (the memory
// console's URL and where its login link is): a module provides it in
// ReadyGroup; Fields is called once the process has started.
type ReadyNote struct {
	Fields func() []zap.Field
}

type readyIn struct {
	fx.In
	Notes []ReadyNote `group:"ready"`
}

// Start builds and starts a process: Core(cfg, embed, name) plus extra
// options (worker modules). It returns when every component has started.
func Start(ctx context.Context, cfg config.Config, embed bool, name string, extra ...fx.Option) (*Process, error) {
	t0 := time.Now()
	p := &Process{}
	rel := &Releases{}
	opts := append([]fx.Option{Core(cfg, embed, name, rel)}, extra...)
	opts = append(opts, fx.Populate(&p.Bus, &p.HTTP, &p.Workers, &p.Log), fx.Invoke(func(in readyIn) { p.notes = in.Notes }))
	p.app = fx.New(opts...)
	if err := p.app.Err(); err != nil {
		rel.Release() // fx runs no OnStop hook when the graph fails to build
		return nil, errStartup(err)
	}
	if err := p.app.Start(ctx); err != nil {
		return nil, errStartup(err)
	}
	p.Started = time.Since(t0)
	return p, nil
}

// Stop stops the process: workers drain, then the idle detector, the HTTP
// endpoint, the store and the NATS connection (and embedded server).
func (p *Process) Stop(ctx context.Context) error {
	return p.app.Stop(ctx)
}

// StopTimeout is the budget Stop should be given.
func (p *Process) StopTimeout() time.Duration { return p.app.StopTimeout() }

// LogReady logs the one "ready" line: where platforms connect and where the
// health endpoint is.
func (p *Process) LogReady(msg string) {
	fields := []zap.Field{zap.String("nats", credurl.Redact(p.Bus.URL)), zap.Strings("workers", p.Workers.Roles()),
		zap.Duration("startup", p.Started)}
	if u := p.HTTP.URL(); u != "" {
		fields = append(fields, zap.String("http", u))
	}
	for _, n := range p.notes {
		if n.Fields != nil {
			fields = append(fields, n.Fields()...)
		}
	}
	switch {
	case p.Bus.Credentials != "":
		fields = append(fields, zap.String("nats_credentials", p.Bus.Credentials))
	case p.Bus.Insecure:
		fields = append(fields, zap.Bool("nats_insecure", true))
	}
	p.Log.Info(msg, fields...)
}

// SignalContext is ctx cancelled by SIGINT or SIGTERM.
func SignalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// Serve starts a process, logs the ready line, waits until ctx is done
// (a signal) and stops it gracefully.
func Serve(ctx context.Context, cfg config.Config, embed bool, name string, extra ...fx.Option) error {
	p, err := Start(ctx, cfg, embed, name, extra...)
	if err != nil {
		return err
	}
	p.LogReady("engram ready")
	<-ctx.Done()
	p.Log.Info("shutting down", zap.String("hint", "a second signal exits at once"))
	// A second SIGINT or SIGTERM during the graceful stop ends the process
	// at once: its in-flight messages are redelivered after their ack wait.
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-again:
			p.Log.Warn("second signal: exiting without draining")
			_ = p.Log.Sync()
			os.Exit(1)
		case <-stopped:
		}
	}()
	sctx, cancel := context.WithTimeout(context.Background(), p.StopTimeout())
	defer cancel()
	if err := p.Stop(sctx); err != nil {
		return fmt.Errorf("app: stop: %w", err)
	}
	return nil
}

// RunWorker is the main of a single-worker binary (cmd/injector, ...): it
// reads the configuration from ENGRAM_* variables and os.Args flags, runs
// only role (whose worker module is worker) against ENGRAM_NATS_URL and the
// configured store, and exits when SIGINT or SIGTERM has drained it. It
// connects as the NATS user of role (ENGRAM_NATS_USER/PASSWORD or the other
// ENGRAM_NATS_* credentials; for a local `engram serve`, role's password
// from the data dir) and fails at start when that user lacks a permission
// role needs. It does not return.
func RunWorker(role string, worker fx.Option) {
	os.Exit(runWorker(role, worker, os.Args[1:]))
}

func runWorker(role string, worker fx.Option, args []string) int {
	cfg := config.Default()
	// One idle detector deployment is enough (several replicas of it are
	// safe): worker binaries run it only when ENGRAM_IDLE or -idle asks.
	cfg.Idle.Enabled = false
	// Nor do they serve the memory console unless ENGRAM_CONSOLE_ADDR asks.
	cfg.Console.Addr = ""
	fs := flag.NewFlagSet(role, flag.ContinueOnError)
	if err := cfg.Load(fs, args, os.LookupEnv, config.All); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "%s: configuration:\n%v\n", role, credurl.Error(err))
		return 2
	}
	cfg.Work.Workers = []string{role}
	ctx, stop := SignalContext(context.Background())
	defer stop()
	if err := Serve(ctx, cfg, false, "engram-"+role, worker); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", role, credurl.Error(err))
		return 1
	}
	return 0
}
