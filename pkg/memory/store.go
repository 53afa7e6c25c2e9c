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
// A node is visible when its project is ProjectID, or it has no project
// (global), or CrossProject is on and its reach is anywhere. Session-scoped
// nodes of other sessions than SessionID are hidden. Archived nodes, superseded
// nodes and closed facts (valid-to set) are excluded unless asked for.
type Filter struct {
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
	Source     *Source // who wrote the new text; a model's patch cannot change a user's text
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
	// project. An empty ID is generated; Digest is computed when empty.
	// Backends apply PrepareNew to n, then Reinforce on a match (whatever the
	// match's state: see the package doc).
	Upsert(ctx context.Context, n Node) (UpsertResult, error)
	Get(ctx context.Context, id string) (Node, error)
	// GetMany returns the nodes that exist, in the order of ids.
	GetMany(ctx context.Context, ids []string) ([]Node, error)
	// Update applies ApplyPatch; a new digest held by another node of the
	// project is ErrRefused.
	Update(ctx context.Context, id string, p Patch) (Node, error)
	Archive(ctx context.Context, id string) error
	Restore(ctx context.Context, id string) error
	// Supersede marks oldID superseded by newID and links newID -supersedes-> oldID.
	Supersede(ctx context.Context, oldID, newID string) error
	// Revise closes oldID's validity, stores n as the new fact and links
	// n -supersedes-> old. It returns the new node.
	Revise(ctx context.Context, oldID string, n Node) (Node, error)
	SetEmbedding(ctx context.Context, id, model string, vec []float32) error
	// PendingEmbeddings lists live nodes whose vector is missing or made by another model.
	PendingEmbeddings(ctx context.Context, model string, limit int) ([]Node, error)
	// HasLiveMemory reports cheaply whether project (or global) holds any live node.
	HasLiveMemory(ctx context.Context, projectID string) (bool, error)
	Timeline(ctx context.Context, q TimelineQuery) ([]Node, error)
	// StandingInstructions selects the rules in force for a project.
	StandingInstructions(ctx context.Context, projectID string, limit int) ([]Node, error)
	// ApplyFeedback applies the verdicts on injected memories.
	ApplyFeedback(ctx context.Context, verdicts map[string]Verdict) error
	// MarkStale decays memories of project attached to the changed paths and
	// returns the ids it marked (the rule: memory.MarkStale; at most
	// MaxStalePerCall per call, most recently updated first).
	MarkStale(ctx context.Context, projectID string, paths []string) ([]string, error)
	// Touch records an access (injection, recall) of the nodes.
	Touch(ctx context.Context, ids []string) error
	// PutBatch writes nodes (by id, as given) and edges: import and bulk
	// loading. All or nothing per project.
	PutBatch(ctx context.Context, nodes []Node, edges []Edge) error
	// Scan calls fn for every node (vectors included) and every edge.
	Scan(ctx context.Context, node func(Node) error, edge func(Edge) error) error
}

// Graph is the edge side of the contract.
type Graph interface {
	// Link creates the edge, or adds WeightStep to an existing live one. A
	// self-link is ErrInvalid.
	Link(ctx context.Context, e Edge) (Edge, error)
	// Unlink closes the edge (valid-to); it is kept for as-of reads.
	Unlink(ctx context.Context, src, dst string, rel Relation) error
	// Edges lists the live edges that touch id, in both directions.
	Edges(ctx context.Context, id string) ([]Edge, error)
	// Neighbours walks live edges up to hops (1..3) and returns the visible
	// nodes reached, nearest first.
	Neighbours(ctx context.Context, id string, hops int, f Filter) ([]Neighbour, error)
}

// Channels are the retrieval channels, each returning ranked candidates.
type Channels interface {
	// Lexical is BM25 over label, body, paths and entity names; terms are
	// OR-ed (see Terms), prefix-matched where the backend can.
	Lexical(ctx context.Context, terms []string, f Filter, limit int) ([]Scored, error)
	// Vector is cosine similarity against embeddings made by model.
	Vector(ctx context.Context, model string, vec []float32, f Filter, limit int) ([]Scored, error)
	// ByPaths returns the nodes attached to any of paths.
	ByPaths(ctx context.Context, paths []string, f Filter, limit int) ([]Scored, error)
}

// Sessions holds per-session records.
type Sessions interface {
	// AppendTranscript appends a turn's messages, once per turn id. It
	// returns the stored messages with their ids and whether they were new.
	AppendTranscript(ctx context.Context, s SessionRef, turnID string, msgs []Message) ([]Message, bool, error)
	// Messages lists messages with id > afterID, oldest first; limit <= 0: all.
	Messages(ctx context.Context, s SessionRef, afterID int64, limit int) ([]Message, error)
	LatestSummary(ctx context.Context, s SessionRef) (Summary, error)
	SaveSummary(ctx context.Context, s SessionRef, sum Summary) error
	Cursor(ctx context.Context, s SessionRef) (int64, error)
	// AdvanceCursor moves the cursor to `to` if that is forward; it returns the cursor after the call.
	AdvanceCursor(ctx context.Context, s SessionRef, to int64) (int64, error)
	PutInjection(ctx context.Context, s SessionRef, turnID string, ids []string) error
	// TakeInjection returns and deletes the record: a second take gets ErrNotFound.
	TakeInjection(ctx context.Context, s SessionRef, turnID string) ([]string, error)
	// BriefOnce sets the session's briefing flag for ttl and reports whether
	// this call set it (true: the session was not briefed).
	BriefOnce(ctx context.Context, s SessionRef, ttl time.Duration) (bool, error)
	// AcquireLease takes the named lease of a session for owner; false when
	// another owner holds an unexpired one. Re-acquiring by the holder renews.
	AcquireLease(ctx context.Context, s SessionRef, name, owner string, ttl time.Duration) (bool, error)
	RenewLease(ctx context.Context, s SessionRef, name, owner string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, s SessionRef, name, owner string) error
	// EventProcessed / MarkEventProcessed keep the processed-event records
	// (per consumer and event id) that make redelivery idempotent.
	EventProcessed(ctx context.Context, project, consumer, eventID string) (bool, error)
	MarkEventProcessed(ctx context.Context, project, consumer, eventID string, ttl time.Duration) error
}

// Store is the whole backend contract. Consumers should depend on the
// narrowest part they use.
type Store interface {
	Nodes
	Graph
	Channels
	Sessions
	Close() error
}
