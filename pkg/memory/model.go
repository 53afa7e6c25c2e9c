package memory

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Subkind is what kind of memory a node holds.
type Subkind string

// The subkinds of a node.
const (
	Decision    Subkind = "decision"
	Pattern     Subkind = "pattern"
	Failure     Subkind = "failure"
	Preference  Subkind = "preference"
	Observation Subkind = "observation"
	EntityKind  Subkind = "entity"
	Topic       Subkind = "topic"
)

// Subkinds lists every valid subkind.
var Subkinds = []Subkind{Decision, Pattern, Failure, Preference, Observation, EntityKind, Topic}

// Valid reports whether s is a known subkind.
func (s Subkind) Valid() bool {
	for _, k := range Subkinds {
		if s == k {
			return true
		}
	}
	return false
}

// Scope says how widely a memory applies.
type Scope string

// The scopes, narrowest first.
const (
	ScopeSession Scope = "session"
	ScopeProject Scope = "project"
	ScopeGlobal  Scope = "global"
)

// Rank orders scopes: session 0 < project 1 < global 2; unknown -1.
func (s Scope) Rank() int {
	switch s {
	case ScopeSession:
		return 0
	case ScopeProject:
		return 1
	case ScopeGlobal:
		return 2
	}
	return -1
}

// Valid reports whether s is a known scope.
func (s Scope) Valid() bool { return s.Rank() >= 0 }

// Source says who wrote the text of a memory: the user (never overwritten by
// extraction, see Reinforce) or an agent/model (also an agent's deliberate
// correction of a user's memory through the `memory` tool, ApplyPatch).
type Source string

// The sources.
const (
	SourceAgent Source = "agent"
	SourceUser  Source = "user"
)

// Valid reports whether s is a known source.
func (s Source) Valid() bool { return s == SourceAgent || s == SourceUser }

// Authority says who asserted a memory. User > assistant > inferred.
type Authority string

// The authorities, weakest first.
const (
	AssertedInferred  Authority = "inferred"
	AssertedAssistant Authority = "assistant"
	AssertedUser      Authority = "user"
)

// Rank orders authorities: inferred 0 < assistant 1 < user 2; unknown -1.
func (a Authority) Rank() int {
	switch a {
	case AssertedInferred:
		return 0
	case AssertedAssistant:
		return 1
	case AssertedUser:
		return 2
	}
	return -1
}

// Valid reports whether a is a known authority.
func (a Authority) Valid() bool { return a.Rank() >= 0 }

// Reach says whether a memory may be recalled in other projects.
type Reach string

// The reaches, narrowest first.
const (
	ReachHere     Reach = "here"
	ReachAnywhere Reach = "anywhere"
)

// Rank orders reaches: here 0 < anywhere 1; unknown -1.
func (r Reach) Rank() int {
	switch r {
	case ReachHere:
		return 0
	case ReachAnywhere:
		return 1
	}
	return -1
}

// Valid reports whether r is a known reach.
func (r Reach) Valid() bool { return r.Rank() >= 0 }

// Relation is the type of an edge.
type Relation string

// The relations.
const (
	Supersedes    Relation = "supersedes"
	Contradicts   Relation = "contradicts"
	Generalizes   Relation = "generalizes"
	About         Relation = "about"
	RelatesTo     Relation = "relates_to"
	CausedBy      Relation = "caused_by"
	InterestedIn  Relation = "interested_in"
	InvolvedIn    Relation = "involved_in"
	PartOf        Relation = "part_of"
	RelatedTo     Relation = "related_to"
	MentionedWith Relation = "mentioned_with"
)

// Relations lists every valid relation.
var Relations = []Relation{Supersedes, Contradicts, Generalizes, About, RelatesTo, CausedBy,
	InterestedIn, InvolvedIn, PartOf, RelatedTo, MentionedWith}

// Valid reports whether r is a known relation.
func (r Relation) Valid() bool {
	for _, k := range Relations {
		if r == k {
			return true
		}
	}
	return false
}

// Entity is a named thing a memory mentions. Key is the stable identity
// (lower-case), Name the display form.
type Entity struct {
	Key  string `json:"key"`
	Name string `json:"name"`
}

// Limits of the model.
const (
	MaxEntities  = 8
	MaxWeight    = 10.0
	MinWeight    = 1.0
	WeightStep   = 0.25 // added to a node on reinforcement and to an edge on re-link
	DigestLength = 20
)

// Node is one memory.
type Node struct {
	ID          string    `json:"id"`
	Subkind     Subkind   `json:"subkind"`
	Scope       Scope     `json:"scope"`
	TenantID    string    `json:"tenant_id,omitempty"` // empty: the default tenant
	ProjectID   string    `json:"project_id"`          // empty for global memories (global within the tenant)
	SessionID   string    `json:"session_id,omitempty"`
	Label       string    `json:"label"`
	Body        string    `json:"body"`
	Digest      string    `json:"digest"`
	Confidence  float64   `json:"confidence"` // 0..1
	Weight      float64   `json:"weight"`     // 1..10
	Access      int       `json:"access_count"`
	Useful      int       `json:"useful_count"`
	Unhelpful   int       `json:"unhelpful_count"`
	Source      Source    `json:"source"`
	AssertedBy  Authority `json:"asserted_by"`
	Reach       Reach     `json:"reach"`
	ReachJudged bool      `json:"reach_judged"`
	Pinned      bool      `json:"pinned"`

	ArchivedAt   time.Time `json:"archived_at,omitzero"`
	SupersededBy string    `json:"superseded_by,omitempty"`
	StaleAt      time.Time `json:"stale_at,omitzero"`
	ValidFrom    time.Time `json:"valid_from,omitzero"`
	ValidTo      time.Time `json:"valid_to,omitzero"` // zero: still valid

	Paths    []string `json:"paths,omitempty"`
	Entities []Entity `json:"entities,omitempty"`

	CreatedAt  time.Time `json:"created_at,omitzero"`
	UpdatedAt  time.Time `json:"updated_at,omitzero"`
	AccessedAt time.Time `json:"accessed_at,omitzero"`

	Embedding      []float32 `json:"-"`
	EmbeddingModel string    `json:"embedding_model,omitempty"`
}

// Live reports whether the node is neither archived, superseded nor closed.
func (n *Node) Live() bool {
	return n.ArchivedAt.IsZero() && n.SupersededBy == "" && n.ValidTo.IsZero()
}

// Stale reports whether the code the memory is attached to changed since.
func (n *Node) Stale() bool { return !n.StaleAt.IsZero() }

// Edge is a typed, weighted link between two nodes.
type Edge struct {
	Src       string    `json:"src"`
	Dst       string    `json:"dst"`
	Relation  Relation  `json:"relation"`
	Weight    float64   `json:"weight"`
	Source    Source    `json:"source,omitempty"`
	ValidFrom time.Time `json:"valid_from,omitzero"`
	ValidTo   time.Time `json:"valid_to,omitzero"` // zero: still valid
}

// Live reports whether the edge is still valid (not unlinked).
func (e *Edge) Live() bool { return e.ValidTo.IsZero() }

// Digest is the identity of a memory: the first 20 hex characters of SHA-256
// over subkind + ":" + the lower-cased, whitespace-collapsed label and body.
// When entityKey is not empty it replaces label and body.
func Digest(subkind Subkind, label, body, entityKey string) string {
	var text string
	if entityKey != "" {
		text = normalise(entityKey)
	} else {
		text = normalise(label + " " + body)
	}
	sum := sha256.Sum256([]byte(string(subkind) + ":" + text))
	return hex.EncodeToString(sum[:])[:DigestLength]
}

func normalise(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}

// EntityKey returns the entity key that identifies an entity or topic node,
// or "" for other subkinds: the first entity's key.
func (n *Node) EntityKey() string {
	if (n.Subkind == EntityKind || n.Subkind == Topic) && len(n.Entities) > 0 {
		return n.Entities[0].Key
	}
	return ""
}

// ComputeDigest derives n's digest from its content.
func (n *Node) ComputeDigest() string {
	return Digest(n.Subkind, n.Label, n.Body, n.EntityKey())
}

// Verdict is the episodic feedback on an injected memory.
type Verdict string

// The verdicts.
const (
	VerdictUsed    Verdict = "used"
	VerdictWrong   Verdict = "wrong"
	VerdictIgnored Verdict = "ignored"
)

// Valid reports whether v is a known verdict.
func (v Verdict) Valid() bool {
	return v == VerdictUsed || v == VerdictWrong || v == VerdictIgnored
}

// Role of a transcript message.
type Role string

// The roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ToolStatus is the outcome of a tool call.
type ToolStatus string

// The tool statuses.
const (
	ToolOK     ToolStatus = "ok"
	ToolFailed ToolStatus = "failed"
)

// ToolCall is a call an assistant message made.
type ToolCall struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments,omitempty"` // JSON text
}

// Message is one transcript message of a session.
type Message struct {
	ID         int64      `json:"id"` // assigned by the store, increasing per session
	TurnID     string     `json:"turn_id"`
	Role       Role       `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolName   string     `json:"tool_name,omitempty"`    // for role tool
	ToolCallID string     `json:"tool_call_id,omitempty"` // for role tool
	ToolStatus ToolStatus `json:"tool_status,omitempty"`  // for role tool
	TokensIn   int        `json:"tokens_in,omitempty"`
	TokensOut  int        `json:"tokens_out,omitempty"`
	CreatedAt  time.Time  `json:"created_at,omitzero"`
}

// Summary is a structured summary of a session's older messages.
type Summary struct {
	Content   string    `json:"content"`
	UpTo      int64     `json:"up_to"` // the last message id it covers
	CreatedAt time.Time `json:"created_at,omitzero"`
	// TokensBefore and TokensAfter are the conversation's context size when
	// it was compacted and its estimate with the summary (the compactor's
	// compaction_done); 0: unknown.
	TokensBefore int64 `json:"tokens_before,omitempty"`
	TokensAfter  int64 `json:"tokens_after,omitempty"`
}

// Injection is what the injector answered one turn with: the block as the
// platform got it (Text, with the first-turn directive when Briefing) and
// the memories it carried (IDs, standing first, with their Scores index for
// index). The extractor judges IDs at turn end; a redelivered turn_started
// is answered with the same block, so the platform, ENGRAM_OUT and the
// extractor agree on one block per turn. A turn answered without a block
// has an empty record.
type Injection struct {
	IDs      []string  `json:"ids"`
	Scores   []float64 `json:"scores,omitempty"`
	Text     string    `json:"text,omitempty"`
	Briefing bool      `json:"briefing,omitempty"`
	// Why is why each line is there (BlockWhy): the admitting rule and the
	// channels' scores per line, and the candidates the policy cut. Ids
	// and numbers only; nil in a record written before it was kept.
	Why *BlockWhy `json:"why,omitempty"`
}

// EncodeInjection is the stored form of an injection record (JSON; the
// backends store it as it is).
func EncodeInjection(in Injection) ([]byte, error) {
	if in.IDs == nil {
		in.IDs = []string{}
	}
	if len(in.Scores) != 0 && len(in.Scores) != len(in.IDs) {
		return nil, fmt.Errorf("%w: an injection record has %d scores for %d ids", ErrInvalid, len(in.Scores), len(in.IDs))
	}
	return json.Marshal(in)
}

// DecodeInjection reads a stored injection record. A record written before
// records held the block (a JSON array of ids) decodes to its IDs alone.
func DecodeInjection(doc []byte) (Injection, error) {
	var in Injection
	if d := bytes.TrimSpace(doc); len(d) > 0 && d[0] == '[' {
		err := json.Unmarshal(d, &in.IDs)
		return in, err
	}
	err := json.Unmarshal(doc, &in)
	return in, err
}

// ProjectRef names a project of a tenant: where a node, a processed-event
// record or a pass journal lives, and what the per-project reads
// (StandingInstructions, HasLiveMemory, Count, ...) look at. Tenant "" is
// the default tenant (every record written before tenants existed is
// there); Project "" is the tenant's global space. Two tenants never see
// each other's records, whatever their project ids.
type ProjectRef struct {
	Tenant  string
	Project string
}

func (p ProjectRef) String() string {
	if p.Tenant == "" {
		return p.Project
	}
	return fmt.Sprintf("%s:%s", p.Tenant, p.Project)
}

// ProjectOf returns where n lives: its tenant and project.
func ProjectOf(n *Node) ProjectRef { return ProjectRef{Tenant: n.TenantID, Project: n.ProjectID} }

// SessionRef names a session of a tenant's project. Every per-session
// record lives under its project so that a Redis Cluster keeps a project
// on one slot.
type SessionRef struct {
	Tenant  string // "" : the default tenant
	Project string
	Session string
}

// ProjectRef returns the session's project.
func (s SessionRef) ProjectRef() ProjectRef { return ProjectRef{Tenant: s.Tenant, Project: s.Project} }

func (s SessionRef) String() string {
	if s.Tenant == "" {
		return fmt.Sprintf("%s/%s", s.Project, s.Session)
	}
	return fmt.Sprintf("%s:%s/%s", s.Tenant, s.Project, s.Session)
}
