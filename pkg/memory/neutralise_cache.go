package memory

import (
	"sync"
	"time"
)

// The memory block carries mostly the same memories turn after turn, and
// the `memory` tool answers with the same memories again and again: the
// neutraliser remembers what it made of a text. The cache is keyed by the
// text itself (and the form: one line or lines), so a hit returns exactly
// what the rules made of that very text, whoever asks: nothing of one
// tenant's text can come out for another's, and no check is skipped (the
// rules are deterministic: the same text always gets the same answer).
//
// Bounded: texts of at most cacheMaxText bytes are kept, in two
// generations of at most cacheBudget/2 bytes each (text, answer and an
// overhead per entry); when the newer one is full or older than cacheAge,
// the older one is dropped and the newer takes its place. A hit in the
// older generation moves the entry to the newer, so what is injected turn
// after turn stays, while a text no longer asked for is dropped within
// about 2*cacheAge as long as the process neutralises anything (an erased
// memory does not linger in the process).
const (
	cacheBudget   = 8 << 20 // bytes, both generations
	cacheMaxText  = 4 << 10 // longest text kept
	cacheAge      = 10 * time.Minute
	cacheOverhead = 96 // bytes per entry besides its strings (map slot, headers)
)

type cacheKey struct {
	text    string
	oneLine bool
}

type neutCache struct {
	mu       sync.Mutex
	budget   int // bytes per generation
	newer    map[cacheKey]string
	older    map[cacheKey]string
	bytes    int       // in newer
	since    time.Time // the newer generation's first entry
	now      func() time.Time
	disabled bool // tests and benchmarks: the rules every time
}

var neutralised = newNeutCache(cacheBudget)

func newNeutCache(budget int) *neutCache {
	return &neutCache{budget: budget / 2, newer: map[cacheKey]string{}, now: time.Now}
}

func entrySize(k cacheKey, out string) int {
	n := len(k.text) + cacheOverhead
	if out != k.text { // an unchanged text shares its bytes
		n += len(out)
	}
	return n
}

// get returns what the rules made of k, if it is kept.
func (c *neutCache) get(k cacheKey) (string, bool) {
	if len(k.text) > cacheMaxText {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.disabled {
		return "", false
	}
	c.rotateIfOld()
	if out, ok := c.newer[k]; ok {
		return out, true
	}
	out, ok := c.older[k]
	if ok {
		delete(c.older, k)
		c.addLocked(k, out)
	}
	return out, ok
}

// put keeps what the rules made of k.
func (c *neutCache) put(k cacheKey, out string) {
	if len(k.text) > cacheMaxText {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.disabled {
		return
	}
	if _, ok := c.newer[k]; ok {
		return
	}
	c.addLocked(k, out)
}

func (c *neutCache) addLocked(k cacheKey, out string) {
	n := entrySize(k, out)
	if c.bytes+n > c.budget {
		c.rotate()
	}
	if len(c.newer) == 0 {
		c.since = c.now() // a generation's age counts from its first entry
	}
	c.newer[k] = out
	c.bytes += n
}

func (c *neutCache) rotateIfOld() {
	if len(c.newer) > 0 && c.now().Sub(c.since) > cacheAge {
		c.rotate()
	}
}

// rotate drops the older generation; the newer takes its place.
func (c *neutCache) rotate() {
	c.older, c.newer, c.bytes = c.newer, map[cacheKey]string{}, 0
}

// size is the entries and bytes kept (tests).
func (c *neutCache) size() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range []map[cacheKey]string{c.newer, c.older} {
		for k, out := range g {
			entries++
			bytes += entrySize(k, out)
		}
	}
	return entries, bytes
}
