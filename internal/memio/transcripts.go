package memio

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// Transcripts is what an export of transcripts needs of a store.
type Transcripts interface {
	SessionIDs(ctx context.Context, p memory.ProjectRef) ([]string, error)
	Messages(ctx context.Context, s memory.SessionRef, afterID int64, limit int) ([]memory.Message, error)
	Summaries(ctx context.Context, s memory.SessionRef) ([]memory.Summary, error)
}

// Selection says what an export writes: a tenant's graph, one project's
// memories, or one session's (the rule of memory.EraseScope: a project's
// memories are those of its project id, a session's those of its project
// written in it; the tenant's global memories go with the tenant only),
// and with Transcripts the sessions' messages and summaries (a project
// is needed: its sessions, or Session).
type Selection struct {
	Tenant      string
	Project     string
	Session     string
	Transcripts bool
}

// holds reports whether the selection takes n.
func (s Selection) holds(n *memory.Node) bool {
	if s.Project == "" {
		return n.TenantID == s.Tenant
	}
	return memory.EraseScope{Tenant: s.Tenant, Project: s.Project, Session: s.Session}.HoldsNode(n)
}

// A message line: "type": "message", the session it belongs to, and the
// fields of memory.Message (its id is the store's and is not imported:
// the importing store numbers the messages again, in the file's order).
type messageLine struct {
	Type      string `json:"type"`
	TenantID  string `json:"tenant_id,omitempty"`
	ProjectID string `json:"project_id"`
	SessionID string `json:"session_id"`
	memory.Message
}

// A summary line: "type": "summary", the session, memory.Summary.
type summaryLine struct {
	Type      string `json:"type"`
	TenantID  string `json:"tenant_id,omitempty"`
	ProjectID string `json:"project_id"`
	SessionID string `json:"session_id"`
	memory.Summary
}

// ExportSelection writes the nodes sel takes and the edges between them,
// then, with sel.Transcripts, every message and summary of the selected
// sessions, oldest first, session by session. Nothing of another tenant
// is written.
func ExportSelection(ctx context.Context, st Store, w io.Writer, sel Selection) (Stats, error) {
	if sel.Session != "" && sel.Project == "" {
		return Stats{}, fmt.Errorf("memio: export: %w: a session is exported with its project", memory.ErrInvalid)
	}
	if sel.Transcripts && sel.Project == "" {
		return Stats{}, fmt.Errorf("memio: export: %w: transcripts are exported by project (name one)", memory.ErrInvalid)
	}
	var tr Transcripts
	if sel.Transcripts {
		var ok bool
		if tr, ok = st.(Transcripts); !ok {
			return Stats{}, fmt.Errorf("memio: export: the store cannot list transcripts")
		}
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	var s Stats
	mine := map[string]bool{} // the selected node ids seen so far
	var early []memory.Edge   // edges scanned before one of their ends
	writeEdge := func(e memory.Edge) error {
		s.Edges++
		return enc.Encode(edgeLine{Type: "edge", Edge: e})
	}
	err := st.Scan(ctx, func(n memory.Node) error {
		if !sel.holds(&n) {
			return nil
		}
		mine[n.ID] = true
		s.Nodes++
		line := exportNode{Type: "node", Node: n, SessionID: n.SessionID, Paths: n.Paths}
		if line.Paths == nil {
			line.Paths = []string{}
		}
		return enc.Encode(line)
	}, func(e memory.Edge) error {
		if !mine[e.Src] || !mine[e.Dst] {
			early = append(early, e) // another selection's, or an end comes later
			return nil
		}
		return writeEdge(e)
	})
	if err != nil {
		return s, fmt.Errorf("memio: export: %w", err)
	}
	for _, e := range early {
		if mine[e.Src] && mine[e.Dst] {
			if err := writeEdge(e); err != nil {
				return s, fmt.Errorf("memio: export: %w", err)
			}
		}
	}
	if tr != nil {
		p := memory.ProjectRef{Tenant: sel.Tenant, Project: sel.Project}
		sids := []string{sel.Session}
		if sel.Session == "" {
			if sids, err = tr.SessionIDs(ctx, p); err != nil {
				return s, fmt.Errorf("memio: export: %w", err)
			}
		}
		for _, sid := range sids {
			ref := memory.SessionRef{Tenant: sel.Tenant, Project: sel.Project, Session: sid}
			msgs, err := tr.Messages(ctx, ref, 0, 0)
			if err != nil {
				return s, fmt.Errorf("memio: export: %w", err)
			}
			for _, m := range msgs {
				s.Messages++
				if err := enc.Encode(messageLine{Type: "message", TenantID: sel.Tenant, ProjectID: sel.Project, SessionID: sid, Message: m}); err != nil {
					return s, fmt.Errorf("memio: export: %w", err)
				}
			}
			sums, err := tr.Summaries(ctx, ref)
			if err != nil {
				return s, fmt.Errorf("memio: export: %w", err)
			}
			for _, sum := range sums {
				s.Summaries++
				if err := enc.Encode(summaryLine{Type: "summary", TenantID: sel.Tenant, ProjectID: sel.Project, SessionID: sid, Summary: sum}); err != nil {
					return s, fmt.Errorf("memio: export: %w", err)
				}
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return s, fmt.Errorf("memio: export: %w", err)
	}
	return s, nil
}

// transcriptImport collects the message and summary lines of an import,
// in the file's order: messages grouped by session and turn.
type transcriptImport struct {
	turns     []importTurn
	at        map[[3]string]int // session and turn -> index in turns
	summaries []importSummary
}

type importTurn struct {
	ref  memory.SessionRef
	turn string
	msgs []memory.Message
}

type importSummary struct {
	ref memory.SessionRef
	sum memory.Summary
}

// add checks and collects a message or summary line; bad reports what is
// wrong with it.
func (ti *transcriptImport) add(kind string, raw []byte, tenant string, now time.Time, bad func(format string, a ...any)) {
	ref := func(t, p, s string) (memory.SessionRef, bool) {
		if t != "" && t != tenant {
			bad("%s: of tenant %q, in an import for tenant %q", kind, memory.Neutralise(t), memory.Neutralise(tenant))
			return memory.SessionRef{}, false
		}
		r := memory.SessionRef{Tenant: tenant, Project: p, Session: s}
		if err := memory.CheckSession(r); err != nil {
			bad("%s: %v", kind, err)
			return r, false
		}
		return r, true
	}
	switch kind {
	case "message":
		var ml messageLine
		if err := strictDecode(raw, &ml); err != nil {
			bad("message: %v", err)
			return
		}
		r, ok := ref(ml.TenantID, ml.ProjectID, ml.SessionID)
		if !ok {
			return
		}
		if _, err := memory.PrepareMessages(ml.TurnID, []memory.Message{ml.Message}, now); err != nil {
			bad("message: %v", err)
			return
		}
		if ti.at == nil {
			ti.at = map[[3]string]int{}
		}
		key := [3]string{r.Project, r.Session, ml.TurnID}
		i, ok := ti.at[key]
		if !ok {
			i = len(ti.turns)
			ti.at[key] = i
			ti.turns = append(ti.turns, importTurn{ref: r, turn: ml.TurnID})
		}
		ti.turns[i].msgs = append(ti.turns[i].msgs, ml.Message)
	case "summary":
		var sl summaryLine
		if err := strictDecode(raw, &sl); err != nil {
			bad("summary: %v", err)
			return
		}
		r, ok := ref(sl.TenantID, sl.ProjectID, sl.SessionID)
		if !ok {
			return
		}
		if _, err := memory.PrepareSummary(sl.Summary, now); err != nil {
			bad("summary: %v", err)
			return
		}
		ti.summaries = append(ti.summaries, importSummary{ref: r, sum: sl.Summary})
	}
}

// write appends the collected turns (a turn already stored is left as it
// is: AppendTranscript is once per turn id) and saves the summaries.
func (ti *transcriptImport) write(ctx context.Context, st Store, done *Stats) error {
	for _, t := range ti.turns {
		_, fresh, err := st.AppendTranscript(ctx, t.ref, t.turn, t.msgs)
		if err != nil {
			return fmt.Errorf("memio: write the transcript of %s turn %s: %w", t.ref, t.turn, err)
		}
		if fresh {
			done.Messages += len(t.msgs)
		}
	}
	stored := map[memory.SessionRef][]memory.Summary{}
	for _, s := range ti.summaries {
		have, ok := stored[s.ref]
		if !ok {
			var err error
			if have, err = st.Summaries(ctx, s.ref); err != nil {
				return fmt.Errorf("memio: read the summaries of %s: %w", s.ref, err)
			}
			stored[s.ref] = have
		}
		if slices.ContainsFunc(have, func(h memory.Summary) bool { return h.Content == s.sum.Content && h.UpTo == s.sum.UpTo }) {
			continue // imported before
		}
		if err := st.SaveSummary(ctx, s.ref, s.sum); err != nil {
			return fmt.Errorf("memio: write a summary of %s: %w", s.ref, err)
		}
		done.Summaries++
	}
	return nil
}
