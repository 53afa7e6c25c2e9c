package main

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/credurl"
)

func init() {
	register("setup", "create or update the JetStream streams and consumers (idempotent)", setup)
}

func setup(ctx context.Context, stdout io.Writer, args []string) error {
	cfg, _, err := loadConfig("setup", args, config.Conn|config.Topology, nil)
	if err != nil {
		return err
	}
	nc, js, err := connect(cfg)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	topo, err := app.EnsureTopology(ctx, js, cfg)
	if err != nil {
		return err
	}
	out(stdout, "streams ready on %s:\n", credurl.Redact(nc.ConnectedUrl()))
	for _, s := range topo.StreamConfigs() {
		out(stdout, "  %-12s %s (%s retention, max age %s, max bytes %d, max per subject %d, max message %d, replicas %d)\n",
			s.Name, s.Subjects[0], strings.ToLower(s.Retention.String()), s.MaxAge, s.MaxBytes, s.MaxMsgsPerSubject, s.MaxMsgSize, s.Replicas)
	}
	out(stdout, "consumers on %s:\n", topo.In.Name)
	for _, c := range topo.Consumers {
		out(stdout, "  %-12s %v (ack wait %s, max deliver %d (by the worker), max ack pending %d)\n", c.Name, c.Types, c.AckWait, c.MaxDeliver, c.MaxAckPending)
	}
	return nil
}
