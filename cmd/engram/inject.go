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
	"github.com/engram-memory/engram/pkg/memory"
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
		asJSON, direct, explain        bool
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
		fs.BoolVar(&explain, "explain", false, "with -direct: after the block, why each line is there (each retrieval channel's rank and score, the prior, the rule of the block policy that admitted it) and the candidates the policy cut; with -json, as \"why\"")
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
	if explain && !direct {
		problems = append(problems, "-explain needs -direct (the running serve answers with the block alone; the explanation of its turns is on the console's session page)")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", errUsage, strings.Join(problems, "; "))
	}
	if turn == "" {
		turn = fmt.Sprintf("cli-%d", time.Now().UnixNano())
	}

	if direct {
		return injectDirect(ctx, stdout, cfg, inject.Request{Tenant: tenant, Project: project, Session: session, Turn: turn, Text: query, Paths: paths, DryRun: true, Explain: explain}, asJSON)
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
		v := map[string]any{"block": b.Text, "ids": b.IDs, "scores": b.Scores(), "standing": b.Standing,
			"recalled": b.Recalled, "skipped": b.Skipped, "problems": problems, "tokens": b.Tokens()}
		if b.Why != nil {
			v["why"] = b.Why
		}
		return writeJSON(stdout, v)
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
	if b.Why != nil {
		writeWhy(stdout, b)
	}
	return nil
}

// writeWhy prints why each line of b is there, then what the policy cut.
func writeWhy(w io.Writer, b inject.Block) {
	why := b.Why
	out(w, "\nWHY EACH LINE IS THERE (relative floor %.2f x best %.3f = %.3f; ceiling %d lines; plateau keeps %d)\n",
		why.RelativeFloor, why.Best, why.Floor, why.MaxRecalled, why.PlateauKeep)
	if len(why.Lines) == 0 {
		out(w, "  (no line)\n")
	}
	for i, l := range why.Lines {
		score := 0.0
		if l.Why != nil {
			score = l.Why.Score
		}
		out(w, "%2d. [%s] %s\n", i+1, l.ID, inject.RuleText(l.Rule, score, why))
		if l.Why == nil {
			continue
		}
		out(w, "    score %.3f, rank %d = (", l.Why.Score, l.Why.Rank)
		for j, c := range l.Why.Channels {
			if j > 0 {
				out(w, "; ")
			}
			out(w, "%s", inject.ChannelText(c))
		}
		out(w, ")\n    %s", inject.PriorText(l.Why.Prior))
		if l.Why.Foreign {
			out(w, " x%.2f (another project's)", memory.ForeignFactor)
		}
		out(w, "\n")
	}
	out(w, "\nCUT BY THE BLOCK POLICY (%d)\n", len(why.Cut))
	if len(why.Cut) == 0 {
		out(w, "  (nothing)\n")
	}
	for _, c := range why.Cut {
		out(w, "  rank %2d [%s] score %.3f: %s\n", c.Rank, c.ID, c.Score, inject.RuleText(c.Rule, c.Score, why))
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
