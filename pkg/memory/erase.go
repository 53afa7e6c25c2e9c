package memory

import (
	"context"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// EraseScope names what an erasure (or an export) covers: a whole tenant,
// one project of a tenant, or one session of a project. Tenant "" is the
// default tenant, which is erased project by project (its whole graph is
// the deployment's: delete the data dir or the namespace for that).
type EraseScope struct {
	Tenant  string `json:"tenant"`
	Project string `json:"project,omitempty"`
	Session string `json:"session,omitempty"`
}

// Check validates the scope (ErrInvalid, naming every problem).
func (s EraseScope) Check() error {
	var bad invalid
	if err := CheckTenant(s.Tenant); err != nil {
		bad.add("%v", err)
	}
	if !utf8.ValidString(s.Project) || !utf8.ValidString(s.Session) {
		bad.add("project and session ids must be valid UTF-8")
	}
	if s.Session != "" && s.Project == "" {
		bad.add("a session is erased within its project: name the project")
	}
	if s.Tenant == "" && s.Project == "" {
		bad.add("the default tenant is erased project by project: name a project")
	}
	return bad.err("erase scope")
}

func (s EraseScope) String() string {
	out := "tenant " + quoteID(s.Tenant)
	if s.Project != "" {
		out += " project " + quoteID(s.Project)
	}
	if s.Session != "" {
		out += " session " + quoteID(s.Session)
	}
	return out
}

func quoteID(id string) string {
	if id == "" {
		return `"" (default)`
	}
	b, _ := json.Marshal(id)
	return string(b)
}

// Kind says how wide the scope is.
func (s EraseScope) Kind() string {
	switch {
	case s.Session != "":
		return "session"
	case s.Project != "":
		return "project"
	}
	return "tenant"
}

// HoldsSession reports whether the per-session records of ref are the
// scope's.
func (s EraseScope) HoldsSession(ref SessionRef) bool {
	return ref.Tenant == s.Tenant && (s.Project == "" || ref.Project == s.Project) &&
		(s.Session == "" || ref.Session == s.Session)
}

// HoldsProject reports whether the per-project records of p (processed-event
// records; for a pass, see HoldsPass) are the scope's: a tenant holds all of
// its projects, a project itself; a session holds no per-project record
// (they name no session).
func (s EraseScope) HoldsProject(p ProjectRef) bool {
	return s.Session == "" && p.Tenant == s.Tenant && (s.Project == "" || p.Project == s.Project)
}

// HoldsNode reports whether the memory n is the scope's: every memory of a
// tenant (its global ones included); a project's memories (ProjectID); a
// session's, the memories of its project written in it (SessionID), of
// any scope. A global memory (no project) is its tenant's only: no project
// or session erasure removes one (with ENGRAM_CROSS_PROJECT=false
// extraction writes none).
func (s EraseScope) HoldsNode(n *Node) bool {
	if n.TenantID != s.Tenant {
		return false
	}
	if s.Project == "" {
		return true
	}
	return n.ProjectID == s.Project && (s.Session == "" || n.SessionID == s.Session)
}

// HoldsPass reports whether the consolidation pass journal p is the
// scope's (a pass is of one session).
func (s EraseScope) HoldsPass(p *Pass) bool {
	return s.HoldsSession(SessionRef{Tenant: p.Tenant, Project: p.Project, Session: p.Session})
}

// Erased counts what an erasure deleted, by kind of record. Every backend
// counts alike (the conformance suite checks the counts against what it
// wrote).
type Erased struct {
	Memories int `json:"memories"` // nodes
	Vectors  int `json:"vectors"`  // their embeddings, with their vector index entries
	// Edges touching an erased memory, at either end, closed ones included.
	Edges      int `json:"edges"`
	Messages   int `json:"transcript_messages"`
	Turns      int `json:"transcript_turns"` // the turn records that make AppendTranscript idempotent
	Summaries  int `json:"summaries"`
	Cursors    int `json:"consolidation_cursors"`
	Injections int `json:"injection_records"` // of the scope, and of other sessions when they name an erased memory
	Briefings  int `json:"briefing_flags"`
	Leases     int `json:"leases"`
	Processed  int `json:"processed_events"` // processed-event records (per project: tenant and project scopes)
	Passes     int `json:"consolidation_passes"`
	// JournalEntries are entries of other sessions' passes (kept) that
	// held an erased memory (its text before or after, or an edge to it),
	// removed from those journals.
	JournalEntries int `json:"journal_entries"`
}

// Add adds o to e.
func (e *Erased) Add(o Erased) {
	e.Memories += o.Memories
	e.Vectors += o.Vectors
	e.Edges += o.Edges
	e.Messages += o.Messages
	e.Turns += o.Turns
	e.Summaries += o.Summaries
	e.Cursors += o.Cursors
	e.Injections += o.Injections
	e.Briefings += o.Briefings
	e.Leases += o.Leases
	e.Processed += o.Processed
	e.Passes += o.Passes
	e.JournalEntries += o.JournalEntries
}

// Total is the number of records erased.
func (e Erased) Total() int {
	return e.Memories + e.Vectors + e.Edges + e.Messages + e.Turns + e.Summaries + e.Cursors +
		e.Injections + e.Briefings + e.Leases + e.Processed + e.Passes + e.JournalEntries
}

// Seen receives the texts an erasure deletes (labels, bodies, paths,
// entity names and ids of memories, message contents and tool arguments,
// summaries, injected blocks, journal texts), so that the caller can
// look for them afterwards (a verification). It is called synchronously;
// nil: not wanted.
type Seen func(text string)

// PurgeReport says what a Purge did to the backend's files and what it
// could not do.
type PurgeReport struct {
	Done       []string `json:"done,omitempty"`
	Incomplete []string `json:"incomplete,omitempty"`
}

// Erasure erases a scope for good and lists what a scope holds, for
// `engram memory erase` and `export` and the console. It is part of the
// Store contract.
type Erasure interface {
	// Erase deletes every record scope holds (EraseScope.Holds*): its
	// memories with their vectors, index entries (lexical, vector,
	// paths, standing, timeline, digests, ids) and every edge touching
	// them; transcripts and turn records, summaries, consolidation
	// cursors, injection records, briefing flags, leases, processed-event
	// records (tenant and project scopes) and pass journals. Records of
	// other sessions of the same tenant that name an erased memory lose
	// that: an injection record naming one is deleted, and a pass journal
	// loses the entries that hold one (ScrubPass). Nothing of another
	// tenant is read or changed. It returns what it deleted (a second
	// erasure of the scope deletes nothing) and calls seen (when not nil)
	// with the texts of what it deletes. Deleted records are gone from
	// every read at once; what the backend's files may keep of them is
	// Purge's.
	Erase(ctx context.Context, scope EraseScope, seen Seen) (Erased, error)
	// Purge makes what deletions left in the backend's own persistence
	// unreadable there: SQLite rewrites the database (VACUUM) and
	// truncates the write-ahead log; Redis rewrites its append-only file
	// (and its snapshot when it keeps one). It reports what it did and
	// what it could not do (a Redis user without the permission, say);
	// an error only when a step failed.
	Purge(ctx context.Context) (PurgeReport, error)
	// SessionIDs lists the sessions of project p that hold a per-session
	// record (transcript, summary, cursor, injection record, briefing
	// flag, lease or pass journal), sorted.
	SessionIDs(ctx context.Context, p ProjectRef) ([]string, error)
	// Summaries lists every summary saved for the session, oldest first.
	Summaries(ctx context.Context, s SessionRef) ([]Summary, error)
}

// ScrubPassDoc is ScrubPass on a stored journal document: the document
// rewritten without the entries that name an erased memory, and how many
// it dropped (their texts go to seen). 0 and nil: nothing to change, or a
// document that does not decode (an unreadable journal names nothing that
// can be found).
func ScrubPassDoc(doc []byte, erased func(id string) bool, seen Seen) ([]byte, int, error) {
	p, err := DecodePass(doc)
	if err != nil {
		return nil, 0, nil
	}
	removed := ScrubPass(&p, erased)
	if len(removed) == 0 {
		return nil, 0, nil
	}
	PassTexts(&Pass{Entries: removed}, seen)
	b, err := EncodePass(p)
	if err != nil {
		return nil, 0, err
	}
	return b, len(removed), nil
}

// ScrubPass removes from a kept pass every journal entry that holds an
// erased memory (its id, its replacement, a node before or after, or an
// end of its edge: erased reports which ids are), and the pass's runtime
// state (the consolidator's ledger, which may quote the memory) when it
// removed any. It returns the entries it removed (none: p is unchanged).
func ScrubPass(p *Pass, erased func(id string) bool) []JournalEntry {
	holds := func(e *JournalEntry) bool {
		if erased(e.NodeID) || (e.NewID != "" && erased(e.NewID)) {
			return true
		}
		if e.Before != nil && erased(e.Before.ID) || e.After != nil && erased(e.After.ID) {
			return true
		}
		return e.Edge != nil && (erased(e.Edge.Src) || erased(e.Edge.Dst))
	}
	var removed, kept []JournalEntry
	for _, e := range p.Entries {
		if holds(&e) {
			removed = append(removed, e)
		} else {
			kept = append(kept, e)
		}
	}
	if len(removed) > 0 {
		p.Entries, p.State = kept, nil
	}
	return removed
}

// InjectionNames reports whether an injection record names an erased
// memory: as a line of its block, or as a candidate its explanation says
// the block policy cut.
func InjectionNames(in Injection, erased func(id string) bool) bool {
	if slices.ContainsFunc(in.IDs, erased) {
		return true
	}
	if in.Why != nil {
		for _, c := range in.Why.Cut {
			if erased(c.ID) {
				return true
			}
		}
	}
	return false
}

// NodeTexts calls seen with the texts of a memory an erasure deletes.
func NodeTexts(n *Node, seen Seen) {
	if seen == nil {
		return
	}
	seen(n.ID)
	seen(n.Label)
	seen(n.Body)
	for _, p := range n.Paths {
		seen(p)
	}
	for _, e := range n.Entities {
		seen(e.Name)
	}
}

// MessageTexts calls seen with the texts of a transcript message.
func MessageTexts(m *Message, seen Seen) {
	if seen == nil {
		return
	}
	seen(m.Content)
	for _, c := range m.ToolCalls {
		seen(c.Arguments)
	}
}

// PassTexts calls seen with the texts a pass journal holds.
func PassTexts(p *Pass, seen Seen) {
	if seen == nil {
		return
	}
	for i := range p.Entries {
		e := &p.Entries[i]
		seen(e.Reason)
		if e.Before != nil {
			NodeTexts(e.Before, seen)
		}
		if e.After != nil {
			NodeTexts(e.After, seen)
		}
	}
}
