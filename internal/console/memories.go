package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/mcptool"
	"github.com/engram-memory/engram/pkg/memory"
)

// PageSize is how many memories a page of the list shows.
const PageSize = 50

// listQuery is the memories page's search and filters.
type listQuery struct {
	Q         string // search text: the injector's recall
	Kind      string
	Authority string
	State     string // live (default) | archived | superseded | closed | all
	Stale     string // "" | yes | no
	Pinned    string // "" | yes | no
	Session   string // written in this session
	Page      int
}

func readListQuery(r *http.Request) listQuery {
	q := listQuery{Q: strings.TrimSpace(r.FormValue("q")), Kind: r.FormValue("kind"), Authority: r.FormValue("authority"),
		State: r.FormValue("state"), Stale: r.FormValue("stale"), Pinned: r.FormValue("pinned"),
		Session: strings.TrimSpace(r.FormValue("session"))}
	q.Page, _ = strconv.Atoi(r.FormValue("page"))
	if q.Page < 0 {
		q.Page = 0
	}
	if q.State == "" {
		q.State = "live"
	}
	return q
}

func (q listQuery) check() error {
	var bad []string
	if q.Kind != "" && !memory.Subkind(q.Kind).Valid() {
		bad = append(bad, fmt.Sprintf("kind %q is not a kind", q.Kind))
	}
	if q.Authority != "" && !memory.Authority(q.Authority).Valid() {
		bad = append(bad, fmt.Sprintf("authority %q: want user, assistant or inferred", q.Authority))
	}
	switch q.State {
	case "live", "archived", "superseded", "closed", "all":
	default:
		bad = append(bad, fmt.Sprintf("state %q: want live, archived, superseded, closed or all", q.State))
	}
	for _, v := range []string{q.Stale, q.Pinned} {
		if v != "" && v != "yes" && v != "no" {
			bad = append(bad, fmt.Sprintf("%q: want yes or no", v))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", memory.ErrInvalid, strings.Join(bad, "; "))
	}
	return nil
}

// keep reports whether n passes the filters Timeline does not apply.
func (q listQuery) keep(n *memory.Node) bool {
	if q.Authority != "" && string(n.AssertedBy) != q.Authority {
		return false
	}
	switch q.State {
	case "live":
		if !n.Live() {
			return false
		}
	case "archived":
		if n.ArchivedAt.IsZero() {
			return false
		}
	case "superseded":
		if n.SupersededBy == "" || !n.ArchivedAt.IsZero() {
			return false
		}
	case "closed":
		if n.ValidTo.IsZero() || n.SupersededBy != "" || !n.ArchivedAt.IsZero() {
			return false
		}
	}
	if (q.Stale == "yes" && !n.Stale()) || (q.Stale == "no" && n.Stale()) {
		return false
	}
	if (q.Pinned == "yes" && !n.Pinned) || (q.Pinned == "no" && n.Pinned) {
		return false
	}
	return true
}

// row is one memory in a list.
type row struct {
	N     memory.Node
	State string
	Score float64
	Rank  int
	Prov  []string
	Stale bool
}

func state(n *memory.Node) string {
	switch {
	case !n.ArchivedAt.IsZero():
		return mcptool.StateArchived
	case n.SupersededBy != "":
		return mcptool.StateSuperseded
	case !n.ValidTo.IsZero():
		return mcptool.StateClosed
	}
	return mcptool.StateLive
}

// listResult is a page of memories.
type listResult struct {
	Q      listQuery
	Rows   []row
	More   bool
	Search bool
	Note   string
	Counts memory.Counts
}

// list lists the scope's memories newest update first (Timeline), with
// the filters, a page at a time; with a search text it is the injector's
// recall (memory.Retrieve with the injector's ranking, graph expansion and
// confidence floor) with the same filters applied to its hits. The hits
// are not touched: looking is not using.
func (s *Server) list(ctx context.Context, sc scope, q listQuery) (listResult, error) {
	res := listResult{Q: q}
	if err := q.check(); err != nil {
		return res, err
	}
	f := memory.Filter{TenantID: sc.Tenant, ProjectID: sc.Project, SessionID: q.Session,
		IncludeArchived: q.State != "live", IncludeSuperseded: q.State != "live"}
	if q.Kind != "" {
		f.Subkinds = []memory.Subkind{memory.Subkind(q.Kind)}
	}
	if q.Q != "" {
		res.Search = true
		return s.searchList(ctx, sc, q, f, res)
	}
	tq := memory.TimelineQuery{Filter: f, OnlySession: q.Session != "", Limit: PageSize}
	if d, ok := s.st.(memory.Finder); ok {
		nodes, more, err := d.Find(ctx, tq, q.keep, q.Page*PageSize)
		if err != nil {
			return res, err
		}
		for i := range nodes {
			res.Rows = append(res.Rows, row{N: nodes[i], State: state(&nodes[i]), Stale: nodes[i].Stale(), Prov: memory.Provenance(&nodes[i], sc.Project, nil)})
		}
		res.More = more
		return res, nil
	}
	want := (q.Page + 1) * PageSize
	limit := want + 1
	for {
		nodes, err := s.st.Timeline(ctx, memory.TimelineQuery{Filter: f, OnlySession: q.Session != "", Limit: limit})
		if err != nil {
			return res, err
		}
		var kept []memory.Node
		for i := range nodes {
			if q.keep(&nodes[i]) {
				kept = append(kept, nodes[i])
			}
		}
		if len(kept) > want || len(nodes) < limit {
			from := min(q.Page*PageSize, len(kept))
			to := min(from+PageSize, len(kept))
			for i := from; i < to; i++ {
				res.Rows = append(res.Rows, row{N: kept[i], State: state(&kept[i]), Stale: kept[i].Stale(), Prov: memory.Provenance(&kept[i], sc.Project, nil)})
			}
			res.More = len(kept) > want
			return res, nil
		}
		// Filters the timeline cannot apply removed too many: read more.
		limit *= 4
	}
}

func (s *Server) searchList(ctx context.Context, sc scope, q listQuery, f memory.Filter, res listResult) (listResult, error) {
	query := memory.Redact(q.Q)
	pending, err := s.st.HasPendingEmbeddings(ctx, sc.ref(), s.emb.Model())
	if err != nil {
		return res, fmt.Errorf("readiness: %w", err)
	}
	if pending {
		return res, errors.New(inject.SkipNotReady + "; try again shortly")
	}
	vecs, err := s.emb.Embed(ctx, []string{query})
	if err != nil || len(vecs) != 1 {
		return res, fmt.Errorf("%s: %v", inject.SkipEmbedFailed, err)
	}
	live := q.State == "live"
	f.MinConfidence = s.search.MinConfidence
	if !live {
		f.IncludeArchived, f.IncludeSuperseded = true, true
	}
	hits, err := memory.Retrieve(ctx, s.st, memory.Query{Text: query, Vector: vecs[0], Model: s.emb.Model(), Filter: f,
		Limit: mcptool.MaxRecall, Expand: true, Precise: true, Now: s.now(), Ranking: s.search.Ranking})
	if err != nil {
		return res, err
	}
	for i := range hits {
		n := &hits[i].Node
		if q.Session != "" && n.SessionID != q.Session {
			continue
		}
		if !q.keep(n) {
			continue
		}
		res.Rows = append(res.Rows, row{N: *n, State: state(n), Stale: n.Stale(), Score: hits[i].Score, Rank: i + 1, Prov: memory.Provenance(n, sc.Project, nil)})
	}
	res.Note = fmt.Sprintf("the injector's recall: %d of its %d best hits pass the filters", len(res.Rows), len(hits))
	return res, nil
}

func (s *Server) handleMemories(w http.ResponseWriter, r *http.Request, ss *session) {
	pg := s.base(w, r, ss, "memories", "Memories")
	if pg == nil {
		return
	}
	res, err := s.list(r.Context(), pg.Scope, readListQuery(r))
	if err != nil {
		s.fail(w, r, pg, 0, err)
		return
	}
	if c, err := s.st.Count(r.Context(), pg.Scope.ref(), s.emb.Model()); err == nil {
		res.Counts = c
	}
	pg.Data = map[string]any{"R": res, "Kinds": memory.Subkinds}
	s.render(w, r, "memories", pg)
}

// apiMemories is the list as JSON (the same filters).
func (s *Server) apiMemories(w http.ResponseWriter, r *http.Request, ss *session) {
	sc, _, err := s.resolve(r.Context(), r, ss)
	if err != nil {
		jsonError(w, err)
		return
	}
	res, err := s.list(r.Context(), sc, readListQuery(r))
	if err != nil {
		jsonError(w, err)
		return
	}
	out := struct {
		Memories []apiMemory `json:"memories"`
		More     bool        `json:"more"`
	}{Memories: []apiMemory{}, More: res.More}
	for _, rw := range res.Rows {
		out.Memories = append(out.Memories, toAPI(rw))
	}
	writeJSON(w, out)
}

type apiMemory struct {
	memory.Node
	State string  `json:"state"`
	Score float64 `json:"score,omitempty"`
}

func toAPI(rw row) apiMemory { return apiMemory{Node: rw.N, State: rw.State, Score: rw.Score} }

func jsonError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, errForbidden):
		status = http.StatusForbidden
	case memory.IsNotFound(err):
		status = http.StatusNotFound
	case errors.Is(err, memory.ErrInvalid), errors.Is(err, errNoProject):
		status = http.StatusBadRequest
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": describe(err)})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// change is one change to a memory, from a pass's journal.
type change struct {
	Pass   memory.Pass
	Entry  memory.JournalEntry
	Role   string // what the memory was in the entry: "the memory", "its replacement", ...
	Undone bool
}

// memoryView is a memory's page.
type memoryView struct {
	N        memory.Node
	State    string
	Stale    bool
	Prov     []string
	Edges    []edgeView
	Graph    string
	Changes  []change
	Writable bool
	Kinds    []memory.Subkind
	Note     string
}

type edgeView struct {
	E     memory.Edge
	Other memory.Node
	Out   bool // the edge starts at this memory
	Known bool // the other end is visible to the caller
}

// MaxHistoryPasses bounds the passes a memory's page reads for its changes.
const MaxHistoryPasses = 500

func (s *Server) memoryView(ctx context.Context, sc scope, p principal, id string) (memoryView, error) {
	c := sc.caller(p)
	n, err := s.tool.Load(ctx, c, id, false)
	if err != nil {
		return memoryView{}, err
	}
	v := memoryView{N: n, State: state(&n), Stale: n.Stale(), Prov: memory.Provenance(&n, sc.Project, nil), Kinds: memory.Subkinds}
	if _, err := s.tool.Load(ctx, c, id, true); err == nil {
		v.Writable = true
	}
	edges, err := s.st.Edges(ctx, n.ID)
	if err != nil {
		return v, err
	}
	others := make([]string, 0, len(edges))
	for _, e := range edges {
		o := e.Dst
		if o == n.ID {
			o = e.Src
		}
		others = append(others, o)
	}
	nodes, err := s.st.GetMany(ctx, others)
	if err != nil {
		return v, err
	}
	byID := map[string]memory.Node{}
	for _, o := range nodes {
		byID[o.ID] = o
	}
	f := memory.Filter{TenantID: sc.Tenant, ProjectID: sc.Project, CrossProject: s.search.CrossProject, IncludeArchived: true, IncludeSuperseded: true}
	for i, e := range edges {
		o, ok := byID[others[i]]
		ev := edgeView{E: e, Out: e.Src == n.ID}
		if ok && memory.Visible(&o, f, s.now()) {
			ev.Other, ev.Known = o, true
		} else {
			ev.Other = memory.Node{ID: others[i]}
		}
		v.Edges = append(v.Edges, ev)
	}
	slices.SortFunc(v.Edges, func(a, b edgeView) int {
		return strings.Compare(string(a.E.Relation)+a.Other.ID, string(b.E.Relation)+b.Other.ID)
	})
	v.Graph = graphSVG(&n, v.Edges, string(sc.Query()))
	passes, err := s.st.Passes(ctx, memory.PassQuery{Tenant: sc.Tenant, Project: n.ProjectID, Limit: MaxHistoryPasses})
	if err != nil {
		return v, err
	}
	for _, ps := range passes {
		for _, e := range ps.Entries {
			role := ""
			switch {
			case e.NodeID == n.ID:
				role = "this memory"
			case e.NewID == n.ID && e.Op == memory.OpRevise:
				role = "written as the revision of [" + e.NodeID + "]"
			case e.NewID == n.ID:
				role = "linked by [" + e.NodeID + "]"
			case e.Edge != nil && (e.Edge.Src == n.ID || e.Edge.Dst == n.ID):
				role = "an edge of this memory"
			}
			if role != "" {
				v.Changes = append(v.Changes, change{Pass: ps, Entry: e, Role: role, Undone: ps.Status == memory.PassUndone})
			}
		}
	}
	if len(passes) == MaxHistoryPasses {
		v.Note = fmt.Sprintf("changes from the %d most recent passes of the project", MaxHistoryPasses)
	}
	return v, nil
}

func (s *Server) handleMemory(w http.ResponseWriter, r *http.Request, ss *session) {
	pg := s.base(w, r, ss, "memories", "Memory")
	if pg == nil {
		return
	}
	v, err := s.memoryView(r.Context(), pg.Scope, ss.p, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, pg, 0, err)
		return
	}
	pg.Title = "Memory " + v.N.ID
	pg.Data = v
	s.render(w, r, "memory", pg)
}

func (s *Server) apiMemory(w http.ResponseWriter, r *http.Request, ss *session) {
	sc, _, err := s.resolve(r.Context(), r, ss)
	if err != nil {
		jsonError(w, err)
		return
	}
	v, err := s.memoryView(r.Context(), sc, ss.p, r.PathValue("id"))
	if err != nil {
		jsonError(w, err)
		return
	}
	edges := make([]memory.Edge, 0, len(v.Edges))
	for _, e := range v.Edges {
		edges = append(edges, e.E)
	}
	writeJSON(w, map[string]any{"memory": apiMemory{Node: v.N, State: v.State}, "provenance": v.Prov, "edges": edges})
}

// errTool: the memory tool refused an operation (its words follow).
var errTool = errors.New("refused")

// op runs one operation of the memory tool for the page's caller: the
// console changes memory by the tool's rules and code, not beside them.
func (s *Server) op(ctx context.Context, sc scope, p principal, op mcptool.Op) (mcptool.Result, error) {
	resp, err := s.tool.Run(ctx, sc.caller(p), mcptool.Request{Ops: []mcptool.Op{op}})
	if err != nil {
		return mcptool.Result{}, err
	}
	res := resp.Results[0]
	if !res.OK {
		if strings.HasSuffix(res.Error, " not found") {
			return res, fmt.Errorf("%w: %s", memory.ErrNotFound, res.Error)
		}
		return res, fmt.Errorf("%w: %s", errTool, res.Error)
	}
	return res, nil
}

func (s *Server) memoryURL(sc scope, id string) string {
	return "/memory/" + id + "?" + string(sc.Query())
}

// change runs one change of a memory's page: the memory is loaded as the
// caller may change it (the tool's rules), do changes it, and the change
// is journaled as op (a change record) with reason.
func (s *Server) change(w http.ResponseWriter, r *http.Request, ss *session, op memory.JournalOp, do func(pg *page, id string) (string, string, error)) {
	pg := s.base(w, r, ss, "memories", "Memory")
	if pg == nil {
		return
	}
	id := r.PathValue("id")
	before, err := s.tool.Load(r.Context(), pg.Scope.caller(ss.p), id, true)
	if err != nil {
		if !memory.IsNotFound(err) && !errors.Is(err, memory.ErrUnavailable) {
			err = fmt.Errorf("%w: %v", errTool, err) // not allowed
		}
		s.fail(w, r, pg, 0, err)
		return
	}
	flash, reason, err := do(pg, before.ID)
	if err != nil {
		s.fail(w, r, pg, 0, err)
		return
	}
	s.changed(r.Context(), pg.Scope, ss.p, op, before, reason)
	back(w, r, s.memoryURL(pg.Scope, id), flash)
}

func (s *Server) handleEdit(w http.ResponseWriter, r *http.Request, ss *session) {
	s.change(w, r, ss, memory.OpUpdate, func(pg *page, id string) (string, string, error) {
		label, body := r.PostFormValue("label"), r.PostFormValue("body")
		op := mcptool.Op{Op: mcptool.OpUpdate, ID: id, Label: &label, Body: &body}
		if k := r.PostFormValue("kind"); k != "" {
			op.Subkind = k
		}
		res, err := s.op(r.Context(), pg.Scope, ss.p, op)
		if err != nil {
			return "", "", err
		}
		flash := "Saved. The text is now the agent's (its source): a rule the user stated is now asserted by the assistant and unpinned (pin it to keep it a standing instruction)."
		if res.Note != "" {
			flash += " " + res.Note
		}
		return flash, "edited", nil
	})
}

func (s *Server) handlePin(w http.ResponseWriter, r *http.Request, ss *session) {
	s.change(w, r, ss, memory.OpUpdate, func(pg *page, id string) (string, string, error) {
		pin := r.PostFormValue("pinned") == "true"
		if _, err := s.tool.Pin(r.Context(), pg.Scope.caller(ss.p), id, pin); err != nil {
			return "", "", err
		}
		if pin {
			return "Pinned.", "pinned", nil
		}
		return "Unpinned.", "unpinned", nil
	})
}

func (s *Server) handleForget(w http.ResponseWriter, r *http.Request, ss *session) {
	s.change(w, r, ss, memory.OpForget, func(pg *page, id string) (string, string, error) {
		reason := memory.Redact(r.PostFormValue("reason"))
		if _, err := s.op(r.Context(), pg.Scope, ss.p, mcptool.Op{Op: mcptool.OpForget, ID: id, Reason: reason}); err != nil {
			return "", "", err
		}
		return "Forgotten (archived): restore brings it back.", reason, nil
	})
}

func (s *Server) handleRestore(w http.ResponseWriter, r *http.Request, ss *session) {
	s.change(w, r, ss, memory.OpRestore, func(pg *page, id string) (string, string, error) {
		if _, err := s.op(r.Context(), pg.Scope, ss.p, mcptool.Op{Op: mcptool.OpRestore, ID: id}); err != nil {
			return "", "", err
		}
		return "Restored.", "restored", nil
	})
}
