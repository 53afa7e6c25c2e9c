package sqlite

// A query's BM25 statistics are its tenant's: the lexical index is one
// for the store, but the document count, the average length and each
// term's document frequency a search weighs with are counted over the
// documents of the filter's tenant only (the Redis store's are the
// tenant's projects' together already). Until stop 47 they were the
// store's, so that another tenant's memories moved this tenant's scores:
// with `explain` (the memory tool's recall shows each channel's score) a
// tenant could put a memory holding a word, ask for it, and read from its
// lexical score how many memories of the other tenants hold the word: a
// membership oracle over their memories. Prefix expansions likewise take
// only terms the tenant's documents hold (another tenant's vocabulary no
// longer crowds a prefix's expansions out).
//
// The default tenant (number 0) pays nothing: the counts below hold only
// the other tenants', and the default tenant's are the store's less
// those. A store whose memories are all the default tenant's keeps no map
// entry and no per-document tenant at all; one whose only tenant is named
// pays the per-tenant counts (two map updates a posting when indexing, a
// tenant a document, the counting filters in a search). What the search
// reads of other tenants' postings still costs time (their documents are
// scored and dropped by the filter); those are not statistics. A
// document's tenant never changes (Put refuses to move a node to another
// tenant): the index reads it anew only when the text is indexed again.

// tenantCount is a tenant's live documents and their summed length.
type tenantCount struct {
	n     int
	total int64
}

func tenantKey(t, id uint32) uint64 { return uint64(t)<<32 | uint64(id) }

// tenantOf is the tenant of document rid (0 for one not indexed).
func (x *lexIndex) tenantOf(rid uint32) uint32 {
	if int(rid) < len(x.docTenant) {
		return x.docTenant[rid]
	}
	return 0
}

// setTenant records the tenant of document rid.
func (x *lexIndex) setTenant(rid, t uint32) {
	if t == 0 && int(rid) >= len(x.docTenant) {
		return
	}
	for int(rid) >= len(x.docTenant) {
		x.docTenant = append(x.docTenant, 0)
	}
	x.docTenant[rid] = t
}

// countTerm adds d to tenant t's document frequency of term id.
func (x *lexIndex) countTerm(t, id uint32, d int) {
	if t == 0 {
		return
	}
	if x.tenantDF == nil {
		x.tenantDF, x.otherDF = map[uint64]int32{}, map[uint32]int32{}
	}
	k := tenantKey(t, id)
	if v := x.tenantDF[k] + int32(d); v != 0 {
		x.tenantDF[k] = v
	} else {
		delete(x.tenantDF, k)
	}
	if v := x.otherDF[id] + int32(d); v != 0 {
		x.otherDF[id] = v
	} else {
		delete(x.otherDF, id)
	}
}

// countDoc adds d documents of length tokens to tenant t's counts.
func (x *lexIndex) countDoc(t uint32, length uint32, d int) {
	if t == 0 {
		return
	}
	if x.tenantN == nil {
		x.tenantN = map[uint32]*tenantCount{}
	}
	c := x.tenantN[t]
	if c == nil {
		c = &tenantCount{}
		x.tenantN[t] = c
	}
	c.n += d
	c.total += int64(d) * int64(length)
	if c.n == 0 {
		delete(x.tenantN, t)
	}
}

// dfOf is term tm's live documents of tenant t.
func (x *lexIndex) dfOf(tm *term, t uint32) int {
	if t == 0 {
		if len(x.otherDF) == 0 {
			return tm.df
		}
		return tm.df - int(x.otherDF[tm.id])
	}
	return int(x.tenantDF[tenantKey(t, tm.id)])
}

// docsOf is tenant t's live documents and their summed length.
func (x *lexIndex) docsOf(t uint32) (n int, total int64) {
	if t != 0 {
		if c := x.tenantN[t]; c != nil {
			return c.n, c.total
		}
		return 0, 0
	}
	n, total = x.nDocs, x.totalLen
	for _, c := range x.tenantN {
		n -= c.n
		total -= c.total
	}
	return n, total
}

// split reports whether documents of more than the default tenant are
// indexed (else every count is the store's).
func (x *lexIndex) split() bool { return len(x.tenantN) > 0 }

// ofTenant counts the documents of rids that are tenant t's.
func (x *lexIndex) ofTenant(rids []uint32, t uint32) int {
	return countOfTenant(x, rids, func(rid uint32) uint32 { return rid }, t)
}

// countOfTenant counts the documents of docs (rid gives each one's) that
// are tenant t's.
func countOfTenant[D any](x *lexIndex, docs []D, rid func(D) uint32, t uint32) int {
	if !x.split() {
		if t == 0 {
			return len(docs)
		}
		return 0
	}
	n := 0
	for _, d := range docs {
		if x.tenantOf(rid(d)) == t {
			n++
		}
	}
	return n
}

// keepTenant is a markLive filter of tenant t's documents (nil: every
// document is the default tenant's).
func (x *lexIndex) keepTenant(t uint32) func(rid uint32) bool {
	if !x.split() {
		if t != 0 {
			return func(uint32) bool { return false }
		}
		return nil
	}
	return func(rid uint32) bool { return x.tenantOf(rid) == t }
}
