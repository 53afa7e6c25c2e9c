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
	err := cfg.Load(fs, args, lookup, groups)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return cfg, fs, fmt.Errorf("%w: invalid configuration:\n  %s", errUsage,
			strings.ReplaceAll(err.Error(), "\n", "\n  "))
	}
	return cfg, fs, err
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
