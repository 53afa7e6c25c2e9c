package console

import (
	"context"

	"go.uber.org/zap"

	"github.com/engram-memory/engram/pkg/memory"
)

// recordSession is the session a console change record is filed under.
const recordSession = "console"

// record journals a change a person made through the console as a change
// record (memory.Pass with By set, one entry): the memory's page lists it
// beside the consolidation passes' changes, with who made it. A record
// that cannot be written is logged; the change stands (it is made and
// logged already).
func (s *Server) record(ctx context.Context, sc scope, p principal, e memory.JournalEntry) {
	now := s.now().UTC()
	e.At = now
	project := sc.Project
	if e.Before != nil && e.Before.ProjectID != "" {
		project = e.Before.ProjectID
	}
	rec := memory.Pass{ID: "console-" + memory.NewID(), Tenant: sc.Tenant, Project: project, Session: recordSession,
		Status: memory.PassFinished, Verdict: "changed by hand", By: "console:" + p.Name, StartedAt: now, UpdatedAt: now,
		Entries: []memory.JournalEntry{e}}
	if err := s.st.PutPass(ctx, rec); err != nil {
		s.log.Warn("console: the change is made, its record was not written", zap.String("op", string(e.Op)),
			zap.String("id", e.NodeID), errField(err))
	}
}

// changed journals op on memory id: before as loaded before the change,
// after as stored now.
func (s *Server) changed(ctx context.Context, sc scope, p principal, op memory.JournalOp, before memory.Node, reason string) {
	after, err := s.st.Get(ctx, before.ID)
	if err != nil {
		s.log.Warn("console: the change is made, its record was not written", zap.String("id", before.ID), errField(err))
		return
	}
	before.Embedding, after.Embedding = nil, nil
	s.record(ctx, sc, p, memory.JournalEntry{Op: op, NodeID: before.ID, Before: &before, After: &after, Reason: reason})
}
