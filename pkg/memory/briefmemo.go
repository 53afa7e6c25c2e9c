package memory

import (
	"maps"
	"sync"
)

// BriefMemo remembers until when sessions' briefing flags are taken, so
// that a store's BriefOnce, asked on every turn, answers all but a
// session's first turn without a query. It is sound for any backend whose
// flag, once taken, is never cleared before its expiry (the Sessions
// contract): an expiry seen once, from this process' own take or read
// from the store, holds until it passes, whatever other processes do.
// Times are unix nanoseconds of the store's clock. Expired entries are
// swept whenever the memo has doubled since the last sweep. The zero value
// is ready; a BriefMemo must not be copied after first use.
type BriefMemo struct {
	mu    sync.Mutex
	until map[SessionRef]int64
	sweep int // size that triggers the next sweep
}

// Taken reports whether ref's flag is known to be taken at now.
func (m *BriefMemo) Taken(ref SessionRef, now int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.until[ref] > now
}

// Remember records that ref's flag is taken until expires.
func (m *BriefMemo) Remember(ref SessionRef, expires, now int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.until == nil {
		m.until = map[SessionRef]int64{}
	}
	m.until[ref] = max(m.until[ref], expires)
	if len(m.until) >= max(m.sweep, 1024) {
		maps.DeleteFunc(m.until, func(_ SessionRef, exp int64) bool { return exp <= now })
		m.sweep = 2 * len(m.until)
	}
}

// Forget drops what the memo knows of the sessions gone reports (an
// erasure deleted their flags).
func (m *BriefMemo) Forget(gone func(SessionRef) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	maps.DeleteFunc(m.until, func(ref SessionRef, _ int64) bool { return gone(ref) })
}
