package memory

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors every backend returns (wrapped), checked with errors.Is.
var (
	// ErrNotFound: no such node, edge, summary or record.
	ErrNotFound = errors.New("memory: not found")
	// ErrInvalid: the input breaks a rule of the model (unknown subkind, self-link, ...).
	ErrInvalid = errors.New("memory: invalid")
	// ErrRefused: the operation is valid but a rule refuses it (supersede by a
	// memory of lower authority or narrower scope).
	ErrRefused = errors.New("memory: refused")
	// ErrUnavailable: the backend cannot be reached (transient).
	ErrUnavailable = errors.New("memory: store unavailable")
)

// Filter restricts what retrieval channels and listings return.
//
// A node is visible only within its tenant (TenantID; "" is the default
// tenant), and there when its project is ProjectID, or it has no project
// (global within the tenant), or CrossProject is on and its reach is
// anywhere (another project of the same tenant). Session-scoped
// nodes of other sessions than SessionID are hidden. Archived nodes, superseded
// nodes and closed facts (valid-to set) are excluded unless asked for.
type Filter struct {
	TenantID          string
	ProjectID         string
	SessionID         string
	CrossProject      bool
	IncludeArchived   bool
	IncludeSuperseded bool // also closed facts (revised)
	MinConfidence     float64
	Subkinds          []Subkind // empty: all
}

// Scored is one candidate of a retrieval channel with the channel's raw score
// (BM25, cosine, or path-match count), best first.
type Scored struct {
	ID    string  `json:"id"`
	Score float64 `json:"score"`
}

// UpsertResult says what an upsert did.
type UpsertResult struct {
	Node    Node // the stored node after the write
	Created bool // false: an existing node with the same digest was reinforced
}

// Patch changes the text or kind of a node. Nil fields are left alone. A
// change of label, body or subkind re-derives the digest and drops the vector
// so that the node is re-embedded.
type Patch struct {
	Label      *string
	Body       *string
	Subkind    *Subkind
	Confidence *float64
	Pinned     *bool
	Reach      *Reach
	Scope      *Scope
	Paths      *[]string
	Entities   *[]Entity
	Source     *Source // who wrote the new text, which becomes the node's source; nil cannot change a user's text
}

// Neighbour is a node reached through the graph.
type Neighbour struct {
	Node  Node
	Edge  Edge // the edge through which it was first reached
	Depth int  // 1..3
}

// TimelineQuery lists nodes newest (updated) first.
type TimelineQuery struct {
	Filter
	OnlySession bool      // only nodes written in Filter.SessionID
	AsOf        time.Time // non-zero: the facts valid at that time, closed ones included
	Limit       int
}

// Nodes is the node side of the contract.
type Nodes interface {
	// Upsert stores n, or reinforces the node of the same digest in the same
	// project of the same tenant. An empty ID is generated; Digest is computed when empty.
	// Backends apply PrepareNew to n, then Reinforce on a match (whatever the
	// match's state: see the package doc).
	Upsert(ctx context.Context, n Node) (UpsertResult, error)
	// Get returns the node (ErrNotFound when there is none). The embedding
	// need not be filled (Scan returns it).
	Get(ctx context.Context, id string) (Node, error)
	// GetMany returns the nodes that exist, in the order of ids. The
	// embedding need not be filled (retrieval never reads it).
	GetMany(ctx context.Context, ids []string) ([]Node, error)
	// Update applies ApplyPatch; a new digest held by another node of the
	// project is ErrRefused.
	Update(ctx context.Context, id string, p Patch) (Node, error)
	// Archive ("forget") and Restore apply memory.Archive / memory.Restore
	// (Restore also reopens a superseded or closed node; its supersedes
	// edge stays until unlinked); ErrNotFound for an unknown id.
	Archive(ctx context.Context, id string) error
	Restore(ctx context.Context, id string) error
	// Supersede marks oldID superseded by newID (memory.Close: superseded-by
	// set, validity closed) and links newID -supersedes-> oldID. ErrRefused
	// per memory.CheckSupersede; ErrNotFound when either is unknown.
	Supersede(ctx context.Context, oldID, newID string) error
	// Revise prepares n with memory.PrepareRevision (inherits what it leaves
	// empty; ErrRefused per CheckSupersede), upserts it, closes oldID
	// (memory.Close) and links n -supersedes-> old, in one transaction. It
	// returns the new (or reinforced) node.
	Revise(ctx context.Context, oldID string, n Node) (Node, error)
	// SetEmbedding stores the vector of a node and the model that made it
	// (ErrNotFound; ErrInvalid for an empty model, an empty or zero vector,
	// or one whose dimension differs from the model's other vectors).
	SetEmbedding(ctx context.Context, id, model string, vec []float32) error
	// PendingEmbeddings lists live nodes whose vector is missing or made by
	// another model, oldest created first; limit <= 0: DefaultChannelLimit.
	PendingEmbeddings(ctx context.Context, model string, limit int) ([]Node, error)
	// HasPendingEmbeddings reports cheaply whether a live node of project,
	// or a global one, still lacks a vector by model (missing or made by
	// another model): the injector's readiness gate, per project, so that
	// a backlog in one project does not stop recall in the others.
	HasPendingEmbeddings(ctx context.Context, p ProjectRef, model string) (bool, error)
	// HasLiveMemory reports cheaply whether project (or its tenant's global
	// space) holds any live node.
	HasLiveMemory(ctx context.Context, p ProjectRef) (bool, error)
	// Timeline lists nodes by memory.CompareTimeline (newest update first)
	// under the Filter rules (memory.Visible, or memory.AsOfVisible when
	// AsOf is set); limit <= 0: DefaultChannelLimit.
	Timeline(ctx context.Context, q TimelineQuery) ([]Node, error)
	// StandingInstructions selects the rules in force for a project
	// (memory.StandingFor: its own and its tenant's global ones) in
	// memory.CompareStanding order; limit <= 0: all.
	StandingInstructions(ctx context.Context, p ProjectRef, limit int) ([]Node, error)
	// ApplyFeedback applies the verdicts on injected memories
	// (memory.ApplyVerdict). Unknown ids are skipped; an unknown verdict is
	// ErrInvalid and nothing is applied.
	ApplyFeedback(ctx context.Context, verdicts map[string]Verdict) error
	// MarkStale decays memories of project attached to the changed paths and
	// returns the ids it marked (the rule: memory.MarkStale; at most
	// MaxStalePerCall per call, most recently updated first).
	MarkStale(ctx context.Context, p ProjectRef, paths []string) ([]string, error)
	// Touch records an access (injection, recall) of the nodes: access +1,
	// accessed-at now. Unknown ids are skipped.
	Touch(ctx context.Context, ids []string) error
	// PutBatch writes nodes (by id, as given, replacing a node of that id;
	// through memory.PrepareNew) and edges (through memory.PrepareEdge,
	// replacing the live edge of the same src, dst and relation): import and
	// bulk loading. Every item is validated first: any invalid item, an id
	// given twice, an edge
	// whose end is neither in the batch nor stored, an edge between two
	// tenants, or a digest another node of the project holds is an error
	// and nothing is written. All or nothing per project.
	PutBatch(ctx context.Context, nodes []Node, edges []Edge) error
	// DigestOwners returns, for digests of project, the stored node (vector
	// included) that holds each; digests no node holds are absent. Import
	// uses it to merge a repeated text instead of having PutBatch refuse it.
	DigestOwners(ctx context.Context, p ProjectRef, digests []string) (map[string]Node, error)
	// Scan calls fn for every node (vectors included) and every edge.
	Scan(ctx context.Context, node func(Node) error, edge func(Edge) error) error
}

// Graph is the edge side of the contract.
type Graph interface {
	// Link creates the edge (memory.PrepareEdge), or adds WeightStep to an
	// existing live one (memory.Relink). A self-link, or a link between
	// nodes of two tenants, is ErrInvalid; both ends must exist (ErrNotFound). Linking again after Unlink creates a new edge.
	Link(ctx context.Context, e Edge) (Edge, error)
	// Unlink closes the live edge (valid-to); it is kept for as-of reads.
	// ErrNotFound when there is no live edge.
	Unlink(ctx context.Context, src, dst string, rel Relation) error
	// Edges lists the live edges that touch id, in both directions (empty
	// for an unknown id).
	Edges(ctx context.Context, id string) ([]Edge, error)
	// EdgesOf lists the live edges that touch each of ids, in one call (the
	// hot path of retrieval: graph expansion and contradictions). Ids with
	// no live edge, or unknown, are absent from the map.
	EdgesOf(ctx context.Context, ids []string) (map[string][]Edge, error)
	// Neighbours walks live edges in both directions up to hops (1..3, else
	// ErrInvalid) from id (ErrNotFound when unknown) and returns the nodes
	// reached that pass the filter (memory.Visible), each once at its
	// smallest depth, nearest first (then heavier edge, then id). Nodes that
	// fail the filter are neither returned nor walked through; the start
	// node is not returned.
	Neighbours(ctx context.Context, id string, hops int, f Filter) ([]Neighbour, error)
}

// Channels are the retrieval channels, each returning ranked candidates.
type Channels interface {
	// Every channel applies the Filter rules (memory.Visible) and returns
	// at most limit (<= 0: DefaultChannelLimit) candidates, best first, with
	// positive scores where higher is better.
	//
	// Lexical is BM25 over label, body, paths and entity names (tokenised
	// like memory.Terms, the label counted twice) of the query words terms
	// (memory.Terms of a text), OR-ed and stemmed at query time as
	// memory.LexTerms groups them: each group's prefix matches the tokens
	// it prefixes (one term, one idf from the group's summed document
	// frequency), and each word its own token for memory.ExactWeight more;
	// a term of stop words weighs memory.StopWordWeight (LexTerm.Weight).
	// No terms: no candidates.
	Lexical(ctx context.Context, terms []string, f Filter, limit int) ([]Scored, error)
	// Vector is cosine similarity against embeddings made by model (nodes
	// embedded by another model are not candidates; only cosine > 0 counts).
	// A query of another dimension than the model's vectors is ErrInvalid;
	// a model with no vectors gives no candidates.
	Vector(ctx context.Context, model string, vec []float32, f Filter, limit int) ([]Scored, error)
	// ByPaths returns the nodes attached to any of paths; the score is the
	// number of the given paths the node is attached to (ties: newest
	// update first).
	ByPaths(ctx context.Context, paths []string, f Filter, limit int) ([]Scored, error)
}

// Sessions holds per-session records.
type Sessions interface {
	// AppendTranscript appends a turn's messages, once per turn id
	// (memory.PrepareMessages: content redacted). It returns the stored
	// messages with their ids (increasing per session) and whether they were
	// new; a repeated turn id returns the first append's messages.
	AppendTranscript(ctx context.Context, s SessionRef, turnID string, msgs []Message) ([]Message, bool, error)
	// Messages lists messages with id > afterID, oldest first; limit <= 0: all.
	Messages(ctx context.Context, s SessionRef, afterID int64, limit int) ([]Message, error)
	// LatestSummary returns the last saved summary (ErrNotFound: none).
	LatestSummary(ctx context.Context, s SessionRef) (Summary, error)
	// SaveSummary stores a summary (memory.PrepareSummary) as the latest.
	SaveSummary(ctx context.Context, s SessionRef, sum Summary) error
	// Cursor is the consolidation cursor: 0 until advanced.
	Cursor(ctx context.Context, s SessionRef) (int64, error)
	// AdvanceCursor moves the cursor to `to` if that is forward; it returns the cursor after the call.
	AdvanceCursor(ctx context.Context, s SessionRef, to int64) (int64, error)
	// SetCursor moves the cursor to `to`, back or forward (an operator's
	// repair: `engram consolidate -from N` re-reads from message N); a
	// negative `to` is ErrInvalid.
	SetCursor(ctx context.Context, s SessionRef, to int64) error
	// PutInjection records (replaces) what a turn was answered with
	// (memory.Injection; scores, when given, one per id) for ttl (<= 0:
	// never expires).
	PutInjection(ctx context.Context, s SessionRef, turnID string, in Injection, ttl time.Duration) error
	// GetInjection returns a turn's record (ErrNotFound: none, or expired).
	GetInjection(ctx context.Context, s SessionRef, turnID string) (Injection, error)
	// TakeInjection returns and deletes the record: a second take gets ErrNotFound.
	TakeInjection(ctx context.Context, s SessionRef, turnID string) (Injection, error)
	// BriefOnce sets the session's briefing flag for ttl and reports whether
	// this call set it (true: the session was not briefed).
	BriefOnce(ctx context.Context, s SessionRef, ttl time.Duration) (bool, error)
	// AcquireLease takes the named lease of a session for owner; false when
	// another owner holds an unexpired one. Re-acquiring by the holder renews.
	AcquireLease(ctx context.Context, s SessionRef, name, owner string, ttl time.Duration) (bool, error)
	// RenewLease extends an unexpired lease held by owner; false otherwise.
	RenewLease(ctx context.Context, s SessionRef, name, owner string, ttl time.Duration) (bool, error)
	// ReleaseLease releases a lease held by owner; by anyone else it is a no-op.
	ReleaseLease(ctx context.Context, s SessionRef, name, owner string) error
	// EventProcessed / MarkEventProcessed keep the processed-event records
	// (per consumer and event id) that make redelivery idempotent; a record
	// expires after ttl (<= 0: never).
	EventProcessed(ctx context.Context, p ProjectRef, consumer, eventID string) (bool, error)
	MarkEventProcessed(ctx context.Context, p ProjectRef, consumer, eventID string, ttl time.Duration) error
}

// Store is the whole backend contract. Consumers should depend on the
// narrowest part they use.
type Store interface {
	Nodes
	Graph
	Channels
	Sessions
	Counter // counts.go
	Journal
	Letters // letters.go
	Erasure // erase.go
	Close() error
}
