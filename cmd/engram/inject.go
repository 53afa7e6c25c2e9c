package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/pkg/events"
)

func init() {
	register("inject", "print the memory block for a question: engram inject [-tenant T] -project P -session S [-turn T] [-path p]... \"question\"", injectCmd)
}

// pathList is a repeatable -path flag.
type pathList []string

func (p *pathList) String() string     { return strings.Join(*p, ",") }
func (p *pathList) Set(v string) error { *p = append(*p, v); return nil }

func injectCmd(ctx context.Context, stdout io.Writer, args []string) error {
	var (
		tenant, project, session, turn string
		paths                          pathList
		asJSON, direct                 bool
		timeout                        time.Duration
	)
	cfg, fs, err := loadConfig("inject", args, config.All, func(fs *flag.FlagSet) {
		fs.StringVar(&tenant, "tenant", "", "tenant id (default: the default tenant)")
		fs.StringVar(&project, "project", "", "project id (required)")
		fs.StringVar(&session, "session", "", "session id (required)")
		fs.StringVar(&turn, "turn", "", "turn id (default: cli-<time>)")
		fs.Var(&paths, "path", "repo-relative path the session works in (repeatable)")
		fs.BoolVar(&asJSON, "json", false, "print JSON: the block, the ids and (with -direct) the scores")
		fs.BoolVar(&direct, "direct", false, "build the block in this process on the configured store (the data dir's SQLite, which `engram serve` must not hold, or ENGRAM_REDIS_URL) instead of asking the running serve; a preview: no briefing is spent and no injection is recorded")
		fs.DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the running serve's answer")
	})
	if err != nil {
		return err
	}
	query := strings.Join(fs.Args(), " ")
	var problems []string
	if project == "" {
		problems = append(problems, "-project is required")
	}
	if session == "" {
		problems = append(problems, "-session is required")
	}
	if strings.TrimSpace(query) == "" {
		problems = append(problems, "the question is required (after the flags)")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", errUsage, strings.Join(problems, "; "))
	}
	if turn == "" {
		turn = fmt.Sprintf("cli-%d", time.Now().UnixNano())
	}

	if direct {
		return injectDirect(ctx, stdout, cfg, inject.Request{Tenant: tenant, Project: project, Session: session, Turn: turn, Text: query, Paths: paths, DryRun: true}, asJSON)
	}
	nc, _, err := connect(cfg)
	if err != nil {
		return err
	}
	defer nc.Close()
	cl, err := events.NewClient(nc, events.WithPrefix(cfg.Events.SubjectPrefix), events.WithMaxEventBytes(int(cfg.Events.MaxEventBytes)), events.WithInjectTimeout(timeout))
	if err != nil {
		return err
	}
	got, err := cl.Inject(ctx, events.Ref{TenantID: tenant, ProjectID: project, SessionID: session, TurnID: turn}, events.TurnStarted{Text: query, Paths: paths})
	if errors.Is(err, events.ErrInjectTimeout) {
		return fmt.Errorf("no answer from the injector within %v (is `engram serve` running with the injector?): %w", timeout, err)
	}
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(stdout, map[string]any{"block": got.Block, "ids": got.NodeIDs, "scores": got.Scores, "event_id": got.EventID})
	}
	if got.Block == "" {
		out(stdout, "(no block: nothing to inject for this turn)\n")
		return nil
	}
	out(stdout, "%s\n", got.Block)
	return nil
}

func injectDirect(ctx context.Context, stdout io.Writer, cfg config.Config, req inject.Request, asJSON bool) error {
	st, err := openStore(ctx, cfg, "drop -direct to ask the running serve")
	if err != nil {
		return err
	}
	defer st.Close()
	c, _, err := app.NewLLM(cfg, nil)
	if err != nil {
		return err
	}
	inj, err := inject.New(st, app.NewEmbedder(cfg, c), cfg.Inject)
	if err != nil {
		return err
	}
	b, err := inj.Build(ctx, req)
	if err != nil {
		return err
	}
	if asJSON {
		problems := make([]string, len(b.Problems))
		for i, p := range b.Problems {
			problems[i] = p.Error()
		}
		return writeJSON(stdout, map[string]any{"block": b.Text, "ids": b.IDs, "scores": b.Scores(), "standing": b.Standing,
			"recalled": b.Recalled, "skipped": b.Skipped, "problems": problems, "tokens": b.Tokens()})
	}
	for _, p := range b.Problems {
		out(stdout, "warning: %v\n", p)
	}
	switch {
	case b.Text != "":
		out(stdout, "%s\n", b.Text)
	case b.Skipped != "":
		out(stdout, "(no block: %s)\n", b.Skipped)
	default:
		out(stdout, "(no block: nothing to inject for this turn)\n")
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
