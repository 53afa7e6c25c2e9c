package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/engram-memory/engram/pkg/memory"
)

// Processed-event records carry the event's content digest, so that an
// event id seen again with other content (a platform that reuses an id for
// another turn, without a Nats-Msg-Id header for the stream to drop it) is
// told from a redelivery: a redelivery is acked as a duplicate, the other
// event is dead-lettered with its reason instead of being acknowledged and
// dropped.
//
// Each handled event has two records, written in this order:
//
//	(consumer+"/sha256", id+" "+digest)   the content it was handled with
//	(consumer+"/seen",   id)              the id was handled, with a digest
//
// '/' never occurs in a consumer name (events.Topology.Validate), so these
// never meet another consumer's records, and the digest is the last 64
// characters of its key, so (id, digest) -> key is one-to-one. A record
// (consumer, id) without suffix was written by a version before digests: it
// still makes the event a duplicate (its content cannot be compared) until
// it expires (Config.ProcessedTTL).
//
// A run again for a failover (Runner.lostWrites: the handler's writes may
// be gone with a primary) is owed once its event's records exist: should
// the worker stop before the run again succeeds, the event goes back to
// the stream and its records would get it acknowledged as handled. So the
// run again is recorded before it begins and when it is done:
//
//	(consumer+"/redo",   id+"#"+k)       the k-th run again for failovers is owed
//	(consumer+"/redone", id+"#"+k)       it succeeded (and was durable)
//
// and a delivery that finds the last owed run again not done runs the
// handler again (owedRedo) instead of acknowledging a duplicate.
const (
	seenSuffix   = "/seen"
	digestSuffix = "/sha256"
	redoSuffix   = "/redo"
	redoneSuffix = "/redone"
)

// seen is what the records say of a delivery.
type seen int

const (
	seenNew   seen = iota // no record: handle it
	seenSame              // handled with this content: a redelivery
	seenOther             // the id was handled with other content
)

// digestOf is the SHA-256 of the decoded event encoded again (whitespace
// and key order of the publisher's JSON do not count; every field does).
func digestOf(ev any) (string, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return "", fmt.Errorf("runner: digest: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

func digestKey(id, digest string) string { return id + " " + digest }

// lookup reads the records of ev (one read for an event never seen) and,
// when owed is asked for and ev was handled, the run again for failovers
// its records owe (owedRedo; 0: none).
func (r *Runner) lookup(ctx context.Context, id, digest string, p memory.ProjectRef, owed bool) (seen, int, error) {
	state, err := r.seenAs(ctx, id, digest, p)
	if err != nil || state != seenSame || !owed {
		return state, 0, err
	}
	k, err := r.owedRedo(ctx, id, p)
	return state, k, err
}

// seenAs is what the records of ev say of it.
func (r *Runner) seenAs(ctx context.Context, id, digest string, p memory.ProjectRef) (seen, error) {
	c := r.cfg.Consumer
	done, err := r.processed.EventProcessed(ctx, p, c+seenSuffix, id)
	if err != nil {
		return seenNew, err
	}
	if !done {
		legacy, err := r.processed.EventProcessed(ctx, p, c, id)
		if err != nil || !legacy {
			return seenNew, err
		}
		return seenSame, nil
	}
	same, err := r.processed.EventProcessed(ctx, p, c+digestSuffix, digestKey(id, digest))
	if err != nil {
		return seenNew, err
	}
	if same {
		return seenSame, nil
	}
	return seenOther, nil
}

// mark writes the records of a handled event: the digest first, so that a
// crash between the two leaves no "seen" without its content (a redelivery
// then handles the event again, which handlers are built for).
func (r *Runner) mark(ctx context.Context, id, digest string, p memory.ProjectRef) error {
	c := r.cfg.Consumer
	if err := r.processed.MarkEventProcessed(ctx, p, c+digestSuffix, digestKey(id, digest), r.cfg.ProcessedTTL); err != nil {
		return err
	}
	return r.processed.MarkEventProcessed(ctx, p, c+seenSuffix, id, r.cfg.ProcessedTTL)
}

func redoKey(id string, k int) string { return fmt.Sprintf("%s#%d", id, k) }

// owedRedo is the run again for failovers that the records of a handled
// event say is owed (0: none): the last one recorded (at most maxRedo),
// unless it is recorded done. Every k is read (maxRedo reads): the records
// expire in the order they were written, so an owed #2 can outlive #1.
func (r *Runner) owedRedo(ctx context.Context, id string, p memory.ProjectRef) (int, error) {
	c := r.cfg.Consumer
	last := 0
	for k := 1; k <= maxRedo; k++ {
		owed, err := r.processed.EventProcessed(ctx, p, c+redoSuffix, redoKey(id, k))
		if err != nil {
			return 0, err
		}
		if owed {
			last = k
		}
	}
	if last == 0 {
		return 0, nil
	}
	done, err := r.processed.EventProcessed(ctx, p, c+redoneSuffix, redoKey(id, last))
	if err != nil || done {
		return 0, err
	}
	return last, nil
}

// markRedo records that the k-th run again of id for failovers is owed
// (redone false) or done (true).
func (r *Runner) markRedo(ctx context.Context, id string, k int, p memory.ProjectRef, redone bool) error {
	suffix := redoSuffix
	if redone {
		suffix = redoneSuffix
	}
	return r.processed.MarkEventProcessed(ctx, p, r.cfg.Consumer+suffix, redoKey(id, k), r.cfg.ProcessedTTL)
}
