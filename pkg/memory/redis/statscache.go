package redis

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// A CrossProject query counts the lexical statistics of the tenant's
// other projects (statsTags): their dictionaries and document frequencies,
// read on every search, though nothing of those projects is searched.
// Stop 46 measured that as most of what a turn still cost at 100 projects
// of 1,000 memories (about 535 HMGETs, 34 dictionary scripts and 336
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
// and every entry older at the next sweep (each statsTTL). This process'
// own writes and erasures drop the project's entry (Store.tagWrites,
// Erase): its next query reads the statistics with them; another
// process' are in them within statsTTL, and the terms of a project
// another process erased stay here twice that at most.
const (
	statsTTL = 30 * time.Second
	// statsCacheMax is how many terms the cache holds (over every
	// project) before it starts afresh.
	statsCacheMax = 1 << 17
)

// statsCache holds, per project (by its keys' prefix), the parts of its dictionary replies a
// tagStats read uses: the corpus statistics and, per query term (its
// dictArgs text), the term's lists and document frequencies.
type statsCache struct {
	mu    sync.Mutex
	m     map[string]*projStats
	terms int
	swept time.Time
}

type projStats struct {
	at       time.Time
	n, total string
	terms    map[string][]statsList // by query term (dictArgs)
}

// statsList is one list of a query term in a dictionary reply.
type statsList struct {
	key, df string
	kind    string // "0" the term itself, "1" an expansion
}

// get returns the dictionary reply of the project of keys prefix prefix for the query terms args (as
// the reply of a read would give it) when every term was read within
// statsTTL.
func (c *statsCache) get(prefix string, args []string, now time.Time) ([]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweep(now)
	p, ok := c.m[prefix]
	if !ok {
		return nil, false
	}
	if now.Sub(p.at) >= statsTTL {
		c.terms -= len(p.terms)
		delete(c.m, prefix)
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

// put keeps what a dictionary reply d of the project of keys prefix prefix for the query terms args
// says (d as parseLexDict reads it; a reply it would refuse is not kept).
// A project kept within statsTTL gets the terms added, its corpus
// statistics replaced; an older one starts afresh.
func (c *statsCache) put(prefix string, args []string, d []string, now time.Time) {
	if len(d) < 2 || (len(d)-2)%3 != 0 {
		return
	}
	byTerm := make(map[string][]statsList, len(args))
	for _, a := range args {
		byTerm[a] = nil // a term with no list is known too
	}
	for i := 2; i+2 < len(d); i += 3 {
		kind, group, ok := strings.Cut(d[i+2], ":")
		if !ok {
			return
		}
		gi, ok := groupIndex(group, len(args))
		if !ok {
			return
		}
		byTerm[args[gi]] = append(byTerm[args[gi]], statsList{key: d[i], df: d[i+1], kind: kind})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweep(now)
	if c.m == nil || c.terms+len(byTerm) > statsCacheMax {
		c.m, c.terms = map[string]*projStats{}, 0
	}
	p, ok := c.m[prefix]
	if !ok || now.Sub(p.at) >= statsTTL {
		if ok {
			c.terms -= len(p.terms)
		}
		p = &projStats{at: now, terms: make(map[string][]statsList, len(byTerm))}
		c.m[prefix] = p
	}
	p.n, p.total = d[0], d[1]
	for a, ls := range byTerm {
		if _, had := p.terms[a]; !had {
			c.terms++
		}
		p.terms[a] = ls
	}
}

// drop forgets a project: its write or erasure.
func (c *statsCache) drop(prefix string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.m[prefix]; ok {
		c.terms -= len(p.terms)
		delete(c.m, prefix)
	}
}

// sweep drops every project kept for statsTTL or longer, once per
// statsTTL. Called with mu held.
func (c *statsCache) sweep(now time.Time) {
	if now.Sub(c.swept) < statsTTL {
		return
	}
	c.swept = now
	for k, p := range c.m {
		if now.Sub(p.at) >= statsTTL {
			c.terms -= len(p.terms)
			delete(c.m, k)
		}
	}
}
