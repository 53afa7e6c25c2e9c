package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/credurl"
	"github.com/engram-memory/engram/internal/natsauth"
)

// loadConfig parses a subcommand's flags (the settings of groups plus what
// extra registers) over the environment. Bad configuration is one joined
// error listing every problem.
func loadConfig(name string, args []string, groups config.Group, extra func(fs *flag.FlagSet)) (config.Config, *flag.FlagSet, error) {
	return loadConfigEnv(name, args, groups, extra, os.LookupEnv)
}

// loadConfigEnv is loadConfig over the variables lookup gives.
func loadConfigEnv(name string, args []string, groups config.Group, extra func(fs *flag.FlagSet), lookup func(string) (string, bool)) (config.Config, *flag.FlagSet, error) {
	cfg := config.Default()
	fs := flag.NewFlagSet("engram "+name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	if extra != nil {
		extra(fs)
	}
	own := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { own[f.Name] = true })
	fs.Usage = func() { commandUsage(fs.Output(), name, fs, own) }
	err := cfg.Load(fs, args, lookup, groups)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return cfg, fs, fmt.Errorf("%w: invalid configuration:\n  %s", errUsage,
			strings.ReplaceAll(err.Error(), "\n", "\n  "))
	}
	return cfg, fs, err
}

// commandUsage is a command's -h: what it does, its own flags, then the
// settings it shares with other commands under a heading of their own.
func commandUsage(w io.Writer, name string, fs *flag.FlagSet, own map[string]bool) {
	top, _, _ := strings.Cut(name, " ")
	fmt.Fprintf(w, "usage: engram %s [flags] [args]\n", name)
	if c, ok := commands[top]; ok {
		fmt.Fprintf(w, "  %s\n", c.summary)
	}
	var mine, shared []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if own[f.Name] {
			mine = append(mine, f)
		} else {
			shared = append(shared, f)
		}
	})
	if len(mine) > 0 {
		fmt.Fprintf(w, "\nFlags of engram %s:\n", name)
		printFlags(w, mine)
	}
	if len(shared) > 0 {
		fmt.Fprintf(w, "\nShared settings (%d; each also an ENGRAM_* variable, shown in [brackets]; flags win):\n", len(shared))
		printFlags(w, shared)
	}
}

// printFlags prints flags as flag.PrintDefaults does.
func printFlags(w io.Writer, flags []*flag.Flag) {
	for _, f := range flags {
		name, usage := flag.UnquoteUsage(f)
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			name = ""
		}
		line := "  -" + f.Name
		if name != "" {
			line += " " + name
		}
		line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			line += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintln(w, line)
	}
}

// subcommand is one command of a command group (engram dlq list, ...).
type subcommand struct{ usage, what string }

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// groupHelp handles the help of a command group: with no arguments it
// prints the group's commands and is a usage error (exit 2), with -h it
// prints them and succeeds. It returns nil when args name a command.
func groupHelp(name string, subs []subcommand, args []string) error {
	if len(args) > 0 && !isHelp(args[0]) {
		return nil
	}
	w := os.Stderr
	fmt.Fprintf(w, "usage: engram %s <command> [flags] [args]\n", name)
	if c, ok := commands[name]; ok {
		fmt.Fprintf(w, "  %s\n", c.summary)
	}
	fmt.Fprintln(w, "\ncommands:")
	width := 0
	for _, s := range subs {
		width = max(width, len(s.usage))
	}
	for _, s := range subs {
		fmt.Fprintf(w, "  %-*s  %s\n", width, s.usage, s.what)
	}
	fmt.Fprintf(w, "\nRun 'engram %s <command> -h' for a command's flags.\n", name)
	if len(args) == 0 {
		return errUsage
	}
	return flag.ErrHelp
}

// connect opens a client connection to cfg's NATS (a local `engram serve`
// by default) with the ENGRAM_NATS_* credentials, or, for a local server,
// the admin user of the data dir's credentials (see app.ClientAuth).
func connect(cfg config.Config) (*nats.Conn, jetstream.JetStream, error) {
	url := cfg.ClientNATSURL()
	auth, from, err := app.ConnectOptions(cfg, natsauth.RoleAdmin)
	if err != nil {
		return nil, nil, fmt.Errorf("NATS credentials: %w", err)
	}
	opts := []nats.Option{nats.Name("engram-cli"), nats.Timeout(cfg.NATS.ConnectTimeout)}
	if inbox := cliInbox(cfg, from); inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(inbox))
	}
	nc, err := nats.Connect(url, append(opts, auth...)...)
	if err != nil {
		hint := "is `engram serve` running, or ENGRAM_NATS_URL set?"
		if errors.Is(err, nats.ErrAuthorization) {
			hint = "give ENGRAM_NATS_USER/PASSWORD (or TOKEN, NKEY, CREDS), or -data the data dir of `engram serve`"
		}
		return nil, nil, fmt.Errorf("connect to NATS at %s (credentials: %s; %s): %w", credurl.Redact(url), from, hint, credurl.Error(err))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// cliInbox is the reply-inbox prefix of the CLI's connection: a tenant's
// own (events.TenantInbox) when it connects with a tenant's credentials
// (ENGRAM_NATS_USER=tenant-...), the setup role's as setup, Engram's own
// as admin from the data dir (so that what it reads, dead letters of every
// tenant, never crosses the default tenant's _INBOX.), else nats.go's
// default ("").
func cliInbox(cfg config.Config, from string) string {
	user := cfg.NATS.User
	if user == natsauth.RoleAdmin || strings.HasPrefix(from, "user "+natsauth.RoleAdmin+" ") {
		return natsauth.InboxPrefix("cli")
	}
	return natsauth.ClientInbox(user)
}

// out writes formatted text, ignoring write errors of a closed stdout.
func out(w io.Writer, format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }
