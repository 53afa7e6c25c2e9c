// Package apptest starts a whole Engram process for the worker modules'
// end-to-end tests: embedded NATS on a random port, SQLite in a temporary
// data dir, no HTTP endpoint, no idle detector, the given modules, models
// from a scripted Ollama-compatible server (pkg/llm/llmtest), and a client
// connected to the process's bus as the admin user of the credentials the
// process generated in its data dir.
package apptest

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"go.uber.org/fx"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
)

// Running is a started process with a client on its bus. Start stops it
// when the test ends.
type Running struct {
	Process *app.Process
	Config  config.Config
	Conn    *nats.Conn
	Client  *events.Client
}

// Start starts a process named name running modules, with models from
// models (llmtest.Server.Config), and fails the test unless the worker role
// runs.
func Start(ctx context.Context, t testing.TB, name, role string, models llm.Config, modules []fx.Option, opts ...events.ClientOption) Running {
	t.Helper()
	return StartConfig(ctx, t, Config(t, models), name, role, modules, opts...)
}

// Config is the configuration Start runs: a temporary data dir, NATS on a
// random port, no HTTP endpoint, no idle detector, errors-only JSON logs
// and the models of models. A test that seeds the data dir first (the
// SQLite store at cfg.SQLitePath()) passes it to StartConfig.
func Config(t testing.TB, models llm.Config) config.Config {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.NATS.StoreKeyDir = t.TempDir()
	cfg.NATS.Listen = "127.0.0.1:-1"
	cfg.HTTP.Addr = ""
	cfg.Idle.Enabled = false
	cfg.Log = config.Log{Format: config.LogJSON, Level: "error"}
	cfg.LLM = models
	return cfg
}

// StartConfig is Start with the configuration cfg (see Config).
func StartConfig(ctx context.Context, t testing.TB, cfg config.Config, name, role string, modules []fx.Option, opts ...events.ClientOption) Running {
	t.Helper()
	p, err := app.Start(ctx, cfg, true, name, modules...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	if roles := strings.Join(p.Workers.Roles(), ","); !strings.Contains(roles, role) {
		t.Fatalf("running workers %q lack the %s", roles, role)
	}
	// The process's embedded server requires credentials: the test client
	// is the admin user of the data dir's (as the CLI would be).
	auth, _, err := app.ConnectOptions(cfg, natsauth.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(p.Bus.URL, auth...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	client, err := events.NewClient(nc, append([]events.ClientOption{events.WithPrefix(cfg.Events.SubjectPrefix)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return Running{Process: p, Config: cfg, Conn: nc, Client: client}
}
