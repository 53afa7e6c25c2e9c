// Package mcptoolfx wires the `memory` MCP tool into an fx application:
// the streamable HTTP endpoint of `engram serve` (ENGRAM_MCP_ADDR, path
// /mcp, behind the bearer tokens of ENGRAM_MCP_TOKENS), and the tool
// itself for `engram mcp`.
package mcptoolfx

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/internal/mcptool"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// Path is where the endpoint serves MCP.
const Path = "/mcp"

// shutdownWait bounds the graceful stop: clients hold a standalone SSE
// stream open for the life of their session, which would otherwise keep
// every shutdown waiting for its whole timeout.
const shutdownWait = 2 * time.Second

// NewTool builds the tool on the process's store and embedder, with the
// injector's recall settings (confidence floor, cross-project reach,
// projects with memory off), so that a look-up ranks as the block does.
func NewTool(cfg config.Config, st memory.Store, emb mcptool.Embedder, log *zap.Logger, opts ...mcptool.Option) (*mcptool.Tool, error) {
	rk := cfg.Inject.RankingFor(emb)
	return mcptool.New(st, emb, mcptool.Config{
		Ranking:          &rk,
		MinConfidence:    cfg.Inject.MinConfidence,
		CrossProject:     cfg.Inject.CrossProject,
		DisabledProjects: cfg.Inject.DisabledProjects,
	}, append([]mcptool.Option{mcptool.WithLogger(log)}, opts...)...)
}

// Endpoint is the running HTTP endpoint (nil Server when it is off).
type Endpoint struct{ Server *health.Server }

// URL is the endpoint's MCP URL ("" when off).
func (e *Endpoint) URL() string {
	if e == nil || e.Server == nil {
		return ""
	}
	return e.Server.URL() + Path
}

// endpointIn is what the endpoint needs; the events client, when the
// process has a bus, announces the tool's edits (memory_changed).
type endpointIn struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Store     memory.Store
	LLM       *llm.Client
	Events    *events.Client `optional:"true"`
	Log       *zap.Logger
}

// Module serves the endpoint when ENGRAM_MCP_ADDR is set; it provides
// *Endpoint. The tokens file is read at start: a bad one stops the start
// with every problem listed.
func Module() fx.Option {
	return fx.Module("mcp",
		fx.Provide(func(in endpointIn) (*Endpoint, error) {
			lc, cfg, st, c, log := in.Lifecycle, in.Config, in.Store, in.LLM, in.Log
			ep := &Endpoint{}
			if cfg.MCP.Addr == "" {
				return ep, nil
			}
			log = log.Named("mcp")
			var opts []mcptool.Option
			if in.Events != nil {
				opts = append(opts, mcptool.WithPublisher(in.Events))
			}
			tool, err := NewTool(cfg, st, app.NewEmbedder(cfg, c), log, opts...)
			if err != nil {
				return nil, err
			}
			tokens, err := mcptool.LoadTokens(cfg.MCP.Tokens)
			if err != nil {
				return nil, err
			}
			h, err := mcptool.HTTPHandler(tool, tokens, mcptool.HTTPOptions{
				SessionTimeout: cfg.MCP.SessionIdle, MaxSessionsPerToken: cfg.MCP.SessionsPerToken})
			if err != nil {
				return nil, err
			}
			mux := http.NewServeMux()
			mux.Handle(Path, h)
			lc.Append(fx.Hook{
				OnStart: func(context.Context) error {
					srv, err := health.Listen(cfg.MCP.Addr, mux)
					if err != nil {
						return err
					}
					ep.Server = srv
					log.Info("memory tool serving MCP over streamable HTTP", zap.String("url", ep.URL()))
					return nil
				},
				OnStop: func(ctx context.Context) error {
					sctx, cancel := context.WithTimeout(ctx, shutdownWait)
					defer cancel()
					if err := ep.Server.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
						return err
					}
					return nil
				},
			})
			return ep, nil
		}),
		fx.Invoke(func(*Endpoint) {}),
	)
}
