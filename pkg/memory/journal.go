package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// PassStatus is where a consolidation pass stands.
type PassStatus string

// The pass statuses.
const (
	PassRunning  PassStatus = "running"  // started, not ended (or cut off: resumed by the next delivery)
	PassParked   PassStatus = "parked"   // a new turn started: resumed at the next idle
	PassFinished PassStatus = "finished" // ended (done or stopped)
	PassUndone   PassStatus = "undone"   // reverted by `engram memory undo`
)

// Valid reports whether s is a known status.
func (s PassStatus) Valid() bool {
	switch s {
	case PassRunning, PassParked, PassFinished, PassUndone:
		return true
	}
	return false
}

// JournalOp is what one journal entry did.
type JournalOp string

// The journal operations.
const (
	OpRemember JournalOp = "remember"
	OpRevise   JournalOp = "revise"
	OpForget   JournalOp = "forget"
	OpLink     JournalOp = "link"
	OpUnlink   JournalOp = "unlink"
	// OpRestore: a forgotten (archived) or closed memory made live again
	// (Before: as it was; After: restored).
	OpRestore JournalOp = "restore"
	// OpUpdate: a person changed a memory in place through the console
	// (its text, kind or pin): Before and After. Only in a change record
	// (Pass.By), which undo refuses.
	OpUpdate JournalOp = "update"
	// OpHold: remember held a near-duplicate for review instead of
	// storing it. After is the fact it would have stored, NodeID the memory
	// it resembles, Reason why (the cosine or the word overlap). Undo
	// leaves it alone; a person resolves it (Resolution).
	OpHold JournalOp = "hold"
)

// The resolutions of a held near-duplicate.
const (
	ResolveKeep    = "kept"      // stored beside the memory it resembles
	ResolveMerge   = "merged"    // stored as the revision of the memory it resembles
	ResolveDiscard = "discarded" // not stored
)

// JournalEntry is one change a pass made, with the state before and after.
type JournalEntry struct {
	Op     JournalOp `json:"op"`
	NodeID string    `json:"node_id"`          // the node changed (for revise: the old one)
	NewID  string    `json:"new_id,omitempty"` // revise: the replacement; remember with a topic: the topic
	Before *Node     `json:"before,omitempty"` // the node before (nil when created)
	After  *Node     `json:"after,omitempty"`  // the node after (revise: the replacement)
	Edge   *Edge     `json:"edge,omitempty"`   // link / unlink
	Reason string    `json:"reason,omitempty"` // the model's one-line reason
	At     time.Time `json:"at"`
	// Pending: journaled before the write and never settled (the pass was
	// cut off in between); the change may or may not have been applied.
	Pending bool `json:"pending,omitempty"`
	// Resolution of a held entry (OpHold): ResolveKeep, ResolveMerge or
	// ResolveDiscard, when, by whom, and the memory written (keep, merge).
	Resolution string    `json:"resolution,omitempty"`
	ResolvedAt time.Time `json:"resolved_at,omitzero"`
	ResolvedBy string    `json:"resolved_by,omitempty"`
	ResolvedID string    `json:"resolved_id,omitempty"`
}

// Pass is the journal of one consolidation pass: what it changed, and the
// runtime state a parked or cut-off pass resumes from.
type Pass struct {
	ID      string     `json:"id"`
	Tenant  string     `json:"tenant,omitempty"` // "": the default tenant
	Project string     `json:"project"`
	Session string     `json:"session"`
	Status  PassStatus `json:"status"`
	Verdict string     `json:"verdict,omitempty"` // why it ended: done, budget, stuck, ...
	// By is empty for a consolidation pass; a record of a change a person
	// made by hand names them ("console:<principal>"): the memory's
	// history shows it, undo refuses it.
	By        string    `json:"by,omitempty"`
	StartedAt time.Time `json:"started_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// From and UpTo are the transcript messages the pass read: the oldest
	// and the newest message id it was shown (0: none yet).
	From  int64 `json:"from,omitempty"`
	UpTo  int64 `json:"up_to,omitempty"`
	Steps int   `json:"steps,omitempty"`
	// PromptTokens and CompletionTokens are the model tokens spent.
	PromptTokens     int            `json:"prompt_tokens,omitempty"`
	CompletionTokens int            `json:"completion_tokens,omitempty"`
	Entries          []JournalEntry `json:"entries,omitempty"`
	// State is the consolidator's runtime state (its ledger), opaque here.
	State json.RawMessage `json:"state,omitempty"`
	// Undo notes what `engram memory undo` could not revert, and why.
	UndoneAt  time.Time `json:"undone_at,omitzero"`
	UndoNotes []string  `json:"undo_notes,omitempty"`
}

// PassQuery selects passes, newest started first.
type PassQuery struct {
	Tenant  string     // always matched: "" is the default tenant
	Project string     // empty: every project (of Tenant)
	Session string     // empty: every session (of Project)
	Status  PassStatus // empty: any
	Limit   int        // <= 0: DefaultChannelLimit
}

// CheckPass validates a pass record before it is stored (ErrInvalid).
func CheckPass(p Pass) error {
	var bad invalid
	if p.ID == "" {
		bad.add("a pass needs an id")
	}
	if p.Project == "" || p.Session == "" {
		bad.add("a pass needs a project and a session")
	}
	if !p.Status.Valid() {
		bad.add("unknown pass status %q", p.Status)
	}
	if p.StartedAt.IsZero() {
		bad.add("a pass needs a start time")
	}
	return bad.err("pass")
}

// MatchPass reports whether p is selected by q (ignoring the limit).
func MatchPass(p *Pass, q PassQuery) bool {
	return p.Tenant == q.Tenant && (q.Project == "" || p.Project == q.Project) &&
		(q.Session == "" || p.Session == q.Session) &&
		(q.Status == "" || p.Status == q.Status)
}

// ComparePasses orders passes newest started first, then by id.
func ComparePasses(a, b *Pass) int {
	if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
		return c
	}
	switch {
	case a.ID < b.ID:
		return -1
	case a.ID > b.ID:
		return 1
	}
	return 0
}

// Journal keeps the consolidation passes' journals (the consolidator writes
// them; `engram memory history` and `undo` read them).
type Journal interface {
	// PutPass stores p (CheckPass, else ErrInvalid), replacing the pass of
	// the same id in its project.
	PutPass(ctx context.Context, p Pass) error
	// GetPass returns the pass of id in p (ErrNotFound). An empty
	// p.Project searches every project of p.Tenant; a pass of another
	// tenant is never found.
	GetPass(ctx context.Context, p ProjectRef, id string) (Pass, error)
	// Passes lists the passes q selects by ComparePasses.
	Passes(ctx context.Context, q PassQuery) ([]Pass, error)
}

// EncodePass and DecodePass are the record format both backends store.
func EncodePass(p Pass) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode pass: %w", err)
	}
	return b, nil
}

// DecodePass decodes a stored pass record.
func DecodePass(b []byte) (Pass, error) {
	var p Pass
	if err := json.Unmarshal(b, &p); err != nil {
		return Pass{}, fmt.Errorf("decode pass: %w", err)
	}
	return p, nil
}
