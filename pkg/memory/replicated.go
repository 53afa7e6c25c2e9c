package memory

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Replicated is a store whose servers replicate asynchronously (the Redis
// store on a cluster with replicas), so that a server's failover can lose
// the writes it took last. Durable returns once every write made so far is
// on a replica; Failovers counts the failovers the store has seen (a
// primary replaced by a replica that may lack its last writes).
//
// A worker that guards its writes with a record of its own (the
// extractor's span record, the consolidator's journal) keeps the record on
// its project's server: a replica holds a prefix of its primary's writes,
// so a record that survived a failover means the project's writes before
// it did. Writes on another server are not covered: a memory created (its
// id's entry in the id index is on a slot of its own), a global memory,
// another project's, an edge's copy under its other end. The worker waits
// for them (Settle) before it records them as done, and makes them again
// after a failover (a memory found by its digest then gets its id's entry
// written again). The SQLite store is one file whose commits survive in
// order: it is not Replicated.
type Replicated interface {
	Durable(ctx context.Context) error
	Failovers() uint64
}

var (
	// ErrFailedOver: a server of the store failed over while the writes
	// were made; some of them may be lost (see Replicated).
	ErrFailedOver = errors.New("memory: a store server failed over during the writes")
	// ErrNotReplicated: the store's replicas did not acknowledge the
	// writes within a few attempts (see Settle).
	ErrNotReplicated = errors.New("memory: the writes are not on a replica yet")
)

// FailoversOf is st's failover count when it keeps one (Replicated), else
// 0: what a worker notes before its writes, for Settle or ConfirmDurable.
func FailoversOf(st any) uint64 {
	if rs, ok := st.(Replicated); ok {
		return rs.Failovers()
	}
	return 0
}

// ConfirmDurable asks d once whether the writes made so far are durable
// (on disk, on a replica) and, when d counts its failovers (Replicated),
// returns ErrFailedOver if one came since failovers (FailoversOf before
// the writes): Durable then confirms only the primaries serving now, and a
// replica promoted meanwhile may lack the writes (or, for deletions, still
// hold what they deleted).
func ConfirmDurable(ctx context.Context, d interface{ Durable(context.Context) error }, failovers uint64) error {
	err := d.Durable(ctx)
	if rs, ok := d.(Replicated); ok && err == nil && rs.Failovers() != failovers {
		return ErrFailedOver
	}
	return err
}

// settleTries bounds how many times Settle asks the store for its writes'
// durability.
const settleTries = 5

// Settle returns once the writes made so far are on a replica
// (rs.Durable) and no failover came since failovers (rs.Failovers before
// the writes began): ErrFailedOver when one did, else ErrNotReplicated
// with the store's error when its replicas do not acknowledge after
// settleTries attempts 0.2 to 0.8 s apart (a replica that lags a moment is
// waited for here).
func Settle(ctx context.Context, rs Replicated, failovers uint64) error {
	var err error
	for try := range settleTries {
		if try > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w: %w", ErrNotReplicated, ctx.Err())
			case <-time.After(time.Duration(try) * 200 * time.Millisecond):
			}
		}
		if err = ConfirmDurable(ctx, rs, failovers); err == nil || errors.Is(err, ErrFailedOver) {
			return err
		}
	}
	if rs.Failovers() != failovers {
		return ErrFailedOver
	}
	return fmt.Errorf("%w: %w", ErrNotReplicated, err)
}

// RewriteTries bounds how many times SettleWritten waits for writes it
// makes again after failovers.
const RewriteTries = 3

// SettleWritten is Settle for writes the caller can make again (again: a
// created memory written again as it was stored, which a store finds by
// its digest and reinforces, mending what the failover lost): after a
// failover it makes them again and waits again, up to RewriteTries waits
// in all, and returns the last wait's error.
func SettleWritten(ctx context.Context, rs Replicated, failovers uint64, again func(context.Context) error) error {
	for try := 1; ; try++ {
		err := Settle(ctx, rs, failovers)
		if err == nil || !errors.Is(err, ErrFailedOver) || try == RewriteTries {
			return err
		}
		failovers = rs.Failovers()
		if err := again(ctx); err != nil {
			return fmt.Errorf("write again after a failover: %w", err)
		}
	}
}

// Rewriter is what writing a created memory again takes (WriteAgain).
type Rewriter interface {
	Upsert(ctx context.Context, n Node) (UpsertResult, error)
	Supersede(ctx context.Context, oldID, newID string) error
}

// WriteAgain writes n, a memory created before a failover, again as it
// was stored (SettleWritten's again): found by its digest it is
// reinforced, which writes its id's entry again; lost, it is stored with
// its id. When n revised supersedes (a revision: the new memory, the old
// one's close and the edge between them, all on the project's server,
// which may be the one that failed over), that one is closed by it again
// (a store allows it on a memory already superseded). It returns the
// memory as written (another of the same text, should the write find one).
func WriteAgain(ctx context.Context, st Rewriter, n Node, supersedes string) (Node, error) {
	up, err := st.Upsert(ctx, n)
	if err != nil {
		return n, fmt.Errorf("%s: %w", n.ID, err)
	}
	if supersedes != "" {
		if err := st.Supersede(ctx, supersedes, up.Node.ID); err != nil {
			return up.Node, fmt.Errorf("%s supersedes %s: %w", up.Node.ID, supersedes, err)
		}
	}
	return up.Node, nil
}
