package sqlite

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// gate is what memory.Visible reads of a head, packed: the vector and
// lexical channels judge thousands of nodes per query, and comparing
// interned numbers instead of id strings (and not copying the Filter per
// node) made the filter about half of a vector search's CPU go away.
// TestGateMatchesVisible holds it to memory.Visible.
type gate struct {
	project, session uint32 // numbers in the string table (index.strs, as the head's); 0 is ""
	tenant           uint32 // a number too; 0 is the default tenant
	flags            uint8
	confidence       float64
	validTo          int64     // Unix nanoseconds; 0: open (not a time.Time: the gates hold no pointer the collector would scan)
	key              [2]uint64 // the id's order key (idKey)
}

// idKey is the first 16 bytes of id, big-endian, zero-padded: comparing
// keys orders ids as strings do, except that equal keys need the ids
// themselves. The lexical channel breaks its many score ties on the id;
// the key sits in the gate the filter reads anyway, where the id string is
// three dependent reads away.
func idKey(id string) [2]uint64 {
	var b [16]byte
	copy(b[:], id)
	return [2]uint64{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// idCmp orders the nodes at rids a and b by id (x.mu held), from their
// gates' keys, reading the ids (heads) only when the keys are equal; a
// node without a head (not expected: a removed node is no candidate)
// orders before those with one, so that the tie check goes on to its
// filter, which rejects it.
// The lexical channel compares its thousands of ties this way: a gate is
// one read, a head a second, from another array.
func (x *index) idCmp(a, b uint32) int {
	ka, kb := &x.gates[a].key, &x.gates[b].key
	if c := cmp.Compare(ka[0], kb[0]); c != 0 {
		return c
	}
	if c := cmp.Compare(ka[1], kb[1]); c != 0 {
		return c
	}
	ha, hb := x.heads[a], x.heads[b]
	if ha == nil || hb == nil {
		return cmp.Compare(b2i(ha != nil), b2i(hb != nil))
	}
	return strings.Compare(ha.id, hb.id)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

const (
	gateSession    uint8 = 1 << iota // scope session
	gateAnywhere                     // reach anywhere
	gateArchived                     // archived
	gateSuperseded                   // superseded by another node
	// gateLive: the gate of a stored node (setGate). A node's gate and
	// head are set together and cleared together (erase); the filter
	// tells a stored node by its gate alone, not by a read of its head
	// in another array (a zero gate, a removed node's, would otherwise
	// pass as the default tenant's global memory).
	gateLive
)

// noID stands for a filter id that no head carries.
const noID = ^uint32(0)

// idOf is the number of s in the string table: 0 for "", noID when no
// head or gate holds it.
func (x *index) idOf(s string) uint32 {
	if n, ok := x.strs.lookup(s); ok {
		return n
	}
	return noID
}

// setGate records the gate of h, the node at rid, whose head hd holds
// its project, session and tenant numbers (x.mu write-held).
func (x *index) setGate(rid uint32, h *memory.Node, hd *head) {
	for int(rid) >= len(x.gates) {
		x.gates = append(x.gates, gate{})
	}
	g := gate{project: hd.project, session: hd.session, tenant: hd.tenant,
		confidence: h.Confidence, validTo: unixNanoOr0(h.ValidTo),
		key: idKey(h.ID), flags: gateLive}
	if h.Scope == memory.ScopeSession {
		g.flags |= gateSession
	}
	if h.Reach == memory.ReachAnywhere {
		g.flags |= gateAnywhere
	}
	if !h.ArchivedAt.IsZero() {
		g.flags |= gateArchived
	}
	if h.SupersededBy != "" {
		g.flags |= gateSuperseded
	}
	x.gates[rid] = g
}

// unixNanoOr0 is t in Unix nanoseconds, 0 for the zero time. A time
// outside what an int64 of nanoseconds holds (before 1678, after 2262:
// "valid until 9999-12-31") is clamped to its ends, which order against
// any "now" as the time itself does; the epoch itself becomes -1.
func unixNanoOr0(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.Before(minNano):
		return math.MinInt64
	case t.After(maxNano):
		return math.MaxInt64
	}
	if v := t.UnixNano(); v != 0 {
		return v
	}
	return -1
}

var (
	minNano = time.Unix(0, math.MinInt64)
	maxNano = time.Unix(0, math.MaxInt64)
)

// gateFilter is a memory.Filter compiled against the index's interned ids.
type gateFilter struct {
	f                        *memory.Filter
	project, session, tenant uint32
	now                      time.Time
}

// compile prepares f for pass (x.mu held).
func (x *index) compile(f *memory.Filter, now time.Time) gateFilter {
	return gateFilter{f: f, project: x.idOf(f.ProjectID), session: x.idOf(f.SessionID), tenant: x.idOf(f.TenantID), now: now}
}

// pass applies memory.Visible's rules to the node at rid (x.mu held).
func (x *index) pass(rid uint32, gf *gateFilter) bool {
	if int(rid) >= len(x.gates) || x.gates[rid].flags&gateLive == 0 {
		return false
	}
	g := &x.gates[rid]
	f := gf.f
	if g.tenant != gf.tenant {
		return false
	}
	if g.project != gf.project && g.project != 0 && (!f.CrossProject || g.flags&gateAnywhere == 0) {
		return false
	}
	if g.flags&gateSession != 0 && (g.session != gf.session || g.project != gf.project) {
		return false
	}
	if !f.IncludeArchived && g.flags&gateArchived != 0 {
		return false
	}
	if !f.IncludeSuperseded && (g.flags&gateSuperseded != 0 || (g.validTo != 0 && g.validTo <= gf.now.UnixNano())) {
		return false
	}
	if g.confidence < f.MinConfidence {
		return false
	}
	if len(f.Subkinds) > 0 && !slices.Contains(f.Subkinds, memory.Subkind(x.strs.str(x.heads[rid].subkind))) {
		return false
	}
	return true
}
