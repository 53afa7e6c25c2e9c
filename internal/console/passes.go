package console

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/pkg/memory"
)

// PassesShown is how many passes the passes page lists.
const PassesShown = 100

func (s *Server) handlePasses(w http.ResponseWriter, r *http.Request, ss *session) {
	pg := s.base(w, r, ss, "passes", "Consolidation passes")
	if pg == nil {
		return
	}
	q := memory.PassQuery{Tenant: pg.Scope.Tenant, Project: pg.Scope.Project, Session: strings.TrimSpace(r.FormValue("session")), Limit: PassesShown}
	all, err := s.st.Passes(r.Context(), q)
	if err != nil {
		s.fail(w, r, pg, 0, err)
		return
	}
	passes := all[:0]
	for _, p := range all {
		if p.By == "" { // changes made by hand are in their memories' history
			passes = append(passes, p)
		}
	}
	pg.Data = map[string]any{"Passes": passes, "Session": q.Session}
	s.render(w, r, "passes", pg)
}

// entryView is one journal entry as a diff.
type entryView struct {
	E      memory.JournalEntry
	Before template.HTML // the text before, removed words marked
	After  template.HTML // the text after, added words marked
	Line   string        // link and unlink: the edge
}

func entryViews(p *memory.Pass) []entryView {
	out := make([]entryView, 0, len(p.Entries))
	for _, e := range p.Entries {
		v := entryView{E: e}
		var before, after string
		if e.Before != nil {
			before = nodeText(e.Before)
		}
		if e.After != nil {
			after = nodeText(e.After)
		}
		switch e.Op {
		case memory.OpForget:
			after = ""
		case memory.OpRemember:
			if e.Before != nil { // reinforced: the text did not change
				before = after
			}
		}
		v.Before, v.After = diffHTML(before, after)
		if e.Edge != nil {
			v.Line = fmt.Sprintf("[%s] %s [%s]", e.Edge.Src, e.Edge.Relation, e.Edge.Dst)
		}
		out = append(out, v)
	}
	return out
}

func nodeText(n *memory.Node) string {
	label, body := strings.TrimSpace(n.Label), strings.TrimSpace(n.Body)
	if body == "" || strings.EqualFold(label, body) {
		return label
	}
	if label == "" {
		return body
	}
	return label + ": " + body
}

func (s *Server) handlePass(w http.ResponseWriter, r *http.Request, ss *session) {
	pg := s.base(w, r, ss, "passes", "Pass")
	if pg == nil {
		return
	}
	p, err := s.st.GetPass(r.Context(), pg.Scope.ref(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, pg, 0, err)
		return
	}
	pg.Title = "Pass " + p.ID
	pg.Data = map[string]any{"Pass": p, "Entries": entryViews(&p), "Report": undoReport(r)}
	s.render(w, r, "pass", pg)
}

// undoReport is what the undo left in the redirect's parameters.
func undoReport(r *http.Request) map[string][]string {
	rev, kept := r.Form["reverted"], r.Form["kept"]
	if len(rev)+len(kept) == 0 {
		return nil
	}
	return map[string][]string{"Reverted": rev, "Kept": kept}
}

// handleUndo undoes a pass as `engram memory undo` does (consolidate.Undo),
// within the page's tenant and project only, and shows what it reverted
// and what it could not, and why.
func (s *Server) handleUndo(w http.ResponseWriter, r *http.Request, ss *session) {
	pg := s.base(w, r, ss, "passes", "Undo")
	if pg == nil {
		return
	}
	id := r.PathValue("id")
	rep, err := consolidate.Undo(r.Context(), s.st, pg.Scope.ref(), id, s.now())
	if err != nil {
		s.fail(w, r, pg, 0, err)
		return
	}
	s.log.Info("console: pass undone", principalField(ss.p), zapString("pass", id), zapString("project", pg.Scope.Project),
		zapInt("reverted", len(rep.Reverted)), zapInt("kept", len(rep.Kept)))
	target := "/pass/" + id + "?" + string(pg.Scope.Query())
	for _, l := range rep.Reverted {
		target += "&reverted=" + urlEscape(l)
	}
	for _, l := range rep.Kept {
		target += "&kept=" + urlEscape(l)
	}
	back(w, r, target, fmt.Sprintf("Undone: %d changes reverted, %d kept.", len(rep.Reverted), len(rep.Kept)))
}

// held is a near-duplicate remember held for review.
type held struct {
	Pass    memory.Pass
	Index   int
	E       memory.JournalEntry
	Similar *memory.Node // nil when it no longer exists
	Text    string
	// Stored: the pass itself stored the fact after the hold
	// (confirm_similar): nothing left to review.
	Stored bool
	// Waiting: the pass is running or parked; it is resolved once the
	// pass has finished (the pass would write its journal over the
	// resolution).
	Waiting bool
}

// ReviewPasses bounds the passes the review queue reads.
const ReviewPasses = 500

// queue lists the held near-duplicates of the scope's passes, the
// unresolved ones first.
func (s *Server) queue(ctx context.Context, sc scope) (open, done []held, err error) {
	passes, err := s.st.Passes(ctx, memory.PassQuery{Tenant: sc.Tenant, Project: sc.Project, Limit: ReviewPasses})
	if err != nil {
		return nil, nil, err
	}
	for _, p := range passes {
		for i, e := range p.Entries {
			if e.Op != memory.OpHold || e.After == nil {
				continue
			}
			h := held{Pass: p, Index: i, E: e, Text: nodeText(e.After),
				Waiting: p.Status == memory.PassRunning || p.Status == memory.PassParked}
			norm := consolidate.NormaliseFact(nodeText(e.After))
			for _, later := range p.Entries[i+1:] {
				if later.Op == memory.OpRemember && later.After != nil && consolidate.NormaliseFact(nodeText(later.After)) == norm {
					h.Stored = true
				}
			}
			if n, err := s.st.Get(ctx, e.NodeID); err == nil {
				h.Similar = &n
			} else if !memory.IsNotFound(err) {
				return nil, nil, err
			}
			if e.Resolution != "" || h.Stored {
				done = append(done, h)
			} else {
				open = append(open, h)
			}
		}
	}
	return open, done, nil
}

func (s *Server) handleReview(w http.ResponseWriter, r *http.Request, ss *session) {
	pg := s.base(w, r, ss, "review", "Held for review")
	if pg == nil {
		return
	}
	open, done, err := s.queue(r.Context(), pg.Scope)
	if err != nil {
		s.fail(w, r, pg, 0, err)
		return
	}
	pg.Data = map[string]any{"Open": open, "Done": done}
	s.render(w, r, "review", pg)
}

// handleResolve resolves a held near-duplicate: keep (store it beside the
// memory it resembles), merge (store it as that memory's revision: the old
// one is closed and linked, and restore can reopen it) or discard. The
// resolution is written into the pass's journal entry, once the memory it
// stored is on the store's replicas (settle).
func (s *Server) handleResolve(w http.ResponseWriter, r *http.Request, ss *session) {
	pg := s.base(w, r, ss, "review", "Held for review")
	if pg == nil {
		return
	}
	ctx := r.Context()
	p, err := s.st.GetPass(ctx, pg.Scope.ref(), r.PostFormValue("pass"))
	if err != nil {
		s.fail(w, r, pg, 0, err)
		return
	}
	i, err := strconv.Atoi(r.PostFormValue("entry"))
	if err != nil || i < 0 || i >= len(p.Entries) || p.Entries[i].Op != memory.OpHold || p.Entries[i].After == nil {
		s.fail(w, r, pg, http.StatusBadRequest, fmt.Errorf("%w: no held fact at entry %q of pass %s", memory.ErrInvalid, r.PostFormValue("entry"), p.ID))
		return
	}
	e := &p.Entries[i]
	switch {
	case e.Resolution != "":
		s.fail(w, r, pg, http.StatusConflict, fmt.Errorf("%w: already %s by %s", memory.ErrRefused, e.Resolution, e.ResolvedBy))
		return
	case p.Status == memory.PassRunning || p.Status == memory.PassParked:
		s.fail(w, r, pg, http.StatusConflict, fmt.Errorf("%w: the pass is %s: resolve it once the pass has finished", memory.ErrRefused, p.Status))
		return
	}
	n := *e.After
	n.ID, n.Digest = "", ""
	var flash string
	failovers := memory.FailoversOf(s.st)
	var made *memory.Node // the memory the resolution stored
	switch action := r.PostFormValue("action"); action {
	case "keep":
		up, err := s.st.Upsert(ctx, n)
		if err != nil {
			s.fail(w, r, pg, 0, err)
			return
		}
		made = &up.Node
		e.Resolution = memory.ResolveKeep
	case "merge":
		if _, err := s.tool.Load(ctx, pg.Scope.caller(ss.p), e.NodeID, true); err != nil {
			s.fail(w, r, pg, 0, err)
			return
		}
		nn, err := s.st.Revise(ctx, e.NodeID, n)
		if err != nil {
			s.fail(w, r, pg, 0, err)
			return
		}
		made = &nn
		e.Resolution = memory.ResolveMerge
	case "discard":
		e.Resolution, flash = memory.ResolveDiscard, "Discarded."
	default:
		s.fail(w, r, pg, http.StatusBadRequest, fmt.Errorf("%w: action %q: want keep, merge or discard", memory.ErrInvalid, action))
		return
	}
	if made != nil {
		supersedes := ""
		if e.Resolution == memory.ResolveMerge {
			supersedes = e.NodeID
		}
		stored, err := s.settle(ctx, failovers, *made, supersedes)
		if err != nil {
			s.fail(w, r, pg, http.StatusServiceUnavailable, fmt.Errorf("the memory is stored, but the store's replicas have not confirmed it (the held fact stays open: resolve it again): %w", err))
			return
		}
		e.ResolvedID = stored.ID
		if flash = "Kept both: stored as [" + stored.ID + "]."; supersedes != "" {
			flash = "Merged: [" + stored.ID + "] revises [" + supersedes + "]."
		}
	}
	e.ResolvedAt, e.ResolvedBy = s.now().UTC(), "console:"+ss.p.Name
	if err := s.st.PutPass(ctx, p); err != nil {
		s.fail(w, r, pg, 0, fmt.Errorf("resolved, but the journal was not updated: %w", err))
		return
	}
	s.log.Info("console: held near-duplicate resolved", principalField(ss.p), zapString("pass", p.ID), zapString("resolution", e.Resolution))
	back(w, r, "/review?"+string(pg.Scope.Query()), flash)
}

// settle waits for n, a memory a resolution stored, to be on the store's
// replicas when it has some (memory.Replicated; the SQLite store has
// none): its id's entry in the store's id index is on another server than
// the pass's journal, so a failover could keep the journal's resolution
// and lose the entry, leaving the memory unreachable by id. After a
// failover n is written again (memory.SettleWritten, memory.WriteAgain:
// for a merge, supersedes, the memory it revises, closed by it again). It
// returns the memory as last written.
func (s *Server) settle(ctx context.Context, failovers uint64, n memory.Node, supersedes string) (memory.Node, error) {
	rs, ok := s.st.(memory.Replicated)
	if !ok {
		return n, nil
	}
	err := memory.SettleWritten(ctx, rs, failovers, func(ctx context.Context) error {
		var err error
		n, err = memory.WriteAgain(ctx, s.st, n, supersedes)
		return err
	})
	return n, err
}
