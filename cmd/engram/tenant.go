package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/pkg/events"
)

func init() {
	register("tenant", "give a tenant its own platform credentials: tenant add|rotate|remove ID, tenant list (in the data dir; `engram serve` applies them at once)", tenantCmd)
}

// tenantCmd manages the named tenants' platform credentials in the data
// dir (natsauth.TenantsFile). A running `engram serve` reloads them; an
// external NATS takes them from `engram nats-config -tenants`.
func tenantCmd(_ context.Context, stdout io.Writer, args []string) error {
	cfg, fs, err := loadConfig("tenant", args, config.Conn, nil)
	if err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return fmt.Errorf("%w: want tenant add|rotate|remove ID or tenant list", errUsage)
	}
	switch verb := rest[0]; verb {
	case "list":
		t, err := natsauth.LoadTenants(cfg.DataDir)
		if err != nil {
			return err
		}
		for _, name := range t.Names() {
			out(stdout, "%s\tuser %s\n", strconv.Quote(name), natsauth.TenantUser(name))
		}
		return nil
	case "add", "rotate", "remove":
		if len(rest) != 2 {
			return fmt.Errorf("%w: want tenant %s ID", errUsage, verb)
		}
		tenant := rest[1]
		if verb == "remove" {
			if err := natsauth.RemoveTenant(cfg.DataDir, tenant); err != nil {
				return err
			}
			out(stdout, "removed the credentials of tenant %s (its memory is kept)\n", strconv.Quote(tenant))
			return nil
		}
		pw, err := natsauth.AddTenant(cfg.DataDir, tenant, verb == "rotate")
		if err != nil {
			return err
		}
		s := events.Subjects{Prefix: cfg.Events.SubjectPrefix}
		out(stdout, "tenant %s: platform credentials (the password is shown only now; %s keeps its hash)\n",
			strconv.Quote(tenant), natsauth.TenantsPath(cfg.DataDir))
		out(stdout, "  ENGRAM_NATS_USER=%s\n  ENGRAM_NATS_PASSWORD=%s\n", natsauth.TenantUser(tenant), pw)
		out(stdout, "  inbox prefix: %s   (nats.CustomInboxPrefix(events.TenantInbox(%s)))\n", events.TenantInbox(tenant), strconv.Quote(tenant))
		out(stdout, "  may publish:  %s  %s\n  may receive:  %s.>\n", s.InTenant(tenant), s.ContextAPITenant(tenant), events.TenantInbox(tenant))
		out(stdout, "A running `engram serve` on this data dir applies it within seconds; for an external NATS run `engram nats-config -tenants` and reload the server.\n")
		return nil
	}
	return fmt.Errorf("%w: unknown tenant command %q: want add, rotate, remove or list", errUsage, rest[0])
}
