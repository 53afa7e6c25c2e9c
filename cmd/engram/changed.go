package main

import (
	"context"
	"time"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// busPublisher connects to the bus to publish the memory_changed events of
// a command that edits memory itself (engram mcp on the store, engram
// memory import), as the workers' edits are announced.
func busPublisher(cfg config.Config) (*events.Client, func(), error) {
	nc, _, err := connect(cfg)
	if err != nil {
		return nil, func() {}, err
	}
	ec, err := events.NewClient(nc, events.WithPrefix(cfg.Events.SubjectPrefix), events.WithMaxEventBytes(int(cfg.Events.MaxEventBytes)))
	if err != nil {
		nc.Close()
		return nil, func() {}, err
	}
	return ec, func() { _ = nc.Drain() }, nil
}

// publishWritten announces nodes an import wrote: one memory_changed per
// project of a tenant, at most changedBatch ids each. Global memories (no
// project) are not announced: an event names a project. It returns how
// many events it published and the first error.
func publishWritten(ctx context.Context, ec *events.Client, nodes []memory.Node) (int, error) {
	type key struct{ tenant, project string }
	groups := map[key][]events.Change{}
	var order []key
	for _, n := range nodes {
		if n.ProjectID == "" {
			continue
		}
		k := key{n.TenantID, n.ProjectID}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], events.Change{ID: n.ID, Kind: events.ChangeUpdated})
	}
	published := 0
	for _, k := range order {
		cs := groups[k]
		for len(cs) > 0 {
			batch := cs[:min(changedBatch, len(cs))]
			cs = cs[len(batch):]
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := ec.Publish(pctx, events.New(events.Ref{TenantID: k.tenant, ProjectID: k.project}, events.MemoryChanged{Changes: batch}))
			cancel()
			if err != nil {
				return published, err
			}
			published++
		}
	}
	return published, nil
}

// changedBatch bounds the ids of one memory_changed (an id is at most 128
// bytes: a batch stays far under the maximum event size).
const changedBatch = 500
