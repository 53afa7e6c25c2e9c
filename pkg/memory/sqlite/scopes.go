package sqlite

import (
	"math"
	"slices"

	"github.com/engram-memory/engram/pkg/memory"
)

// scopeSets are the rids each filter can see, kept by the writes: per
// tenant's project (Project "": the tenant's global memories) the rids of
// its nodes, and per tenant the rids of its nodes of reach anywhere in a
// project (what a CrossProject filter sees of the tenant's other
// projects). Each list is sorted. A lexical search of a project that holds
// a small part of the store scores those documents only (searchVisible):
// the postings are one index for the whole store, so without them a turn
// of a project of a thousand memories in a store of a million read the
// store's lists and judged every document they hold with the filter (38.7
// ms of CPU a turn at 1,000 projects of 1,000 memories, against 6.8 ms
// for the million in one project; see docs/benchmarks.md, stop 45).
type scopeSets struct {
	byProject map[memory.ProjectRef][]uint32
	anywhere  map[string][]uint32 // by tenant
	// While the store loads (project by project, so a tenant's anywhere
	// rids come out of order), an anywhere rid below its list's last is
	// appended and the list marked unsorted, sorted once the load ends
	// (settle): inserted in place, 400,000 of them took 9 s. A filter
	// whose list is unsorted is searched over the whole index.
	loading  bool
	unsorted map[string]bool // tenants whose anywhere list is unsorted
}

// beginLoad and settle bracket the store's load (see loading).
func (s *scopeSets) beginLoad() { s.loading = true }

func (s *scopeSets) settle() {
	s.loading = false
	for t := range s.unsorted {
		l := s.anywhere[t]
		slices.Sort(l)
		s.anywhere[t] = slices.Compact(l)
	}
	s.unsorted = nil
}

// scopeOf is where a node's rid is listed: its tenant's project and whether
// it is of reach anywhere in a project.
type scopeOf struct {
	ref      memory.ProjectRef
	anywhere bool
}

// scopeOfHead is h's scope (x.mu held; h not nil).
func (x *index) scopeOfHead(h *head, g *gate) scopeOf {
	ref := x.projectOf(h)
	return scopeOf{ref: ref, anywhere: ref.Project != "" && g.flags&gateAnywhere != 0}
}

// moveScope lists rid under its new scope and no longer under its old one
// (either may be absent: a new node, an erased one).
func (s *scopeSets) moveScope(rid uint32, old, now *scopeOf) {
	if old != nil && now != nil && *old == *now {
		return
	}
	if s.byProject == nil {
		s.byProject = map[memory.ProjectRef][]uint32{}
		s.anywhere = map[string][]uint32{}
	}
	if old != nil {
		if l := removeRid(s.byProject[old.ref], rid); len(l) > 0 {
			s.byProject[old.ref] = l
		} else {
			delete(s.byProject, old.ref)
		}
		if old.anywhere {
			l := s.anywhere[old.ref.Tenant]
			if s.unsorted[old.ref.Tenant] {
				if i := slices.Index(l, rid); i >= 0 {
					l = slices.Delete(l, i, i+1)
				}
			} else {
				l = removeRid(l, rid)
			}
			if len(l) > 0 {
				s.anywhere[old.ref.Tenant] = l
			} else {
				delete(s.anywhere, old.ref.Tenant)
				delete(s.unsorted, old.ref.Tenant)
			}
		}
	}
	if now != nil {
		s.byProject[now.ref] = insertRid(s.byProject[now.ref], rid)
		if now.anywhere {
			t := now.ref.Tenant
			l := s.anywhere[t]
			switch {
			case s.unsorted[t]:
				s.anywhere[t] = append(l, rid) // sorted and made unique by settle
			case s.loading && len(l) > 0 && l[len(l)-1] > rid:
				if s.unsorted == nil {
					s.unsorted = map[string]bool{}
				}
				s.unsorted[t] = true
				s.anywhere[t] = append(l, rid)
			default:
				s.anywhere[t] = insertRid(l, rid)
			}
		}
	}
}

// insertRid adds rid to the sorted list l (new rids come last: an append).
func insertRid(l []uint32, rid uint32) []uint32 {
	if n := len(l); n == 0 || l[n-1] < rid {
		return append(l, rid)
	}
	i, found := slices.BinarySearch(l, rid)
	if found {
		return l
	}
	return slices.Insert(l, i, rid)
}

// removeRid drops rid from the sorted list l.
func removeRid(l []uint32, rid uint32) []uint32 {
	i, found := slices.BinarySearch(l, rid)
	if !found {
		return l
	}
	return slices.Delete(l, i, i+1)
}

// visibleSize is how many rids the scope sets list for f: a bound of the
// documents f can accept (the own project's and the global memories all
// count, whatever else the filter asks).
func (s *scopeSets) visibleSize(f *memory.Filter) int {
	own := memory.ProjectRef{Tenant: f.TenantID, Project: f.ProjectID}
	n := len(s.byProject[own])
	if f.ProjectID != "" {
		n += len(s.byProject[memory.ProjectRef{Tenant: f.TenantID}])
	}
	if f.CrossProject {
		if s.unsorted[f.TenantID] {
			return math.MaxInt // being loaded (see loading)
		}
		n += len(s.anywhere[f.TenantID])
	}
	return n
}

// visible returns the rids f can see (in into's array when they are one
// project's), sorted, each once: a superset of what f accepts (memory.Visible's other rules are the
// caller's).
func (s *scopeSets) visible(f *memory.Filter, into []uint32) []uint32 {
	own := memory.ProjectRef{Tenant: f.TenantID, Project: f.ProjectID}
	into = append(into[:0], s.byProject[own]...)
	var global, anywhere []uint32
	if f.ProjectID != "" {
		global = s.byProject[memory.ProjectRef{Tenant: f.TenantID}]
	}
	if f.CrossProject {
		anywhere = s.anywhere[f.TenantID]
	}
	if len(global) == 0 && len(anywhere) == 0 {
		return into
	}
	// Merged, not sorted: a project of a few hundred thousand memories
	// would be sorted again on every search. The own project's memories of
	// reach anywhere are in two lists: each rid once.
	n := len(into)
	into = append(into, global...)
	into = mergeRids(into[:n], into[n:], nil)
	return mergeRids(into, anywhere, nil)
}

// mergeRids returns the sorted union of the sorted lists a and b, each rid
// once (in a new array: a and b may share into's).
func mergeRids(a, b []uint32, into []uint32) []uint32 {
	if len(b) == 0 {
		return a
	}
	out := slices.Grow(into[:0], len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			out = append(out, a[i])
			i++
		case a[i] > b[j]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// removeAll drops the rids of gone from the lists of the scopes they were
// in (an erasure's batch: one pass a list, not a shift a rid).
func (s *scopeSets) removeAll(gone map[uint32]scopeOf) {
	if len(gone) == 0 || s.byProject == nil {
		return
	}
	refs := map[memory.ProjectRef]bool{}
	tenants := map[string]bool{}
	for _, sc := range gone {
		refs[sc.ref] = true
		if sc.anywhere {
			tenants[sc.ref.Tenant] = true
		}
	}
	drop := func(r uint32) bool { _, ok := gone[r]; return ok }
	for ref := range refs {
		if l := slices.DeleteFunc(s.byProject[ref], drop); len(l) > 0 {
			s.byProject[ref] = l
		} else {
			delete(s.byProject, ref)
		}
	}
	for t := range tenants {
		if l := slices.DeleteFunc(s.anywhere[t], drop); len(l) > 0 {
			s.anywhere[t] = l
		} else {
			delete(s.anywhere, t)
			delete(s.unsorted, t)
		}
	}
}
