package main

import (
	"context"
	"io"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/natsauth"
)

func init() {
	register("nats-config", "print the NATS server configuration of Engram's role users (deploy/nats/accounts.conf for this subject prefix)", natsConfig)
}

// natsConfig prints natsauth.AccountsConf for the configured subject
// prefix: deploy/nats/accounts.conf is the one of the default prefix.
func natsConfig(_ context.Context, stdout io.Writer, args []string) error {
	cfg, _, err := loadConfig("nats-config", args, config.Conn, nil)
	if err != nil {
		return err
	}
	out(stdout, "%s", natsauth.AccountsConf(cfg.Events.SubjectPrefix))
	return nil
}
