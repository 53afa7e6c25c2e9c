package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/pkg/memory"
)

func init() {
	register("consolidate", "run a consolidation pass over a session now and print its journal: engram consolidate -project P -session S", consolidateCmd)
}

// consolidateCmd runs one pass in this process against the configured
// store and model (for SQLite, stop `engram serve` first: one process per
// database file). It does not watch for a new turn (run by hand, nothing
// parks it) and publishes nothing.
func consolidateCmd(ctx context.Context, stdout io.Writer, args []string) error {
	var project, session string
	cfg, _, err := loadConfig("consolidate", args, config.Runtime|config.Conn, func(fs *flag.FlagSet) {
		fs.StringVar(&project, "project", "", "project id (required)")
		fs.StringVar(&session, "session", "", "session id (required)")
	})
	if err != nil {
		return err
	}
	if project == "" || session == "" {
		return fmt.Errorf("%w: engram consolidate -project P -session S", errUsage)
	}
	st, err := openStore(ctx, cfg, "")
	if err != nil {
		return err
	}
	defer st.Close()
	c, _, err := app.NewLLM(cfg, nil)
	if err != nil {
		return err
	}
	cons, err := consolidate.New(st, c, cfg.Consolidate, consolidate.WithEmbedder(app.NewEmbedder(cfg, c)))
	if err != nil {
		return err
	}
	res, err := cons.Run(ctx, consolidate.Request{Project: project, Session: session})
	switch {
	case err != nil:
		if res.Pass.ID != "" {
			out(stdout, "the pass stopped before its end; what it changed is kept and the next run resumes it:\n")
			consolidate.WriteJournal(stdout, res.Pass)
		}
		return err
	case res.Busy:
		return errors.New("another process is consolidating this session; try again when it is done")
	case res.Empty:
		out(stdout, "nothing new in %s/%s since the last pass\n", project, session)
		return nil
	}
	consolidate.WriteJournal(stdout, res.Pass)
	return nil
}

// memoryHistory lists consolidation passes and their changes.
func memoryHistory(ctx context.Context, stdout io.Writer, args []string) error {
	var tenant, project, session string
	var limit int
	cfg, _, err := loadConfig("memory history", args, config.Runtime|config.Conn, func(fs *flag.FlagSet) {
		fs.StringVar(&tenant, "tenant", "", "the tenant (default: the default tenant)")
		fs.StringVar(&project, "project", "", "only this project")
		fs.StringVar(&session, "session", "", "only this session (with -project)")
		fs.IntVar(&limit, "n", 20, "passes shown, newest first")
	})
	if err != nil {
		return err
	}
	if session != "" && project == "" {
		return fmt.Errorf("%w: -session needs -project", errUsage)
	}
	st, err := openStore(ctx, cfg, "")
	if err != nil {
		return err
	}
	defer st.Close()
	passes, err := st.Passes(ctx, memory.PassQuery{Tenant: tenant, Project: project, Session: session, Limit: limit})
	if err != nil {
		return err
	}
	if len(passes) == 0 {
		out(stdout, "no consolidation passes\n")
	}
	for _, p := range passes {
		consolidate.WriteJournal(stdout, p)
	}
	return nil
}

// memoryUndo reverts a pass.
func memoryUndo(ctx context.Context, stdout io.Writer, args []string) error {
	var tenant, project string
	cfg, fs, err := loadConfig("memory undo", args, config.Runtime|config.Conn, func(fs *flag.FlagSet) {
		fs.StringVar(&tenant, "tenant", "", "the pass's tenant (default: the default tenant)")
		fs.StringVar(&project, "project", "", "the pass's project (optional: found in any project)")
	})
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: engram memory undo PASS", errUsage)
	}
	st, err := openStore(ctx, cfg, "")
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := consolidate.Undo(ctx, st, memory.ProjectRef{Tenant: tenant, Project: project}, fs.Arg(0), time.Now())
	if err != nil {
		return err
	}
	out(stdout, "undid pass %s (%s/%s)\n", rep.Pass.ID, rep.Pass.Project, rep.Pass.Session)
	for _, r := range rep.Reverted {
		out(stdout, "  reverted: %s\n", r)
	}
	for _, k := range rep.Kept {
		out(stdout, "  not reverted: %s\n", k)
	}
	return nil
}
