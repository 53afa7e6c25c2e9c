package memory

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Defaults and constants of the shared rules. Every backend applies them
// through the functions of this file so that all behave identically.
const (
	DefaultConfidence  = 0.5  // a new node without a confidence
	MinConfidence      = 0.05 // floor of wrong-verdict and stale decay
	StandingMinConf    = 0.3  // standing instructions need at least this
	UsedWeightStep     = 0.5  // weight added by a "used" verdict
	UsedConfidenceStep = 0.05 // confidence added by a "used" verdict
	WrongConfidence    = 0.2  // confidence removed by a "wrong" verdict
	MaxStalePerCall    = 60   // MarkStale marks at most this many memories
	StaleCooldown      = 6 * time.Hour
	MaxHops            = 3 // Neighbours walks at most this far
)

// NewID returns a new node id: 24 lower-case hex characters, a 48-bit
// millisecond time prefix (ids sort roughly by creation) and 48 random bits.
func NewID() string {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	if _, err := rand.Read(b[6:]); err != nil {
		panic(fmt.Sprintf("memory: crypto/rand: %v", err)) // never fails on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// invalid collects every problem of an input and returns one ErrInvalid.
type invalid []string

func (v *invalid) add(format string, args ...any) { *v = append(*v, fmt.Sprintf(format, args...)) }

func (v invalid) err(what string) error {
	if len(v) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalid, what, strings.Join(v, "; "))
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func clamp(f, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, f)) }

// NormalisePaths trims, drops empty and de-duplicates paths, keeping order.
func NormalisePaths(paths []string) []string {
	if len(paths) == 0 {
		return nil
	}
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		p = strings.TrimSpace(Redact(p)) // a path may be a URL with a password
		if p == "" || slices.Contains(out, p) {
			continue
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// NormaliseEntities trims, collapses and lower-cases keys (an empty key is
// taken from the name), fills an empty name from the key as written, drops empty keys and duplicates, and keeps at most MaxEntities.
func NormaliseEntities(es []Entity) []Entity {
	if len(es) == 0 {
		return nil
	}
	out := make([]Entity, 0, min(len(es), MaxEntities))
	for _, e := range es {
		// Redacted before the key is made: a key is the lower-cased name,
		// which a case-sensitive rule no longer recognises.
		e.Key, e.Name = Redact(e.Key), Redact(e.Name)
		key := normalise(e.Key)
		if key == "" {
			key = normalise(e.Name)
		}
		if key == "" || slices.ContainsFunc(out, func(o Entity) bool { return o.Key == key }) {
			continue
		}
		name := strings.TrimSpace(e.Name)
		if name == "" {
			name = strings.Join(strings.Fields(e.Key), " ")
		}
		out = append(out, Entity{Key: key, Name: name})
		if len(out) == MaxEntities {
			break
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// PrepareNew validates a node about to be stored and fills its defaults. It
// returns ErrInvalid listing every problem at once. On success the node has an
// id (kept when given), redacted label and body, a digest (computed after
// redaction when empty), normalised paths and entities (at most MaxEntities),
// confidence clamped to 0..1 (0 means DefaultConfidence), weight clamped to
// 1..10, defaults for source (agent), asserted-by (user when the source is the
// user, else inferred), reach (here) and scope (project when a project is
// given, else global), and timestamps (created, updated and valid-from
// default to now; given ones are kept, for imports).
func PrepareNew(n Node, now time.Time) (Node, error) {
	var bad invalid
	n.Label = strings.TrimSpace(redactFor(n.TenantID, n.Label))
	n.Body = strings.TrimSpace(redactFor(n.TenantID, n.Body))
	if n.Label == "" && n.Body == "" {
		bad.add("label and body are both empty")
	}
	if !n.Subkind.Valid() {
		bad.add("unknown subkind %q", n.Subkind)
	}
	if err := CheckTenant(n.TenantID); err != nil {
		bad.add("%v", err)
	}
	if !utf8.ValidString(n.ProjectID) {
		bad.add("project id is not valid UTF-8")
	}
	if n.Scope == "" {
		n.Scope = ScopeProject
		if n.ProjectID == "" {
			n.Scope = ScopeGlobal
		}
	}
	switch n.Scope {
	case ScopeGlobal:
		if n.ProjectID != "" {
			bad.add("a global memory has no project (got %q)", n.ProjectID)
		}
	case ScopeProject:
		if n.ProjectID == "" {
			bad.add("a project memory needs a project id")
		}
	case ScopeSession:
		if n.ProjectID == "" {
			bad.add("a session memory needs a project id")
		}
		if n.SessionID == "" {
			bad.add("a session memory needs a session id")
		}
	default:
		bad.add("unknown scope %q", n.Scope)
	}
	if n.Source == "" {
		n.Source = SourceAgent
	}
	if !n.Source.Valid() {
		bad.add("unknown source %q", n.Source)
	}
	if n.AssertedBy == "" {
		n.AssertedBy = AssertedInferred
		if n.Source == SourceUser {
			n.AssertedBy = AssertedUser
		}
	}
	if !n.AssertedBy.Valid() {
		bad.add("unknown asserted-by %q", n.AssertedBy)
	}
	if n.Reach == "" {
		n.Reach = ReachHere
	}
	if !n.Reach.Valid() {
		bad.add("unknown reach %q", n.Reach)
	}
	if !finite(n.Confidence) {
		bad.add("confidence is not a number")
	}
	if !finite(n.Weight) {
		bad.add("weight is not a number")
	}
	if n.SupersededBy == n.ID && n.ID != "" {
		bad.add("a memory cannot supersede itself")
	}
	if len(n.Embedding) > 0 {
		if n.EmbeddingModel == "" {
			bad.add("an embedding needs the name of its model")
		}
		for _, x := range n.Embedding {
			if !finite(float64(x)) {
				bad.add("the embedding holds a value that is not a finite number")
				break
			}
		}
	}
	if !n.ValidTo.IsZero() && !n.ValidFrom.IsZero() && n.ValidTo.Before(n.ValidFrom) {
		bad.add("valid-to is before valid-from")
	}
	if err := bad.err("node"); err != nil {
		return Node{}, err
	}

	if n.ID == "" {
		n.ID = NewID()
	}
	n.Paths = piiPaths(n.TenantID, NormalisePaths(n.Paths))
	n.Entities = piiEntities(n.TenantID, NormaliseEntities(n.Entities))
	if n.Confidence == 0 {
		n.Confidence = DefaultConfidence
	}
	n.Confidence = clamp(n.Confidence, 0, 1)
	n.Weight = clamp(n.Weight, MinWeight, MaxWeight)
	n.Access, n.Useful, n.Unhelpful = max(n.Access, 0), max(n.Useful, 0), max(n.Unhelpful, 0)
	if n.Digest == "" {
		n.Digest = n.ComputeDigest()
	}
	if len(n.Embedding) == 0 {
		n.Embedding, n.EmbeddingModel = nil, ""
	}
	now = now.UTC()
	if n.CreatedAt.IsZero() {
		n.CreatedAt = now
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = n.CreatedAt
	}
	if n.ValidFrom.IsZero() {
		n.ValidFrom = n.CreatedAt
	}
	return n, nil
}

// Reinforce merges incoming into old, the stored node of the same digest
// (the upsert-match rules): weight +WeightStep (max 10); confidence the higher;
// stale mark cleared; authority, reach and scope only rise; pinned and
// reach-judged stay set once set; paths and entities are merged (entities
// capped); text written by the user is never overwritten by a model (the
// user's text replaces a model's, a model's never replaces anything); a
// missing vector is taken from incoming; an archived node is restored only
// when the user asserts it again. Counters, id, digest, project and created
// stay; updated becomes now.
func Reinforce(old, incoming Node, now time.Time) Node {
	n := old
	n.Weight = math.Min(MaxWeight, math.Max(old.Weight, MinWeight)+WeightStep)
	n.Confidence = math.Max(old.Confidence, clamp(incoming.Confidence, 0, 1))
	n.StaleAt = time.Time{}
	if incoming.AssertedBy.Rank() > old.AssertedBy.Rank() {
		n.AssertedBy = incoming.AssertedBy
	}
	if incoming.Reach.Rank() > old.Reach.Rank() {
		n.Reach = incoming.Reach
	}
	if incoming.Scope.Rank() > old.Scope.Rank() && (incoming.Scope != ScopeGlobal || old.ProjectID == "") {
		n.Scope = incoming.Scope
	}
	n.ReachJudged = old.ReachJudged || incoming.ReachJudged
	n.Pinned = old.Pinned || incoming.Pinned
	if incoming.Source == SourceUser && old.Source != SourceUser {
		n.Source = SourceUser
		if incoming.Label != "" || incoming.Body != "" {
			n.Label, n.Body = incoming.Label, incoming.Body
		}
	}
	n.Paths = piiPaths(n.TenantID, NormalisePaths(append(slices.Clone(old.Paths), incoming.Paths...)))
	n.Entities = piiEntities(n.TenantID, NormaliseEntities(append(slices.Clone(old.Entities), incoming.Entities...)))
	if len(n.Embedding) == 0 && len(incoming.Embedding) > 0 {
		n.Embedding, n.EmbeddingModel = incoming.Embedding, incoming.EmbeddingModel
	}
	if !n.ArchivedAt.IsZero() && incoming.AssertedBy == AssertedUser {
		n.ArchivedAt = time.Time{}
	}
	n.UpdatedAt = now.UTC()
	return n
}

// ApplyPatch applies p to n. It returns ErrInvalid for a bad value and
// ErrRefused when a patch that names no writer (Source nil) would change the
// text of a user-sourced memory. A patch that names its writer takes the
// text over: its Source becomes the node's (an agent's deliberate correction
// through the `memory` tool makes a user's memory agent-sourced). A patch
// never raises the authority (AssertedBy), and a change of text that the
// user did not write (Source not the user) lowers it: an edited text is no
// longer what the user said, so a user-asserted memory becomes asserted by
// the assistant (by an agent's patch; inferred by an unattributed one) and
// a pinned one is unpinned (a person pinned the text they saw). Otherwise
// an agent (following text from a tool's output, say) could rewrite a
// user's rule and keep it under the block's "STANDING INSTRUCTIONS (the
// user stated these ...)". The user restating the rule raises it again
// (Reinforce: authority only rises). Extraction does not
// patch: it upserts, and Reinforce keeps a user's text from a model's. A
// change of label, body, subkind or entities re-derives the digest and
// drops the vector so that the node is re-embedded. The backend must still
// refuse a new digest that another node of the project holds.
func ApplyPatch(n Node, p Patch, now time.Time) (Node, error) {
	var bad invalid
	if p.Source != nil && !p.Source.Valid() {
		bad.add("unknown source %q", *p.Source)
	}
	textChange := (p.Label != nil && strings.TrimSpace(redactFor(n.TenantID, *p.Label)) != n.Label) ||
		(p.Body != nil && strings.TrimSpace(redactFor(n.TenantID, *p.Body)) != n.Body) ||
		(p.Subkind != nil && *p.Subkind != n.Subkind)
	if textChange && n.Source == SourceUser && p.Source == nil {
		return Node{}, fmt.Errorf("%w: memory %s was written by the user; a patch that names no writer cannot change its text", ErrRefused, n.ID)
	}
	old := n
	if p.Label != nil {
		n.Label = strings.TrimSpace(redactFor(n.TenantID, *p.Label))
	}
	if p.Body != nil {
		n.Body = strings.TrimSpace(redactFor(n.TenantID, *p.Body))
	}
	if n.Label == "" && n.Body == "" {
		bad.add("label and body are both empty")
	}
	if p.Subkind != nil {
		if !p.Subkind.Valid() {
			bad.add("unknown subkind %q", *p.Subkind)
		}
		n.Subkind = *p.Subkind
	}
	if p.Confidence != nil {
		if !finite(*p.Confidence) {
			bad.add("confidence is not a number")
		}
		n.Confidence = clamp(*p.Confidence, 0, 1)
	}
	if p.Pinned != nil {
		n.Pinned = *p.Pinned
	}
	if p.Reach != nil {
		if !p.Reach.Valid() {
			bad.add("unknown reach %q", *p.Reach)
		}
		n.Reach = *p.Reach
		n.ReachJudged = true
	}
	if p.Scope != nil {
		switch *p.Scope {
		case ScopeGlobal:
			bad.add("scope cannot change to global (a global memory has no project); store a new one")
		case ScopeProject:
		case ScopeSession:
			if n.SessionID == "" {
				bad.add("a session memory needs a session id")
			}
		default:
			bad.add("unknown scope %q", *p.Scope)
		}
		if old.Scope == ScopeGlobal && *p.Scope != ScopeGlobal {
			bad.add("a global memory cannot be narrowed to a project or session")
		}
		n.Scope = *p.Scope
	}
	if p.Paths != nil {
		n.Paths = piiPaths(n.TenantID, NormalisePaths(*p.Paths))
	}
	if p.Entities != nil {
		n.Entities = piiEntities(n.TenantID, NormaliseEntities(*p.Entities))
	}
	if err := bad.err("patch"); err != nil {
		return Node{}, err
	}
	if textChange && p.Source != nil {
		n.Source = *p.Source
	}
	if textChange && (p.Source == nil || *p.Source != SourceUser) {
		if n.AssertedBy == AssertedUser {
			n.AssertedBy = AssertedInferred
			if p.Source != nil && *p.Source == SourceAgent {
				n.AssertedBy = AssertedAssistant
			}
		}
		n.Pinned = false
	}
	if d := n.ComputeDigest(); d != old.Digest && (textChange || p.Entities != nil) {
		n.Digest = d
		n.Embedding, n.EmbeddingModel = nil, ""
	}
	n.UpdatedAt = now.UTC()
	return n, nil
}

// ApplyVerdict applies one feedback verdict: used -> useful +1, weight +0.5
// (max 10), confidence +0.05 (max 1); wrong -> unhelpful +1, confidence -0.2
// (min 0.05); ignored -> unhelpful +1. An unknown verdict changes nothing.
func ApplyVerdict(n Node, v Verdict, now time.Time) Node {
	_ = now // kept in the signature: verdicts do not move updated-at (recency follows use, not feedback)
	switch v {
	case VerdictUsed:
		n.Useful++
		n.Weight = math.Min(MaxWeight, n.Weight+UsedWeightStep)
		n.Confidence = math.Min(1, n.Confidence+UsedConfidenceStep)
	case VerdictWrong:
		n.Unhelpful++
		n.Confidence = math.Max(MinConfidence, n.Confidence-WrongConfidence)
	case VerdictIgnored:
		n.Unhelpful++
	}
	return n
}

// StaleFactor is what MarkStale multiplies a memory's confidence by:
// observation 0.82, failure 0.92, pattern 0.97; 1 (no decay) for decision,
// preference, entity and topic.
func StaleFactor(s Subkind) float64 {
	switch s {
	case Observation:
		return 0.82
	case Failure:
		return 0.92
	case Pattern:
		return 0.97
	}
	return 1
}

// MarkStale applies the stale rule to one memory attached to a changed path.
// It reports false (and changes nothing) for a memory that is not live, is
// pinned, is user-sourced (source or asserted-by user) or was marked stale
// less than StaleCooldown ago. Otherwise confidence is multiplied by
// StaleFactor (not below MinConfidence, and never raised) and stale-at is set
// to now.
func MarkStale(n Node, now time.Time) (Node, bool) {
	if !n.Live() || n.Pinned || n.Source == SourceUser || n.AssertedBy == AssertedUser {
		return n, false
	}
	if !n.StaleAt.IsZero() && now.Sub(n.StaleAt) < StaleCooldown {
		return n, false
	}
	if f := StaleFactor(n.Subkind); f < 1 {
		n.Confidence = math.Min(n.Confidence, math.Max(MinConfidence, n.Confidence*f))
	}
	n.StaleAt = now.UTC()
	return n, true
}

// CheckSupersede returns ErrRefused when newer may not supersede old: it has
// lower authority or a narrower scope. Superseding a node by itself is
// ErrInvalid.
func CheckSupersede(old, newer Node) error {
	if old.ID == newer.ID {
		return fmt.Errorf("%w: memory %s cannot supersede itself", ErrInvalid, old.ID)
	}
	if err := CheckSameTenant(old, newer); err != nil {
		return err
	}
	if newer.AssertedBy.Rank() < old.AssertedBy.Rank() {
		return fmt.Errorf("%w: %s (asserted by %s) cannot supersede %s (asserted by %s): lower authority",
			ErrRefused, newer.ID, newer.AssertedBy, old.ID, old.AssertedBy)
	}
	if newer.Scope.Rank() < old.Scope.Rank() {
		return fmt.Errorf("%w: %s (scope %s) cannot supersede %s (scope %s): narrower scope",
			ErrRefused, newer.ID, newer.Scope, old.ID, old.Scope)
	}
	return nil
}

// MaxTenantLen bounds a tenant id (bytes), like the event contract's ids.
const MaxTenantLen = 256

// CheckTenant validates a tenant id: "" (the default tenant) or at most
// MaxTenantLen bytes of valid UTF-8, like a project id on the bus.
func CheckTenant(tenant string) error {
	switch {
	case len(tenant) > MaxTenantLen:
		return fmt.Errorf("tenant id longer than %d bytes", MaxTenantLen)
	case !utf8.ValidString(tenant):
		return errors.New("tenant id is not valid UTF-8")
	}
	return nil
}

// CheckSameTenant is the rule for anything that ties two nodes together
// (an edge, a supersede, a revision): both must be of one tenant, else
// ErrInvalid. Backends call it on Link, Supersede, Revise and PutBatch
// edges, so that no edge ever leads from one tenant's graph into another's.
func CheckSameTenant(a, b Node) error {
	if a.TenantID != b.TenantID {
		return fmt.Errorf("%w: memories %s and %s belong to different tenants", ErrInvalid, a.ID, b.ID)
	}
	return nil
}

// ValidAt reports whether n was a valid fact at t: created and valid-from at
// or before t, and not closed at t.
func ValidAt(n *Node, t time.Time) bool {
	if n.CreatedAt.After(t) || n.ValidFrom.After(t) {
		return false
	}
	return n.ValidTo.IsZero() || n.ValidTo.After(t)
}

// Visible applies the Filter rules to n at time now: a node of another
// tenant than f.TenantID is never visible; within the tenant its project is
// f.ProjectID, or it has none (global: global within the tenant), or
// f.CrossProject is on and its reach is anywhere; a session-scoped node of
// another session is hidden;
// archived nodes are hidden unless f.IncludeArchived; superseded nodes and
// closed facts (valid-to at or before now) unless f.IncludeSuperseded; nodes
// under f.MinConfidence and of other subkinds than f.Subkinds are hidden.
func Visible(n *Node, f Filter, now time.Time) bool {
	if n.TenantID != f.TenantID {
		return false
	}
	if !(n.ProjectID == f.ProjectID || n.ProjectID == "" || (f.CrossProject && n.Reach == ReachAnywhere)) {
		return false
	}
	if n.Scope == ScopeSession && (n.SessionID != f.SessionID || n.ProjectID != f.ProjectID) {
		return false
	}
	if !f.IncludeArchived && !n.ArchivedAt.IsZero() {
		return false
	}
	if !f.IncludeSuperseded && (n.SupersededBy != "" || (!n.ValidTo.IsZero() && !n.ValidTo.After(now))) {
		return false
	}
	if n.Confidence < f.MinConfidence {
		return false
	}
	if len(f.Subkinds) > 0 && !slices.Contains(f.Subkinds, n.Subkind) {
		return false
	}
	return true
}

// IsStanding reports whether n is a standing instruction in its own right:
// live, scope project or global, subkind preference, decision or pattern,
// asserted by the user or pinned, confidence >= 0.3. The selection for a
// project also requires the node to be in that project or global (see
// StandingFor).
func IsStanding(n *Node) bool {
	if !n.Live() || (n.Scope != ScopeProject && n.Scope != ScopeGlobal) {
		return false
	}
	if n.Subkind != Preference && n.Subkind != Decision && n.Subkind != Pattern {
		return false
	}
	if n.AssertedBy != AssertedUser && !n.Pinned {
		return false
	}
	return n.Confidence >= StandingMinConf
}

// StandingFor reports whether n is a standing instruction of project p:
// of p's tenant, and of p's project or global (within the tenant).
func StandingFor(n *Node, p ProjectRef) bool {
	return n.TenantID == p.Tenant && (n.ProjectID == p.Project || n.ProjectID == "") && IsStanding(n)
}

func standingRank(s Subkind) int {
	switch s {
	case Preference:
		return 0
	case Decision:
		return 1
	case Pattern:
		return 2
	}
	return 3
}

// CompareStanding orders standing instructions: pinned first, then
// preference, decision, pattern, then the newest update, then id.
func CompareStanding(a, b *Node) int {
	if a.Pinned != b.Pinned {
		if a.Pinned {
			return -1
		}
		return 1
	}
	if ra, rb := standingRank(a.Subkind), standingRank(b.Subkind); ra != rb {
		return ra - rb
	}
	if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// SortStanding sorts nodes in the standing order and cuts them to limit
// (limit <= 0: no cut).
func SortStanding(nodes []Node, limit int) []Node {
	slices.SortFunc(nodes, func(a, b Node) int { return CompareStanding(&a, &b) })
	if limit > 0 && len(nodes) > limit {
		nodes = nodes[:limit]
	}
	return nodes
}

// CompareTimeline orders a timeline: newest update first, then id (descending).
func CompareTimeline(a, b *Node) int {
	if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
		return c
	}
	return strings.Compare(b.ID, a.ID)
}

// PrepareEdge validates a new edge and fills its defaults: weight 1 (clamped
// to 1..10), source agent, valid-from now. A self-link, an empty end or an
// unknown relation is ErrInvalid.
func PrepareEdge(e Edge, now time.Time) (Edge, error) {
	var bad invalid
	if e.Src == "" || e.Dst == "" {
		bad.add("an edge needs both ends")
	} else if e.Src == e.Dst {
		bad.add("a memory cannot link to itself (%s)", e.Src)
	}
	if !e.Relation.Valid() {
		bad.add("unknown relation %q", e.Relation)
	}
	if e.Source == "" {
		e.Source = SourceAgent
	}
	if !e.Source.Valid() {
		bad.add("unknown source %q", e.Source)
	}
	if !finite(e.Weight) {
		bad.add("weight is not a number")
	}
	if err := bad.err("edge"); err != nil {
		return Edge{}, err
	}
	if e.Weight == 0 {
		e.Weight = MinWeight
	}
	e.Weight = clamp(e.Weight, MinWeight, MaxWeight)
	if e.ValidFrom.IsZero() {
		e.ValidFrom = now.UTC()
	}
	return e, nil
}

// Relink is what linking an existing live edge again does: weight
// +WeightStep, at most MaxWeight; a user's link makes the edge user-sourced.
func Relink(old, incoming Edge) Edge {
	old.Weight = math.Min(MaxWeight, old.Weight+WeightStep)
	if incoming.Source == SourceUser {
		old.Source = SourceUser
	}
	return old
}

// CheckHops validates a Neighbours depth (1..MaxHops).
func CheckHops(hops int) error {
	if hops < 1 || hops > MaxHops {
		return fmt.Errorf("%w: hops must be 1..%d, got %d", ErrInvalid, MaxHops, hops)
	}
	return nil
}

// IsNotFound is errors.Is(err, ErrNotFound), for brevity at call sites.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
