package main

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/credurl"
	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/pkg/events"
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
	// A connection that may not update ENGRAM_DLQ (the setup role: new
	// limits would delete dead letters) leaves it as it is and says what
	// waits for an admin.
	var o events.EnsureOptions
	topo, err := app.TopologyWithLanes(cfg)
	if err != nil {
		return err
	}
	if g, err := natsauth.Query(ctx, nc); err == nil && !g.MayPublish("$JS.API.STREAM.UPDATE."+topo.DLQ.Name) {
		o.Frozen = append(o.Frozen, topo.DLQ.Name)
	}
	done, err := events.EnsureTopologyWith(ctx, js, topo, o)
	if err != nil {
		return err
	}
	for _, n := range done.NotApplied {
		out(stdout, "not applied: %s\n", n)
	}
	out(stdout, "streams ready on %s:\n", credurl.Redact(nc.ConnectedUrl()))
	for _, s := range topo.StreamConfigs() {
		out(stdout, "  %-12s %s (%s retention, max age %s, max bytes %d, max per subject %d, max message %d, replicas %d)\n",
			s.Name, strings.Join(s.Subjects, " "), strings.ToLower(s.Retention.String()), s.MaxAge, s.MaxBytes, s.MaxMsgsPerSubject, s.MaxMsgSize, s.Replicas)
	}
	out(stdout, "consumers on %s:\n", topo.In.Name)
	for _, c := range topo.Consumers {
		out(stdout, "  %-12s %v (ack wait %s, max deliver %d (by the worker), max ack pending %d)\n", c.Name, c.Types, c.AckWait, c.MaxDeliver, c.MaxAckPending)
	}
	if len(topo.Lanes) > 0 {
		lanes, err := events.CurrentLanes(ctx, js, topo)
		if err != nil {
			return err
		}
		out(stdout, "injector lanes (the default tenant and %d named):\n", len(topo.Lanes))
		for i, name := range events.LaneNames() {
			if len(lanes[i]) > 0 {
				labels := make([]string, len(lanes[i]))
				for j, t := range lanes[i] {
					labels[j] = events.EncodeToken(t) // the default tenant is %
				}
				out(stdout, "  %-18s %s\n", name, strings.Join(labels, ", "))
			}
		}
	}
	return nil
}
