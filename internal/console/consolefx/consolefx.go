// Package consolefx wires the memory console (package console) into an fx
// application: `engram serve` serves it by default on
// config.DefaultConsoleAddr (a free port when that one is taken), a worker
// binary when ENGRAM_CONSOLE_ADDR is set. The erase page erases with
// erasefx's *erase.Eraser when the process has it (serve does).
package consolefx

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/console"
	"github.com/engram-memory/engram/internal/erase"
	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/internal/mcptool"
	"github.com/engram-memory/engram/internal/mcptool/mcptoolfx"
	"github.com/engram-memory/engram/internal/runner/dlq"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// Console is the running console (nil Server when it is off).
type Console struct {
	Server *console.Server
	url    string
	srv    *http.Server
	done   chan struct{}
}

// URL is where the console is served ("" when off).
func (c *Console) URL() string {
	if c == nil {
		return ""
	}
	return c.url
}

// ops is the operations page's view of the bus.
type ops struct {
	*dlq.Store
	bus    *app.Bus
	topo   events.Topology
	checks *health.Checks
}

func (o ops) Inspect(ctx context.Context) (health.TopologyState, error) {
	return health.Inspect(ctx, o.bus.JS, o.topo, 0)
}

func (o ops) Checks(ctx context.Context) health.Report { return o.checks.Run(ctx, 5*time.Second) }

type in struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Store     memory.Store
	LLM       *llm.Client
	Log       *zap.Logger
	Telemetry *app.Telemetry  `optional:"true"`
	Bus       *app.Bus        `optional:"true"`
	Topology  events.Topology `optional:"true"`
	Eraser    console.Eraser  `optional:"true"`
	Erase     *erase.Eraser   `optional:"true"` // erasefx's (engram serve)
}

// Module serves the console when ENGRAM_CONSOLE_ADDR is on; it provides
// *Console. The tokens file and the admin token are read at start.
func Module() fx.Option {
	return fx.Module("console",
		fx.Provide(func(in in) (*Console, error) {
			c := &Console{}
			cfg := in.Config
			if !cfg.Console.On() {
				return c, nil
			}
			log := in.Log.Named("console")
			emb := app.NewEmbedder(cfg, in.LLM)
			tool, err := mcptoolfx.NewTool(cfg, in.Store, emb, log)
			if err != nil {
				return nil, err
			}
			var tokens *mcptool.Tokens
			if f := cfg.ConsoleTokens(); f != "" {
				if tokens, err = mcptool.LoadTokens(f); err != nil {
					return nil, err
				}
			}
			admin, created, err := console.EnsureAdminToken(cfg.ConsoleAdminTokenFile())
			if err != nil {
				return nil, err
			}
			if created {
				log.Debug("generated the console's admin token", zap.String("file", cfg.ConsoleAdminTokenFile()))
			}
			rk := cfg.Inject.RankingFor(emb)
			d := console.Deps{Store: in.Store, Tool: tool, Embedder: emb, Tokens: tokens, AdminToken: admin, Log: log, Eraser: in.Eraser,
				Search: console.Search{Ranking: &rk, MinConfidence: cfg.Inject.MinConfidence, CrossProject: cfg.Inject.CrossProject}}
			if d.Eraser == nil && in.Erase != nil {
				d.Eraser = eraser{in.Erase}
			}
			if in.Bus != nil && in.Telemetry != nil {
				d.Ops = ops{Store: dlq.NewStore(in.Bus.JS, in.Topology.DLQ.Name), bus: in.Bus, topo: in.Topology, checks: in.Telemetry.Checks}
			}
			tlsOn := cfg.Console.TLSCert != ""
			srv, err := console.New(d, console.Options{LinkFile: cfg.ConsoleLinkFile(), Secure: tlsOn})
			if err != nil {
				return nil, err
			}
			c.Server = srv
			in.Lifecycle.Append(fx.Hook{
				OnStart: func(context.Context) error {
					ln, err := net.Listen("tcp", cfg.Console.Addr)
					if err != nil && cfg.Console.Addr == config.DefaultConsoleAddr {
						log.Warn("the console's default port is taken: serving it on a free port", zap.String("taken", cfg.Console.Addr))
						ln, err = net.Listen("tcp", "127.0.0.1:0")
					}
					if err != nil {
						return fmt.Errorf("console: listen %s: %w", cfg.Console.Addr, err)
					}
					scheme := "http"
					hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
					// The server's own complaints (a plain request to the TLS
					// port, a dropped handshake) at debug: any port scan makes them.
					if el, err := zap.NewStdLogAt(log, zap.DebugLevel); err == nil {
						hs.ErrorLog = el
					}
					if tlsOn {
						cert, err := tls.LoadX509KeyPair(cfg.Console.TLSCert, cfg.Console.TLSKey)
						if err != nil {
							_ = ln.Close()
							return fmt.Errorf("console: TLS: %w", err)
						}
						hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
						ln = tls.NewListener(ln, hs.TLSConfig)
						scheme = "https"
					}
					c.url = scheme + "://" + hostPort(ln.Addr().String())
					if err := srv.SetBaseURL(c.url); err != nil {
						_ = ln.Close()
						return err
					}
					c.srv, c.done = hs, make(chan struct{})
					go func() {
						defer close(c.done)
						if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
							log.Error("console stopped", zap.Error(err))
						}
					}()
					log.Debug("memory console serving", zap.String("url", c.url))
					return nil
				},
				OnStop: func(ctx context.Context) error {
					if c.srv == nil {
						return nil
					}
					sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					defer cancel()
					err := c.srv.Shutdown(sctx)
					<-c.done
					if err != nil && !errors.Is(err, context.DeadlineExceeded) {
						return err
					}
					return nil
				},
			})
			return c, nil
		}),
		// The ready line says how to open the console: its URL and the
		// file holding the one-time login link (never the secret).
		fx.Provide(fx.Annotate(func(c *Console, cfg config.Config) app.ReadyNote {
			return app.ReadyNote{Fields: func() []zap.Field {
				if c.URL() == "" {
					return nil
				}
				return []zap.Field{zap.String("console", c.URL()), zap.String("console_login", cfg.ConsoleLinkFile())}
			}}
		}, fx.ResultTags(app.ReadyGroup))),
		fx.Invoke(func(*Console) {}),
	)
}

// hostPort names a listener's address as a browser reaches it (an
// unspecified host is this machine).
func hostPort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + port
}
