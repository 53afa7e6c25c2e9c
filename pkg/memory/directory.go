package memory

import (
	"context"
	"time"
)

// SessionInfo is one session of a project as a listing shows it.
type SessionInfo struct {
	Session  string
	Turns    int       // turns with a stored transcript
	Messages int       // messages stored
	LastAt   time.Time // the newest message's time (zero: unknown)
}

// Directory lists what a store holds for people to browse (the memory
// console): the projects of a tenant and the sessions of a project with
// their sizes. It is optional: without it (Redis) the console lists the
// session ids (Erasure.SessionIDs) and asks for a project.
type Directory interface {
	// Projects lists the project ids of tenant that hold a memory or a
	// transcript, sorted ("" , the tenant's global space, not included).
	Projects(ctx context.Context, tenant string) ([]string, error)
	// SessionList lists the sessions of p with a stored transcript, the
	// most recently active first; limit <= 0: DefaultChannelLimit.
	SessionList(ctx context.Context, p ProjectRef, limit int) ([]SessionInfo, error)
}

// Finder pages through a project's memories with filters of any kind (the
// memory console's list). It is optional: without it the console asks
// Timeline for ever longer lists. Both backends have it.
type Finder interface {
	// Find lists the nodes that q's Filter shows (memory.Visible; with
	// OnlySession, only those written in its session) and keep accepts,
	// by CompareTimeline (newest update first), from offset, at most
	// q.Limit (<= 0: DefaultChannelLimit); more reports whether others
	// follow. keep sees each candidate once and must not change it. It
	// filters what TimelineQuery cannot (authority, stale, pinned, a state)
	// in one pass, where Timeline would be asked for ever longer lists.
	Find(ctx context.Context, q TimelineQuery, keep func(*Node) bool, offset int) (nodes []Node, more bool, err error)
}
