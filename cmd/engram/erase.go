package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/erase"
	"github.com/engram-memory/engram/internal/erase/erasefx"
	"github.com/engram-memory/engram/pkg/memory"
)

func init() {
	// engram serve answers erasure requests on the bus (the CLI cannot
	// open the database serve holds).
	registerServe(erasefx.Module())
}

// memoryErase erases a tenant, a project or a session: through a running
// engram serve when one answers on the bus, else here (the store opened
// directly, the bus with the admin's credentials, or, for the embedded
// default with serve stopped, the data dir's own embedded server).
func memoryErase(ctx context.Context, stdout io.Writer, args []string) error {
	var (
		sc      memory.EraseScope
		verify  bool
		asJSON  bool
		timeout time.Duration
	)
	cfg, fs, err := loadConfig("memory erase", args, config.Runtime|config.Conn, func(fs *flag.FlagSet) {
		fs.StringVar(&sc.Tenant, "tenant", "", "the tenant to erase, or whose project is erased (default: the default tenant, which is erased project by project)")
		fs.StringVar(&sc.Project, "project", "", "the project to erase (with -session: whose session)")
		fs.StringVar(&sc.Session, "session", "", "the session to erase (needs -project)")
		fs.BoolVar(&verify, "verify", false, "afterwards, read the store's files (or keys) raw and every stream message for any text of the scope, and say what was found")
		fs.BoolVar(&asJSON, "json", false, "print the receipt as JSON")
		fs.DurationVar(&timeout, "timeout", erase.Timeout, "give up after this long")
	})
	if err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: engram memory erase -tenant T [-project P [-session S]] [-verify] [-json]", errUsage)
	}
	if err := sc.Check(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, err := eraseScope(ctx, cfg, sc, verify)
	if r.Scope == sc {
		if asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(r)
		} else {
			r.WriteText(stdout)
		}
	}
	if err != nil {
		if errors.Is(err, erase.ErrInvalid) {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		return err
	}
	if !r.Complete() {
		return errors.New("the erasure is incomplete: see the receipt")
	}
	return nil
}

// eraseScope erases through serve, or here.
func eraseScope(ctx context.Context, cfg config.Config, sc memory.EraseScope, verify bool) (erase.Receipt, error) {
	var js jetstream.JetStream
	nc, cjs, cerr := connect(cfg)
	if cerr == nil {
		defer nc.Close()
		r, err := erase.Ask(ctx, nc, erase.Subject(cfg.Events.SubjectPrefix), erase.Request{Scope: sc, Verify: verify})
		if !errors.Is(err, erase.ErrNoResponder) {
			return r, err // serve erased (or said why it could not)
		}
		js = cjs
	} else {
		if !cfg.Embedded() || !errors.Is(cerr, nats.ErrNoServers) {
			return erase.Receipt{}, fmt.Errorf("erase: the bus is needed to erase the stream copies: %w", cerr)
		}
		// engram serve is not running: open the data dir's embedded
		// server for the erasure.
		b, err := app.OpenBus(ctx, cfg, true, "engram-erase", zap.NewNop())
		if err != nil {
			return erase.Receipt{}, fmt.Errorf("erase: open the data dir's bus: %w", err)
		}
		defer b.Close()
		js = b.JS
	}
	st, err := app.OpenStore(ctx, cfg)
	if err != nil {
		return erase.Receipt{}, fmt.Errorf("erase: nothing answers erasure requests on the bus, and the store cannot be opened here (an engram serve older than this binary holds it?): %w", err)
	}
	defer st.Close()
	e := erase.New(st, erase.WithBus(erase.NewBus(js, cfg.Topology())), erase.WithShelf(erase.StoreShelf(st)))
	return e.Erase(ctx, sc, erase.Options{Verify: verify})
}
