package mcptool

import (
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// The operations.
const (
	OpRecall     = "recall"
	OpUpdate     = "update"
	OpNeighbours = "neighbours"
	OpTimeline   = "timeline"
	OpLink       = "link"
	OpForget     = "forget"
	OpRestore    = "restore"
	OpStats      = "stats"
)

// OpNames lists the operations in the order the tool describes them.
var OpNames = []string{OpRecall, OpUpdate, OpNeighbours, OpTimeline, OpLink, OpForget, OpRestore, OpStats}

// Recall scopes.
const (
	ScopeProject = "project" // this project's memories and the global ones (default)
	ScopeAll     = "all"     // also other projects' memories whose reach is anywhere
)

// Request is the tool's input: operations answered in order.
type Request struct {
	Ops []Op `json:"ops" jsonschema:"the operations, answered in order; one that fails reports its error and the others still run"`
}

// Op is one operation; which fields it reads depends on Op.
type Op struct {
	Op       string  `json:"op" jsonschema:"recall | update | neighbours | timeline | link | forget | restore | stats"`
	Query    string  `json:"query,omitempty" jsonschema:"recall: what to look up"`
	Scope    string  `json:"scope,omitempty" jsonschema:"recall: project (default: this project and global memories) or all (also other projects' shareable memories)"`
	Kind     string  `json:"kind,omitempty" jsonschema:"recall: only memories of this kind (decision, pattern, failure, preference, observation, entity, topic)"`
	Limit    int     `json:"limit,omitempty" jsonschema:"recall: 1-40 (default 10); timeline: 1-60 (default 20)"`
	Explain  bool    `json:"explain,omitempty" jsonschema:"recall: also say why each memory ranks where it does (each retrieval channel's rank and score, the graph and path activations, the prior and its parts)"`
	ID       string  `json:"id,omitempty" jsonschema:"update, neighbours, forget, restore: the memory's id as shown in [brackets] in the memory block"`
	Label    *string `json:"label,omitempty" jsonschema:"update: the new label (short title)"`
	Body     *string `json:"body,omitempty" jsonschema:"update: the new body"`
	Subkind  string  `json:"subkind,omitempty" jsonschema:"update: the new kind"`
	Hops     int     `json:"hops,omitempty" jsonschema:"neighbours: 1-3 (default 1)"`
	Since    string  `json:"since,omitempty" jsonschema:"timeline: memories updated at or after this time (RFC 3339, e.g. 2026-05-01T00:00:00Z) instead of this session's"`
	Until    string  `json:"until,omitempty" jsonschema:"timeline: memories updated before this time (RFC 3339)"`
	From     string  `json:"from,omitempty" jsonschema:"link: the id the edge starts at (for supersedes: the newer memory)"`
	To       string  `json:"to,omitempty" jsonschema:"link: the id the edge ends at (for supersedes: the older memory)"`
	Relation string  `json:"relation,omitempty" jsonschema:"link: supersedes, contradicts, generalizes, about, relates_to, caused_by, ..."`
	Reason   string  `json:"reason,omitempty" jsonschema:"forget: why the memory is wrong or no longer useful"`
}

// Response is the tool's output: one result per operation, in order.
type Response struct {
	Results []Result `json:"results"`
}

// Result answers one operation: OK with what it returns, or Error.
type Result struct {
	Op       string    `json:"op"`
	OK       bool      `json:"ok"`
	Error    string    `json:"error,omitempty"`
	Note     string    `json:"note,omitempty"` // what went partly wrong in an operation that did its work
	Memories []Memory  `json:"memories,omitempty"`
	Memory   *Memory   `json:"memory,omitempty"`
	Edge     *EdgeInfo `json:"edge,omitempty"`
	Stats    *Stats    `json:"stats,omitempty"`
}

// Memory is one memory as the tool shows it: the text neutralised as in
// the memory block, provenance in the block's words.
type Memory struct {
	ID         string           `json:"id"`
	Kind       memory.Subkind   `json:"kind"`
	Scope      memory.Scope     `json:"scope"`
	Provenance []string         `json:"provenance"`
	Text       string           `json:"text"`
	Score      float64          `json:"score,omitempty"` // recall
	Why        *memory.Why      `json:"why,omitempty"`   // recall with explain: how it was scored
	Validity   Validity         `json:"validity"`
	AssertedBy memory.Authority `json:"asserted_by"`
	Source     memory.Source    `json:"source"`
	Confidence float64          `json:"confidence"`
	UpdatedAt  time.Time        `json:"updated_at,omitzero"`
	// neighbours: how it was reached.
	Depth    int             `json:"depth,omitempty"`
	Relation memory.Relation `json:"relation,omitempty"`
	Via      string          `json:"via,omitempty"` // the other end of that edge
}

// The states of a memory's validity.
const (
	StateLive       = "live"
	StateArchived   = "archived"   // forgotten; restore brings it back
	StateSuperseded = "superseded" // replaced by superseded_by; restore reopens it
	StateClosed     = "closed"     // a fact no longer valid (valid_to)
)

// Validity says whether a memory holds and since when.
type Validity struct {
	State        string    `json:"state"`
	From         time.Time `json:"from,omitzero"`
	To           time.Time `json:"to,omitzero"`
	SupersededBy string    `json:"superseded_by,omitempty"`
	ArchivedAt   time.Time `json:"archived_at,omitzero"`
	Stale        bool      `json:"stale,omitempty"` // the code it is attached to changed since
}

// EdgeInfo is an edge link made or reinforced.
type EdgeInfo struct {
	From     string          `json:"from"`
	To       string          `json:"to"`
	Relation memory.Relation `json:"relation"`
	Weight   float64         `json:"weight,omitempty"`
}

// Stats are the counts of what the project sees and the session's
// consolidation and compaction.
type Stats struct {
	Project string        `json:"project"`
	Counts  memory.Counts `json:"counts"`
	// Ready: no memory waits for an embedding, so recall runs.
	Ready   bool          `json:"recall_ready"`
	Session *SessionStats `json:"session,omitempty"`
}

// SessionStats is where the session's background passes are.
type SessionStats struct {
	ID string `json:"id"`
	// LastConsolidation: the consolidation cursor (the last message the
	// consolidator has brought into memory) and that message's time; nil
	// when the session was never consolidated.
	LastConsolidation *Mark `json:"last_consolidation,omitempty"`
	// LastCompaction: the latest summary, the message it covers up to and
	// when it was made; nil when the session was never compacted.
	LastCompaction *Mark `json:"last_compaction,omitempty"`
}

// Mark is a point a pass reached in a session's transcript.
type Mark struct {
	UpToMessage int64     `json:"up_to_message"`
	At          time.Time `json:"at,omitzero"`
}
