package consolidate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// UndoStore is what undo needs of the store.
type UndoStore interface {
	memory.Journal
	Get(ctx context.Context, id string) (memory.Node, error)
	Archive(ctx context.Context, id string) error
	Restore(ctx context.Context, id string) error
	PutBatch(ctx context.Context, nodes []memory.Node, edges []memory.Edge) error
	Link(ctx context.Context, e memory.Edge) (memory.Edge, error)
	Unlink(ctx context.Context, src, dst string, rel memory.Relation) error
	Edges(ctx context.Context, id string) ([]memory.Edge, error)
}

// UndoReport says what an undo reverted and what it could not, and why.
type UndoReport struct {
	Pass     memory.Pass
	Reverted []string
	Kept     []string
}

// usedSince reports whether a memory was used after the pass wrote it: a
// later turn's verdict said it was used (useful count), or it was accessed
// (memory.Nodes Touch). A memory judged wrong or ignored was not used.
func usedSince(now, then *memory.Node) bool {
	return now.Access > then.Access || now.Useful > then.Useful
}

// Undo reverts a pass, newest change first: it restores what the pass
// forgot, reopens what it revised (archiving the replacement), removes
// (archives) what it added, unlinks what it linked and relinks what it
// unlinked. A memory the pass added or wrote as a revision that a later
// turn has used since is kept, and so is the fact it replaced; so is a
// revision a later pass revised again or forgot, and a topic the pass
// created that something else links to since. Every such case is
// reported with its reason. The pass is marked undone; undoing it
// again is refused. project.Project may be empty (the pass is looked up in
// every project of project.Tenant; another tenant's pass is never found).
func Undo(ctx context.Context, st UndoStore, project memory.ProjectRef, passID string, now time.Time) (UndoReport, error) {
	rec, err := st.GetPass(ctx, project, passID)
	if err != nil {
		return UndoReport{}, fmt.Errorf("consolidate: undo %s: %w", passID, err)
	}
	rep := UndoReport{Pass: rec}
	if rec.By != "" {
		return rep, fmt.Errorf("consolidate: %s is a change %s made by hand, not a consolidation pass: %w", passID, rec.By, memory.ErrRefused)
	}
	switch rec.Status {
	case memory.PassUndone:
		return rep, fmt.Errorf("consolidate: pass %s was already undone at %s: %w", passID, rec.UndoneAt.Format(time.RFC3339), memory.ErrRefused)
	case memory.PassRunning:
		return rep, fmt.Errorf("consolidate: pass %s is still running: %w", passID, memory.ErrRefused)
	}
	reverted := func(f string, a ...any) { rep.Reverted = append(rep.Reverted, fmt.Sprintf(f, a...)) }
	kept := func(f string, a ...any) { rep.Kept = append(rep.Kept, fmt.Sprintf(f, a...)) }
	for i := len(rec.Entries) - 1; i >= 0; i-- {
		e := rec.Entries[i]
		switch e.Op {
		case memory.OpRemember:
			if e.Pending {
				if _, err := st.Get(ctx, e.NodeID); memory.IsNotFound(err) {
					kept("[%s]: the pass was cut off before it was written", e.NodeID)
					continue
				}
			}
			if e.Before != nil {
				kept("[%s]: the pass reinforced a memory that already existed; left as it is", e.NodeID)
				continue
			}
			cur, err := st.Get(ctx, e.NodeID)
			if memory.IsNotFound(err) {
				kept("[%s]: no longer exists", e.NodeID)
				continue
			}
			if err != nil {
				return rep, fmt.Errorf("consolidate: undo %s: %w", passID, err)
			}
			if e.After != nil && usedSince(&cur, e.After) {
				kept("[%s] %s: added by the pass, but used since by a later turn; kept", e.NodeID, capChars(factText(&cur), 60))
				continue
			}
			if !cur.ArchivedAt.IsZero() {
				kept("[%s]: already forgotten", e.NodeID)
				continue
			}
			if cur.Subkind == memory.Topic {
				// A topic is used by what links to it: a live edge that
				// is not this pass's own (a later pass's, the
				// extractor's) keeps it.
				by, err := linkedSince(ctx, st, &rec, e.NodeID)
				if err != nil {
					return rep, fmt.Errorf("consolidate: undo %s: %w", passID, err)
				}
				if by != "" {
					kept("[%s] topic %q: added by the pass, but linked since by %s; kept", e.NodeID, capChars(cur.Label, 60), by)
					continue
				}
			}
			if err := st.Archive(ctx, e.NodeID); err != nil {
				return rep, fmt.Errorf("consolidate: undo %s: remove %s: %w", passID, e.NodeID, err)
			}
			reverted("[%s] %s: removed (added by the pass)", e.NodeID, capChars(factText(&cur), 60))
		case memory.OpForget:
			if err := st.Restore(ctx, e.NodeID); err != nil {
				if memory.IsNotFound(err) {
					kept("[%s]: no longer exists", e.NodeID)
					continue
				}
				return rep, fmt.Errorf("consolidate: undo %s: restore %s: %w", passID, e.NodeID, err)
			}
			reverted("[%s]: restored (forgotten by the pass)", e.NodeID)
		case memory.OpRevise:
			if e.Before == nil {
				kept("[%s]: the journal lacks the fact before the revision", e.NodeID)
				continue
			}
			if e.Pending { // cut off: the replacement, if written, is what closed the old fact
				cur, err := st.Get(ctx, e.NodeID)
				if err != nil && !memory.IsNotFound(err) {
					return rep, fmt.Errorf("consolidate: undo %s: %w", passID, err)
				}
				if err != nil || cur.SupersededBy == "" {
					kept("[%s]: the pass was cut off before the revision was written", e.NodeID)
					continue
				}
				e.NewID, e.After = cur.SupersededBy, &memory.Node{}
			}
			repl, err := st.Get(ctx, e.NewID)
			if err != nil && !memory.IsNotFound(err) {
				return rep, fmt.Errorf("consolidate: undo %s: %w", passID, err)
			}
			if err == nil && e.After != nil && usedSince(&repl, e.After) {
				kept("[%s] -> [%s]: the revision was used since by a later turn; both kept as they are", e.NodeID, e.NewID)
				continue
			}
			// A later change to the revision (revised again, forgotten)
			// stands: reopening the old fact would put it beside the
			// newer one, two conflicting live facts.
			if err == nil && repl.SupersededBy != "" {
				kept("[%s] -> [%s]: revised again since by [%s]; both kept as they are", e.NodeID, e.NewID, repl.SupersededBy)
				continue
			}
			if err == nil && !repl.Live() {
				kept("[%s] -> [%s]: the revision was closed or forgotten since; both kept as they are", e.NodeID, e.NewID)
				continue
			}
			if err == nil && repl.ArchivedAt.IsZero() {
				if err := st.Archive(ctx, e.NewID); err != nil {
					return rep, fmt.Errorf("consolidate: undo %s: remove %s: %w", passID, e.NewID, err)
				}
			}
			if err := st.Unlink(ctx, e.NewID, e.NodeID, memory.Supersedes); err != nil && !memory.IsNotFound(err) {
				return rep, fmt.Errorf("consolidate: undo %s: unlink %s: %w", passID, e.NewID, err)
			}
			old := *e.Before
			old.Embedding, old.EmbeddingModel = nil, "" // re-embedded by the backlog embedder
			if err := st.PutBatch(ctx, []memory.Node{old}, nil); err != nil {
				return rep, fmt.Errorf("consolidate: undo %s: reopen %s: %w", passID, e.NodeID, err)
			}
			reverted("[%s]: reopened; its revision [%s] removed", e.NodeID, e.NewID)
		case memory.OpRestore:
			if e.Before == nil {
				kept("[%s]: the journal lacks the memory before it was restored", e.NodeID)
				continue
			}
			cur, err := st.Get(ctx, e.NodeID)
			if memory.IsNotFound(err) {
				kept("[%s]: no longer exists", e.NodeID)
				continue
			}
			if err != nil {
				return rep, fmt.Errorf("consolidate: undo %s: %w", passID, err)
			}
			if e.Pending && cur.Live() == e.Before.Live() {
				kept("[%s]: the pass was cut off before it restored it", e.NodeID)
				continue
			}
			if e.After != nil && usedSince(&cur, e.After) {
				kept("[%s] %s: restored by the pass, and used since by a later turn; kept", e.NodeID, capChars(factText(&cur), 60))
				continue
			}
			if !cur.Live() {
				kept("[%s]: forgotten or closed again since", e.NodeID)
				continue
			}
			if e.Before.SupersededBy == "" && e.Before.ValidTo.IsZero() {
				if err := st.Archive(ctx, e.NodeID); err != nil {
					return rep, fmt.Errorf("consolidate: undo %s: forget %s again: %w", passID, e.NodeID, err)
				}
			} else { // closed by a revision: written back as it was
				old := *e.Before
				old.Embedding, old.EmbeddingModel = nil, ""
				if err := st.PutBatch(ctx, []memory.Node{old}, nil); err != nil {
					return rep, fmt.Errorf("consolidate: undo %s: close %s again: %w", passID, e.NodeID, err)
				}
			}
			reverted("[%s] %s: as it was before the pass restored it", e.NodeID, capChars(factText(&cur), 60))
		case memory.OpLink:
			if e.Edge == nil {
				continue
			}
			if err := st.Unlink(ctx, e.Edge.Src, e.Edge.Dst, e.Edge.Relation); err != nil {
				if memory.IsNotFound(err) {
					kept("[%s] %s [%s]: already unlinked", e.Edge.Src, e.Edge.Relation, e.Edge.Dst)
					continue
				}
				return rep, fmt.Errorf("consolidate: undo %s: unlink: %w", passID, err)
			}
			reverted("[%s] %s [%s]: unlinked", e.Edge.Src, e.Edge.Relation, e.Edge.Dst)
		case memory.OpUnlink:
			if e.Edge == nil {
				continue
			}
			edge := *e.Edge
			if e.Pending {
				live, err := st.Edges(ctx, edge.Src)
				if err != nil {
					return rep, fmt.Errorf("consolidate: undo %s: %w", passID, err)
				}
				if slices.ContainsFunc(live, func(x memory.Edge) bool {
					return x.Src == edge.Src && x.Dst == edge.Dst && x.Relation == edge.Relation
				}) {
					kept("[%s] %s [%s]: the pass was cut off before it unlinked", edge.Src, edge.Relation, edge.Dst)
					continue
				}
			}
			edge.ValidFrom, edge.ValidTo = time.Time{}, time.Time{}
			if _, err := st.Link(ctx, edge); err != nil {
				if memory.IsNotFound(err) {
					kept("[%s] %s [%s]: an end no longer exists", edge.Src, edge.Relation, edge.Dst)
					continue
				}
				return rep, fmt.Errorf("consolidate: undo %s: relink: %w", passID, err)
			}
			reverted("[%s] %s [%s]: linked again", edge.Src, edge.Relation, edge.Dst)
		}
	}
	rec.Status, rec.UndoneAt, rec.UndoNotes, rec.UpdatedAt = memory.PassUndone, now.UTC(), rep.Kept, now.UTC()
	if err := st.PutPass(ctx, rec); err != nil {
		return rep, fmt.Errorf("consolidate: undo %s: mark undone: %w", passID, err)
	}
	rep.Pass = rec
	return rep, nil
}

// linkedSince names the live edges of a node that the pass did not make
// ("" when there are none).
func linkedSince(ctx context.Context, st UndoStore, rec *memory.Pass, id string) (string, error) {
	edges, err := st.Edges(ctx, id)
	if err != nil {
		return "", err
	}
	own := func(x memory.Edge) bool {
		return slices.ContainsFunc(rec.Entries, func(e memory.JournalEntry) bool {
			return e.Op == memory.OpLink && e.Edge != nil && e.Edge.Src == x.Src && e.Edge.Dst == x.Dst && e.Edge.Relation == x.Relation
		})
	}
	var by []string
	for _, x := range edges {
		if own(x) {
			continue
		}
		other := x.Src
		if other == id {
			other = x.Dst
		}
		by = append(by, fmt.Sprintf("[%s] (%s)", other, x.Relation))
	}
	if len(by) > 3 {
		by = append(by[:3], fmt.Sprintf("and %d more", len(by)-3))
	}
	return strings.Join(by, ", "), nil
}

// WriteJournal prints a pass and its changes for an operator.
func WriteJournal(w io.Writer, p memory.Pass) {
	fmt.Fprintf(w, "pass %s  %s/%s  %s", p.ID, p.Project, p.Session, p.Status)
	if p.Verdict != "" {
		fmt.Fprintf(w, " (%s)", p.Verdict)
	}
	fmt.Fprintf(w, "  started %s  steps %d  %s  tokens %d+%d\n", p.StartedAt.UTC().Format(time.RFC3339),
		p.Steps, readRange(p), p.PromptTokens, p.CompletionTokens)
	if len(p.State) > 0 {
		var l Ledger
		if json.Unmarshal(p.State, &l) == nil {
			switch {
			case l.Skipped:
				fmt.Fprintf(w, "  skipped: %d passes over these messages ended without memory_done; the cursor moved past them, they were not consolidated (engram consolidate -from %d reads them again)\n",
					l.Attempt, p.From)
			case l.Retry:
				fmt.Fprintf(w, "  attempt %d ended without memory_done: the cursor stayed, the next pass reads these messages again (fewer at once)\n", l.Attempt)
			}
		}
	}
	for _, e := range p.Entries {
		cut := ""
		if e.Pending {
			cut = "  (cut off: may not have been applied)"
		}
		fmt.Fprintf(w, "  %-8s %s%s\n", e.Op, entryLine(e), cut)
		if e.Reason != "" {
			fmt.Fprintf(w, "           reason: %s\n", e.Reason)
		}
	}
	if len(p.Entries) == 0 {
		fmt.Fprintln(w, "  (no changes)")
	}
	if !p.UndoneAt.IsZero() {
		fmt.Fprintf(w, "  undone %s\n", p.UndoneAt.UTC().Format(time.RFC3339))
		for _, n := range p.UndoNotes {
			fmt.Fprintf(w, "    not reverted: %s\n", n)
		}
	}
}

// readRange names the messages a pass read.
func readRange(p memory.Pass) string {
	switch {
	case p.From > 0 && p.From < p.UpTo:
		return fmt.Sprintf("read messages %d-%d", p.From, p.UpTo)
	case p.From > 0:
		return fmt.Sprintf("read message %d", p.From)
	case p.UpTo > 0: // a pass journaled before passes recorded From
		return fmt.Sprintf("up to message %d", p.UpTo)
	}
	return "read no message"
}

func entryLine(e memory.JournalEntry) string {
	text := func(n *memory.Node) string {
		if n == nil {
			return ""
		}
		return fmt.Sprintf("%q", capChars(oneLine(factText(n)), 100))
	}
	switch e.Op {
	case memory.OpRemember:
		if e.Before != nil {
			return fmt.Sprintf("[%s] reinforced %s", e.NodeID, text(e.After))
		}
		return fmt.Sprintf("[%s] added %s", e.NodeID, text(e.After))
	case memory.OpRevise:
		return fmt.Sprintf("[%s] %s -> [%s] %s", e.NodeID, text(e.Before), e.NewID, text(e.After))
	case memory.OpForget, memory.OpRestore:
		return fmt.Sprintf("[%s] %s", e.NodeID, text(e.Before))
	case memory.OpHold:
		line := fmt.Sprintf("%s held for review: close to [%s] (%s)", text(e.After), e.NodeID, e.Reason)
		if e.Resolution != "" {
			line += "; " + e.Resolution
		}
		return line
	case memory.OpLink, memory.OpUnlink:
		if e.Edge != nil {
			return fmt.Sprintf("[%s] %s [%s]", e.Edge.Src, e.Edge.Relation, e.Edge.Dst)
		}
	}
	return strings.TrimSpace(e.NodeID + " " + e.NewID)
}
