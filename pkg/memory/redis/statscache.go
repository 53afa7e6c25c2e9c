package redis

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A CrossProject query counts the lexical statistics of the tenant's other
// projects (statsTags): their dictionaries and document frequencies, read
// on every search, though nothing of those projects is searched. Stop 46
// measured that as most of what a turn still cost at 100 projects of
// 1,000 memories (about 535 HMGETs, 34 dictionary scripts and 336
// ZRANGEBYLEX a turn; 0.1 ms of the server's CPU per project). Those
// statistics only weigh the query's terms (an idf), and another project's
// counts barely move between two turns, so the store keeps what it read
// of each such project for statsTTL: a query whose terms were all read
// within it reads nothing of that project; a term not seen yet reads the
// project's dictionary as before, and refreshes what is kept of it. The
// projects the query searches are always read afresh: their statistics
// and postings are exact.
//
// What is kept is in this process only (no term is written anywhere), for
// statsTTL at most: an entry older is dropped when it is next looked at,
// and every entry older at the next sweep (each statsTTL, when a query
// looks at the cache). This process' writes and erasures drop the
// project's entry (Store.tagWrites, Erase), and no read that started
// within statsQuiet after such a drop is kept (the drop comes when the
// write is queued, before it is applied): the next query reads the
// statistics with the write in them. Another process' writes are in them
// within statsTTL; the terms of a project another process erased stay
// here until this process' next query past statsTTL.
const (
	statsTTL = 30 * time.Second
	// statsQuiet: a read that started this soon after the project's
	// entry was dropped is not kept (it may have read the statistics
	// before the write that dropped it was applied).
	statsQuiet = time.Second
	// statsCacheMax is how many lists the cache holds (over every project
	// and term; about 100 bytes each): past it the projects kept longest
	// are dropped.
	statsCacheMax = 1 << 18
)

// statsCache holds, per project (by its keys' prefix), the parts of its
// dictionary replies a tagStats read uses: the corpus statistics and, per
// query term (its dictArgs text), the term's lists and document
// frequencies.
type statsCache struct {
	mu      sync.Mutex
	m       map[string]*projStats
	dropped map[string]time.Time // prefix -> when its entry was last dropped
	lists   int                  // lists held
	max     int                  // lists held at most (0: statsCacheMax)
	swept   time.Time
}

type projStats struct {
	at       time.Time
	n, total string
	terms    map[string][]statsList // by query term (dictArgs)
	lists    int
}

// statsList is one list of a query term in a dictionary reply.
type statsList struct {
	key, df string
	kind    string // "0" the term itself, "1" an expansion
}

// get returns the dictionary reply of the project of keys prefix prefix
// for the query terms args (as the reply of a read would give it) when
// every term was read within statsTTL.
func (c *statsCache) get(prefix string, args []string, now time.Time) ([]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweep(now)
	p, ok := c.m[prefix]
	if !ok {
		return nil, false
	}
	if now.Sub(p.at) >= statsTTL {
		c.remove(prefix)
		return nil, false
	}
	size := 2
	for _, a := range args {
		ls, ok := p.terms[a]
		if !ok {
			return nil, false
		}
		size += 3 * len(ls)
	}
	d := make([]string, 0, size)
	d = append(d, p.n, p.total)
	for g, a := range args {
		group := ":" + strconv.Itoa(g+lexDictFirstTerm)
		for _, l := range p.terms[a] {
			d = append(d, l.key, l.df, l.kind+group)
		}
	}
	return d, true
}

// put keeps what a dictionary reply d of the project of keys prefix prefix
// for the query terms args says, read from started on (d as parseLexDict
// reads it; a reply it would refuse is not kept, nor one read too soon
// after the project's entry was dropped: statsQuiet). A project kept
// within statsTTL gets the terms added, its corpus statistics replaced;
// an older one starts afresh.
func (c *statsCache) put(prefix string, args []string, d []string, started time.Time) {
	if len(d) < 2 || (len(d)-2)%3 != 0 {
		return
	}
	for i, a := range args {
		if slices.Contains(args[:i], a) {
			return // a term twice: its lists would be kept twice under one key
		}
	}
	byTerm := make(map[string][]statsList, len(args))
	for _, a := range args {
		byTerm[a] = nil // a term with no list is known too
	}
	lists := 0
	for i := 2; i+2 < len(d); i += 3 {
		kind, group, ok := strings.Cut(d[i+2], ":")
		if !ok || (kind != "0" && kind != "1") {
			return
		}
		if df, err := strconv.ParseInt(d[i+1], 10, 64); err != nil || df <= 0 {
			return
		}
		gi, ok := groupIndex(group, len(args))
		if !ok {
			return
		}
		byTerm[args[gi]] = append(byTerm[args[gi]], statsList{key: d[i], df: d[i+1], kind: kind})
		lists++
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweep(started)
	if at, ok := c.dropped[prefix]; ok && started.Sub(at) < statsQuiet {
		return
	}
	if c.m == nil {
		c.m = map[string]*projStats{}
	}
	p, ok := c.m[prefix]
	if !ok || started.Sub(p.at) >= statsTTL {
		if ok {
			c.remove(prefix)
		}
		p = &projStats{at: started, terms: make(map[string][]statsList, len(byTerm))}
		c.m[prefix] = p
	}
	p.n, p.total = d[0], d[1]
	for a, ls := range byTerm {
		if old, had := p.terms[a]; had {
			p.lists -= len(old)
			c.lists -= len(old)
		}
		p.terms[a] = ls
		p.lists += len(ls)
		c.lists += len(ls)
	}
	limit := c.max
	if limit == 0 {
		limit = statsCacheMax
	}
	for c.lists > limit && len(c.m) > 1 {
		c.evictOldest(prefix)
	}
}

// drop forgets a project: its write or erasure (see statsQuiet).
func (c *statsCache) drop(prefix string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(prefix)
	if c.dropped == nil {
		c.dropped = map[string]time.Time{}
	}
	c.dropped[prefix] = now
}

// remove drops prefix's entry. Called with mu held.
func (c *statsCache) remove(prefix string) {
	if p, ok := c.m[prefix]; ok {
		c.lists -= p.lists
		delete(c.m, prefix)
	}
}

// evictOldest drops the entry kept longest but keep's. Called with mu held.
func (c *statsCache) evictOldest(keep string) {
	oldest, at := "", time.Time{}
	for k, p := range c.m {
		if k != keep && (oldest == "" || p.at.Before(at)) {
			oldest, at = k, p.at
		}
	}
	c.remove(oldest)
}

// sweep drops every entry kept for statsTTL or longer, and the drop times
// older than statsQuiet, once per statsTTL. Called with mu held.
func (c *statsCache) sweep(now time.Time) {
	if now.Sub(c.swept) < statsTTL {
		return
	}
	c.swept = now
	for k, p := range c.m {
		if now.Sub(p.at) >= statsTTL {
			c.remove(k)
		}
	}
	for k, at := range c.dropped {
		if now.Sub(at) >= statsQuiet {
			delete(c.dropped, k)
		}
	}
}
