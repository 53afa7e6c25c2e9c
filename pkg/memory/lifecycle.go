package memory

import (
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// DefaultChannelLimit is what a retrieval channel, a timeline or a pending
// embeddings listing returns at most when asked for limit <= 0.
const DefaultChannelLimit = 60

// Limit returns limit, or DefaultChannelLimit when limit <= 0.
func Limit(limit int) int {
	if limit <= 0 {
		return DefaultChannelLimit
	}
	return limit
}

// Archive marks n archived at now ("forget"); an archived node keeps its
// first archive time.
func Archive(n Node, now time.Time) Node {
	if n.ArchivedAt.IsZero() {
		n.ArchivedAt = now.UTC()
		n.UpdatedAt = now.UTC()
	}
	return n
}

// Restore brings n back to live: the archive mark is cleared, and a
// superseded or closed (revised) node is reopened (superseded-by and
// valid-to cleared). The supersedes edge into it is the caller's to
// unlink (the `memory` tool's restore does).
func Restore(n Node, now time.Time) Node {
	if !n.ArchivedAt.IsZero() || n.SupersededBy != "" || !n.ValidTo.IsZero() {
		n.ArchivedAt, n.SupersededBy, n.ValidTo = time.Time{}, "", time.Time{}
		n.UpdatedAt = now.UTC()
	}
	return n
}

// Close records that old was superseded by newID at now: superseded-by is
// set and its validity closed (kept when already closed), so that as-of reads
// see it until now. Supersede and Revise both use it; the backend also links
// newID -supersedes-> old.
func Close(old Node, newID string, now time.Time) Node {
	old.SupersededBy = newID
	if old.ValidTo.IsZero() {
		old.ValidTo = now.UTC()
	}
	old.UpdatedAt = now.UTC()
	return old
}

// PrepareRevision prepares n, the revision of old: a new node that leaves
// subkind, scope (with project and session), reach, paths and entities empty
// inherits them from old (authority and source are never inherited). It
// returns ErrInvalid for an invalid node or one with old's digest (a revision
// must change something) and ErrRefused when n may not supersede old
// (CheckSupersede). The backend then upserts the result (so a revision to an
// existing memory reinforces it), applies Close to old and links.
func PrepareRevision(old, n Node, now time.Time) (Node, error) {
	if n.Subkind == "" {
		n.Subkind = old.Subkind
	}
	// A revision stays in its tenant, whatever it names.
	n.TenantID = old.TenantID
	if n.Scope == "" && n.ProjectID == "" {
		n.Scope, n.ProjectID = old.Scope, old.ProjectID
		if n.SessionID == "" {
			n.SessionID = old.SessionID
		}
	}
	if n.Reach == "" {
		n.Reach, n.ReachJudged = old.Reach, old.ReachJudged
	}
	if n.Paths == nil {
		n.Paths = slices.Clone(old.Paths)
	}
	if n.Entities == nil {
		n.Entities = slices.Clone(old.Entities)
	}
	n.ID = ""
	n.Digest = ""
	n.CreatedAt, n.UpdatedAt, n.ValidFrom, n.ValidTo = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	n.ArchivedAt, n.SupersededBy, n.StaleAt = time.Time{}, "", time.Time{}
	p, err := PrepareNew(n, now)
	if err != nil {
		return Node{}, err
	}
	if p.Digest == old.Digest && p.ProjectID == old.ProjectID && p.TenantID == old.TenantID {
		return Node{}, fmt.Errorf("%w: the revision of %s does not change it", ErrInvalid, old.ID)
	}
	if err := CheckSupersede(old, p); err != nil {
		return Node{}, err
	}
	return p, nil
}

// PrepareMessages validates a turn's transcript messages and fills them in:
// the turn id, created-at (now when zero), redacted content and tool-call
// arguments. It returns ErrInvalid listing every problem. Ids are assigned by
// the backend. It is PrepareTranscript of the default tenant.
func PrepareMessages(turnID string, msgs []Message, now time.Time) ([]Message, error) {
	return PrepareTranscript("", turnID, msgs, now)
}

// PrepareTranscript is PrepareMessages for a session of tenant: personal
// data is redacted too when the tenant asked for it (SetPIIRedaction).
func PrepareTranscript(tenant, turnID string, msgs []Message, now time.Time) ([]Message, error) {
	var bad invalid
	if turnID == "" {
		bad.add("a transcript append needs a turn id")
	}
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case RoleUser, RoleAssistant:
		case RoleTool:
			if m.ToolStatus != "" && m.ToolStatus != ToolOK && m.ToolStatus != ToolFailed {
				bad.add("message %d: unknown tool status %q", i, m.ToolStatus)
			}
		default:
			bad.add("message %d: unknown role %q", i, m.Role)
		}
		if m.TokensIn < 0 || m.TokensOut < 0 {
			bad.add("message %d: negative token count", i)
		}
		m.ID = 0
		m.TurnID = turnID
		m.Content = redactFor(tenant, m.Content)
		if len(m.ToolCalls) > 0 {
			calls := slices.Clone(m.ToolCalls)
			for j := range calls {
				calls[j].Arguments = redactFor(tenant, calls[j].Arguments)
			}
			m.ToolCalls = calls
		}
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now.UTC()
		}
		out[i] = m
	}
	if err := bad.err("transcript"); err != nil {
		return nil, err
	}
	return out, nil
}

// PrepareSummary validates a summary and fills it in: redacted content,
// created-at now when zero. It is PrepareSummaryOf the default tenant.
func PrepareSummary(s Summary, now time.Time) (Summary, error) {
	return PrepareSummaryOf("", s, now)
}

// PrepareSummaryOf is PrepareSummary for a session of tenant: personal data
// is redacted too when the tenant asked for it (SetPIIRedaction).
func PrepareSummaryOf(tenant string, s Summary, now time.Time) (Summary, error) {
	var bad invalid
	if s.Content == "" {
		bad.add("summary content is empty")
	}
	if s.UpTo < 0 {
		bad.add("summary up-to is negative")
	}
	if s.TokensBefore < 0 || s.TokensAfter < 0 {
		bad.add("summary token counts are negative")
	}
	if err := bad.err("summary"); err != nil {
		return Summary{}, err
	}
	s.Content = redactFor(tenant, s.Content)
	if s.CreatedAt.IsZero() {
		s.CreatedAt = now.UTC()
	}
	return s, nil
}

// CheckTTL validates the time-to-live of a lease or briefing flag.
func CheckTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: ttl must be positive, got %v", ErrInvalid, ttl)
	}
	return nil
}

// CheckSession validates a session reference.
func CheckSession(s SessionRef) error {
	var bad invalid
	if err := CheckTenant(s.Tenant); err != nil {
		bad.add("%v", err)
	}
	if s.Project == "" {
		bad.add("empty project")
	} else if !utf8.ValidString(s.Project) {
		bad.add("project id is not valid UTF-8")
	}
	if s.Session == "" {
		bad.add("empty session")
	}
	return bad.err("session")
}

// AsOfVisible is the timeline rule for an as-of read at t: the Filter rules
// with closed and superseded facts included, and the fact valid at t.
func AsOfVisible(n *Node, f Filter, t time.Time) bool {
	f.IncludeSuperseded = true
	return Visible(n, f, t) && ValidAt(n, t)
}
