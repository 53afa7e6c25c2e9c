package main

import (
	"context"
	"flag"
	"io"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/natsauth"
)

func init() {
	register("nats-config", "print the NATS server configuration of Engram's role users (deploy/nats/accounts.conf for this subject prefix); -tenants adds the data dir's tenants", natsConfig)
}

// natsConfig prints natsauth.AccountsConf for the configured subject
// prefix: deploy/nats/accounts.conf is the one of the default prefix
// without tenants. With -tenants, the platform user of every tenant of the
// data dir (`engram tenant add`) follows, with its password's hash.
func natsConfig(_ context.Context, stdout io.Writer, args []string) error {
	var withTenants bool
	cfg, _, err := loadConfig("nats-config", args, config.Conn, func(fs *flag.FlagSet) {
		fs.BoolVar(&withTenants, "tenants", false, "add a platform user per tenant of the data dir's "+natsauth.TenantsFile+" (engram tenant add)")
	})
	if err != nil {
		return err
	}
	var tenants natsauth.Tenants
	if withTenants {
		if tenants, err = natsauth.LoadTenants(cfg.DataDir); err != nil {
			return err
		}
	}
	out(stdout, "%s", natsauth.AccountsConf(cfg.Events.SubjectPrefix, tenants))
	return nil
}
