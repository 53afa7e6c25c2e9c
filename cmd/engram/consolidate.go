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
	register("consolidate", "consolidate a session now, pass after pass, and print the journals: engram consolidate -project P -session S [-from N]", consolidateCmd)
}

// consolidateCmd consolidates a session in this process against the
// configured store and model (for SQLite, stop `engram serve` first: one
// process per database file), as many passes as the messages after the
// cursor take, and prints each pass's journal. -from N re-reads the
// session from message N (an operator's repair after a bad pass: undo it
// with `engram memory undo`, then re-read its messages). It does not watch
// for a new turn (run by hand, nothing parks it) and publishes nothing.
func consolidateCmd(ctx context.Context, stdout io.Writer, args []string) error {
	var project, session string
	var from int64
	cfg, _, err := loadConfig("consolidate", args, config.Runtime|config.Conn, func(fs *flag.FlagSet) {
		fs.StringVar(&project, "project", "", "project id (required)")
		fs.StringVar(&session, "session", "", "session id (required)")
		fs.Int64Var(&from, "from", 0, "re-read the session from this message id (the cursor is set back to the message before it)")
	})
	if err != nil {
		return err
	}
	if project == "" || session == "" {
		return fmt.Errorf("%w: engram consolidate -project P -session S [-from N]", errUsage)
	}
	if from < 0 {
		return fmt.Errorf("%w: -from %d: a message id is positive", errUsage, from)
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
	cc := cfg.Consolidate
	if n := cfg.LLM.Consolidate.ContextLength; n > 0 {
		cc.ContextTokens = n // a window too small for a step is refused here
	}
	cons, err := consolidate.New(st, c, cc, consolidate.WithEmbedder(app.NewEmbedder(cfg, c)))
	if err != nil {
		return err
	}
	res, err := cons.Run(ctx, consolidate.Request{Project: project, Session: session, From: from})
	for i, p := range res.Passes {
		if err != nil && i == len(res.Passes)-1 && p.Status != memory.PassFinished {
			out(stdout, "the pass stopped before its end; what it changed is kept and the next run resumes it:\n")
		}
		consolidate.WriteJournal(stdout, p)
	}
	switch {
	case err != nil:
		return err
	case res.Busy:
		return errors.New("another process is consolidating this session; try again when it is done")
	case res.Empty:
		out(stdout, "nothing new in %s/%s since the last pass\n", project, session)
		return nil
	}
	if cur, err := st.Cursor(ctx, memory.SessionRef{Project: project, Session: session}); err == nil {
		out(stdout, "%d passes; %s/%s is consolidated up to message %d\n", len(res.Passes), project, session, cur)
	}
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
