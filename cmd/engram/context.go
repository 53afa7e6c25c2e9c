package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"time"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/pkg/events"
)

// printContext writes a context as the platform would send it.
func printContext(w io.Writer, c events.Context) {
	if c.Block != "" {
		out(w, "%s\n\n", c.Block)
	} else {
		out(w, "(no summary: the conversation has not been compacted)\n\n")
	}
	for _, m := range c.Messages {
		out(w, "--- #%d %s (turn %s)", m.ID, m.Role, m.TurnID)
		if m.Role == events.RoleTool {
			out(w, " %s call %s: %s", m.ToolName, m.ToolCallID, m.ToolStatus)
		}
		out(w, "\n")
		if m.Content != "" {
			out(w, "%s\n", m.Content)
		}
		for _, tc := range m.ToolCalls {
			out(w, "-> %s (%s) %s\n", tc.Name, tc.ID, tc.Arguments)
		}
	}
	out(w, "\n(%d messages after the summary; about %d tokens in all)\n", len(c.Messages), c.Tokens)
}

func contextCmd(ctx context.Context, stdout io.Writer, args []string) error {
	var (
		tenant, project, session string
		asJSON                   bool
		timeout                  time.Duration
	)
	cfg, _, err := loadConfig("context", args, config.Conn, func(fs *flag.FlagSet) {
		fs.StringVar(&tenant, "tenant", "", "tenant id (default: the default tenant)")
		fs.StringVar(&project, "project", "", "project id (required)")
		fs.StringVar(&session, "session", "", "session id (required)")
		fs.BoolVar(&asJSON, "json", false, "print the context as JSON")
		fs.DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for each page of the answer")
	})
	if err != nil {
		return err
	}
	if err := needSession(project, session); err != nil {
		return err
	}
	nc, _, err := connect(cfg)
	if err != nil {
		return err
	}
	defer nc.Close()
	cl, err := events.NewClient(nc, events.WithPrefix(cfg.Events.SubjectPrefix), events.WithMaxEventBytes(int(cfg.Events.MaxEventBytes)), events.WithContextTimeout(timeout))
	if err != nil {
		return err
	}
	c, err := cl.Context(ctx, events.Ref{TenantID: tenant, ProjectID: project, SessionID: session})
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(map[string]any{"block": c.Block, "summary": c.Summary, "up_to": c.UpTo,
			"messages": c.Messages, "tokens": c.Tokens})
	}
	printContext(stdout, c)
	return nil
}

func init() {
	register("context", "print what the platform sends next for a conversation: engram context [-tenant T] -project P -session S [-json]", contextCmd)
}
