package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/buildinfo"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/mcptool"
	"github.com/engram-memory/engram/internal/mcptool/mcptoolfx"
)

func init() {
	register("mcp", "serve the `memory` MCP tool to an agent over stdio: engram mcp -project P [-session S] [-remote URL]", mcpCmd)
	registerServe(mcptoolfx.Module())
}

// mcpCmd serves the tool over stdio (stdout is the protocol; the log goes
// to stderr): on the configured store, or, with -remote, through a running
// serve's HTTP endpoint (serve holds the SQLite store; only one process
// may open it).
func mcpCmd(ctx context.Context, _ io.Writer, args []string) error {
	var tenant, project, session, remote string
	cfg, _, err := loadConfig("mcp", args, config.Runtime|config.Conn, func(fs *flag.FlagSet) {
		fs.StringVar(&tenant, "tenant", "", "tenant of the project (default: the default tenant); with -remote the token's tenant applies")
		fs.StringVar(&project, "project", "", "project id the agent works in (required): it bounds every operation")
		fs.StringVar(&session, "session", "", "session id of the agent's conversation (timeline's default, the session's stats, session memories)")
		fs.StringVar(&remote, "remote", os.Getenv("ENGRAM_MCP_URL"),
			"forward to a running serve's MCP endpoint (e.g. http://127.0.0.1:7475/mcp) with the token in $ENGRAM_MCP_TOKEN, instead of opening the store [$ENGRAM_MCP_URL]")
	})
	if err != nil {
		return err
	}
	if strings.TrimSpace(project) == "" {
		return fmt.Errorf("%w: -project is required", errUsage)
	}
	log, err := app.NewLogger(cfg.Log)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	caller := mcptool.Caller{Tenant: tenant, Project: project, Session: session, Principal: "stdio", WritesGlobal: true}
	var srv *mcp.Server
	if remote != "" {
		token := os.Getenv("ENGRAM_MCP_TOKEN")
		if token == "" {
			return fmt.Errorf("%w: -remote needs the endpoint's bearer token in ENGRAM_MCP_TOKEN", errUsage)
		}
		url, err := mcptool.RemoteURL(remote, caller)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		cs, err := mcptool.Dial(ctx, url, token, buildinfo.Version())
		if err != nil {
			return err
		}
		defer cs.Close()
		if srv, err = mcptool.NewProxy(ctx, cs, buildinfo.Version()); err != nil {
			return err
		}
	} else {
		st, err := openStore(ctx, cfg, "run serve with ENGRAM_MCP_ADDR and use engram mcp -remote (docs/mcp.md)")
		if err != nil {
			return err
		}
		defer st.Close()
		c, _, err := app.NewLLM(cfg, nil)
		if err != nil {
			return err
		}
		// Edits are announced (memory_changed) when a bus answers: with
		// Redis the workers may run beside this process.
		var topts []mcptool.Option
		if cfg.Store.Kind != config.StoreSQLite || cfg.NATS.URL != "" {
			ec, done, err := busPublisher(cfg)
			if err != nil {
				log.Warn("memory_changed will not be published: no bus", zap.Error(err))
			} else {
				defer done()
				topts = append(topts, mcptool.WithPublisher(ec))
			}
		}
		tool, err := mcptoolfx.NewTool(cfg, st, app.NewEmbedder(cfg, c), log.Named("mcp"), topts...)
		if err != nil {
			return err
		}
		if srv, err = mcptool.NewServer(tool, mcptool.ServerOptions{Caller: &caller}); err != nil {
			return err
		}
	}
	log.Debug("memory tool serving MCP over stdio", zap.String("project", project), zap.String("session", session), zap.Bool("remote", remote != ""))
	if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp over stdio: %w", err)
	}
	return nil
}
