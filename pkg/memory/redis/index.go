package redis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// maxTermBytes caps an indexed (and a queried) term; longer ones are cut on
// a rune boundary, so a long query term still matches as a prefix.
const maxTermBytes = 64

// docTokens splits text the way memory.Terms splits a query (runs of
// letters and digits, lower-cased, at least 2 characters) but keeps
// repetitions: the term frequencies of a document. The label counts twice
// (lexical index version 2, see lexVersion).
func docTokens(n *memory.Node) (tf map[string]int, length int) {
	tf = map[string]int{}
	add := func(text string) {
		for _, f := range strings.FieldsFunc(text, func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r)
		}) {
			if utf8.RuneCountInString(f) < 2 {
				continue
			}
			tf[cutTerm(strings.ToLower(f))]++
			length++
		}
	}
	for range labelRepeats {
		add(n.Label)
	}
	add(n.Body)
	for _, p := range n.Paths {
		add(p)
	}
	for _, e := range n.Entities {
		add(e.Name)
	}
	return tf, length
}

// labelRepeats is how many times docTokens counts the label: 2 since
// lexical index version 2 (a variable only so that the migration test can
// write version-1 postings).
var labelRepeats = 2

func cutTerm(t string) string {
	if len(t) <= maxTermBytes {
		return t
	}
	i := maxTermBytes
	for i > 0 && !utf8.RuneStart(t[i]) {
		i--
	}
	return t[:i]
}

// standingScore orders the standing set like memory.CompareStanding:
// pinned first, then preference, decision, pattern, then newest update
// (ties: member order, the id).
func standingScore(n *memory.Node) float64 {
	class := 0
	if !n.Pinned {
		class = 4
	}
	switch n.Subkind {
	case memory.Preference:
	case memory.Decision:
		class++
	case memory.Pattern:
		class += 2
	default:
		class += 3
	}
	const span = 1 << 43 // milliseconds until the year 2248
	ms := min(max(n.UpdatedAt.UnixMilli(), 0), span-1)
	return float64(class)*span + float64(span-1-ms)
}

// timeScore is the timeline score: updated-at in microseconds.
func timeScore(n *memory.Node) float64 { return float64(n.UpdatedAt.UnixMicro()) }

func createdScore(n *memory.Node) float64 { return float64(n.CreatedAt.UnixMicro()) }

// sessionHash is how a session id appears in vector attributes: a filter
// expression then never has to quote arbitrary text.
func sessionHash(s string) string {
	if s == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// vectorAttrs are the JSON attributes of a node in its vector set: what
// the FILTER of the vector channel tests (see vectorFilter).
func vectorAttrs(n *memory.Node) string {
	b01 := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	var vt int64
	if !n.ValidTo.IsZero() {
		vt = n.ValidTo.UnixNano()
	}
	a := struct {
		Scope    string  `json:"sc"`
		Session  string  `json:"ss"`
		Reach    string  `json:"rc"`
		Archived int     `json:"ar"`
		Super    int     `json:"sb"`
		ValidTo  int64   `json:"vt"`
		Conf     float64 `json:"cf"`
		Subkind  string  `json:"sk"`
	}{string(n.Scope), sessionHash(n.SessionID), string(n.Reach), b01(!n.ArchivedAt.IsZero()),
		b01(n.SupersededBy != ""), vt, n.Confidence, string(n.Subkind)}
	b, _ := json.Marshal(a)
	return string(b)
}

// filterFields packs the hash fields memory.Visible needs (scope, reach,
// archived, superseded-by, valid-to, confidence, subkind, then the session
// id, which may hold any byte) into one value of the project's "vis" hash,
// so that the channels judge a whole page of candidates with one HMGET
// (visibleFields) instead of one per node.
func filterFields(enc map[string]any) string {
	var b strings.Builder
	for _, f := range []string{fScope, fReach, fArchived, fSuperBy, fValidTo, fConf, fSubkind, fSession} {
		if f != fScope {
			b.WriteByte(31)
		}
		if v, ok := enc[f].(string); ok {
			b.WriteString(v)
		}
	}
	return b.String()
}

// visibleFields is memory.Visible over a node's filter fields (see
// filterFields) as the vis hash of space project holds them (the space
// gives the node's tenant and project); a node without them (deleted, or
// never written) is not visible.
func visibleFields(v, project string, f memory.Filter, now time.Time) bool {
	n, ok := fieldsNode(v, project)
	return ok && memory.Visible(&n, f, now)
}

// fieldsNode is the node as far as its filter fields (see filterFields)
// tell it; false when v is not a node's fields.
func fieldsNode(v, project string) (memory.Node, bool) {
	p := strings.SplitN(v, "\x1f", 8)
	if len(p) != 8 || p[0] == "" {
		return memory.Node{}, false
	}
	ref := unspace(project)
	n := memory.Node{TenantID: ref.Tenant, ProjectID: ref.Project, Scope: memory.Scope(p[0]), Reach: memory.Reach(p[1]),
		SupersededBy: p[3], Subkind: memory.Subkind(p[6]), SessionID: p[7]}
	if p[2] != "" {
		n.ArchivedAt = time.Unix(0, 1)
	}
	if p[4] != "" {
		t, err := parseTime(p[4])
		if err != nil {
			return memory.Node{}, false
		}
		n.ValidTo = t
	}
	if p[5] != "" {
		c, err := strconv.ParseFloat(p[5], 64)
		if err != nil {
			return memory.Node{}, false
		}
		n.Confidence = c
	}
	return n, true
}

// vaddScript adds one element to a vector set with the quantization the set
// was created with: Redis refuses a VADD whose quantization differs from
// the set's ("asked quantization mismatch"), also when none is named (the
// default is Q8), and a set keeps the one it was created with. A new set
// gets the store's (WithVectorQuantization); a set made before the default
// changed (float32, NOQUANT) keeps taking writes as it is.
//
// VINFO answers simple strings, which reach Lua as tables {ok = ...}.
//
// KEYS: the vector set. ARGV: quantization for a new set (NOQUANT, Q8,
// BIN), element, FP32 blob, attributes (JSON).
var vaddScript = goredis.NewScript(luaVadd)

// vaddIfScript is vaddScript while the node's hash (KEYS[2]) still holds
// the vector (ARGV[3]) in its field ARGV[5] and the project's vis hash
// (KEYS[3]) the filter fields ARGV[6] for it (ARGV[2]): a rebuild's write
// of a vector and attributes it read earlier must not undo a writer's
// newer ones, nor bring back an erased node. Reply: 0 when the node
// changed.
var vaddIfScript = goredis.NewScript(`if redis.call('HGET', KEYS[2], ARGV[5]) ~= ARGV[3] or redis.call('HGET', KEYS[3], ARGV[2]) ~= ARGV[6] then return 0 end
` + luaVadd)

const luaVadd = `
local function str(x) if type(x) == 'table' then return x.ok end return x end
local q = ARGV[1]
if redis.call('EXISTS', KEYS[1]) == 1 then
  local info = redis.call('VINFO', KEYS[1])
  for i = 1, #info - 1, 2 do
    if str(info[i]) == 'quant-type' then
      local t = str(info[i + 1])
      if t == 'f32' then q = 'NOQUANT' elseif t == 'bin' then q = 'BIN' else q = 'Q8' end
      break
    end
  end
end
return redis.call('VADD', KEYS[1], 'FP32', ARGV[3], ARGV[2], q, 'SETATTR', ARGV[4])
`

// luaHeads begins the posting scripts' storing: the top scores of the
// cached heads of the terms in order (KEYS[3]: term -> "list score"), in
// heads by term.
var luaHeads = `local heads = {}
for j0 = 1, #order, 1000 do
  local part = {}
  for j = j0, math.min(j0 + 999, #order) do part[#part + 1] = order[j] end
  local hv = redis.call('HMGET', KEYS[3], unpack(part))
  for j, t in ipairs(part) do
    if hv[j] then heads[t] = tonumber(string.match(hv[j], ' (.*)$')) end
  end
end`

// luaDocFreqs collects, in the posting scripts, each changed term's
// document frequency (dfNote: the length of its list after the call's
// writes), and luaDocFreqsWrite sets them in the document frequencies
// hash (KEYS[5]: term -> count; an emptied list's term removed), so that
// the hash always holds every list's ZCARD (format.go, FormatDocFreqs).
var luaDocFreqs = `
local dfSet, dfDel = {}, {}
local function dfNote(t, c)
  if c > 0 then
    dfSet[#dfSet + 1] = t
    dfSet[#dfSet + 1] = c
  else
    dfDel[#dfDel + 1] = t
  end
end`

var luaDocFreqsWrite = `
for j0 = 1, #dfSet, 2000 do
  redis.call('HSET', KEYS[5], unpack(dfSet, j0, math.min(j0 + 1999, #dfSet)))
end
for j0 = 1, #dfDel, 1000 do
  redis.call('HDEL', KEYS[5], unpack(dfDel, j0, math.min(j0 + 999, #dfDel)))
end
`

// luaDictWrite ends the posting scripts: the dictionary's additions
// (dictAdd: score, term pairs) and removals (dictRem) applied to KEYS[1],
// and the versions of the buckets they change set to the call's token
// (ARGV[2]) in KEYS[4]; with fine set, only the buckets of terms that are
// new (a ZMSCORE first), else every bucket of a ZADD that added a term.
var luaDictWrite = `local bumped, bl = {}, {}
` + luaDictField + `
local function bump(t)
  local b = dictField(t)
  if not bumped[b] then
    bumped[b] = true
    bl[#bl + 1] = b
    bl[#bl + 1] = ARGV[2]
  end
end
for j0 = 1, #dictAdd, 2000 do
  local j1 = math.min(j0 + 1999, #dictAdd)
  if fine then
    local ts = {}
    for j = j0 + 1, j1, 2 do ts[#ts + 1] = dictAdd[j] end
    local known = redis.call('ZMSCORE', KEYS[1], unpack(ts))
    redis.call('ZADD', KEYS[1], unpack(dictAdd, j0, j1))
    for j, t in ipairs(ts) do
      if not known[j] then bump(t) end
    end
  elseif redis.call('ZADD', KEYS[1], unpack(dictAdd, j0, j1)) > 0 then
    for j = j0 + 1, j1, 2 do bump(dictAdd[j]) end
  end
end
for j0 = 1, #dictRem, 1000 do
  redis.call('ZREM', KEYS[1], unpack(dictRem, j0, math.min(j0 + 999, #dictRem)))
end
for _, t in ipairs(dictRem) do bump(t) end
for j0 = 1, #bl, 2000 do
  redis.call('HSET', KEYS[4], unpack(bl, j0, math.min(j0 + 1999, #bl)))
end
`

// reindexLexScript moves documents' postings from their old terms to
// their new ones, drops emptied terms from the term dictionary and keeps
// the corpus statistics (document count n, total length l) for BM25. One
// call takes any number of documents of one project (a PutBatch chunk:
// postingWrites), in order, as that many calls one after the other would
// leave the keys: each document is weighted with the statistics the ones
// before it left. The writes are grouped by term: one ZADD (and one ZREM)
// per term with every member of the call, one ZADD and one ZREM of the
// dictionary, one HINCRBY of each statistic, and one HMGET of the heads
// hash. Per (document, term) the script only computes; an import of short
// memories changes about fifteen terms a document, most of them shared
// with the others of its chunk (see the package doc, "Import").
//
// A posting's score packs three numbers: the document's BM25 term weight
// at indexing time (tf*(k1+1)/(tf + k1*(1-b+b*dl/avgdl)) with the average
// length of that moment, quantised to 16 bits) times 2^29, plus tf (13
// bits) times 2^16, plus the document length (16 bits). Postings therefore
// sort by impact, which lets the lexical channel read the best postings of
// a very common term first, while tf and length are exact for scoring.
//
// A change to a posting in a list's cached head (see lexhead.go) drops
// that head, in the same script as the change: a head is dropped when any
// posting of the call falls in it (a new score, or the score it replaces
// or removes, no lower than the head's lowest), which is what dropping it
// at the first such change of one call per document leaves.
//
// A term added to the dictionary or dropped from it sets its bucket in
// the dictionary versions hash to the call's token (see lexdict.go): a
// dropped term its own. An added term: with the fine flag (a call of up
// to dictFineDocs documents: a single write, a small batch) only the
// terms the dictionary did not hold (ZMSCORE before the ZADD), so that a
// memory with one new word leaves the cached ranges of its other words'
// buckets, the next turn's query's, alone; without it (an import's
// chunk), when the ZADD added any term, every term of that ZADD (the
// ZMSCORE cost an import 5-8% of its speed). A write whose terms are all
// known sets none.
//
// Each term's document frequency (the length of its list) is set in the
// document frequencies hash (K df: term -> count, none for an empty list)
// in the same call (luaDocFreqs).
//
// KEYS: term dictionary, corpus statistics, heads hash, dictionary
// versions, document frequencies. ARGV: key prefix, version token, the fine flag ("1" or "0"),
// then per document: id,
// document count delta, old length, new length, the number of old terms,
// the number of new terms, the old terms, then the new terms and
// frequencies.
var reindexLexScript = goredis.NewScript(`
local p, fine = ARGV[1], ARGV[3] == '1'
local st = redis.call('HMGET', KEYS[2], 'n', 'l')
local n, l = tonumber(st[1]) or 0, tonumber(st[2]) or 0
local dn, dlsum = 0, 0
local order, post = {}, {}
local function put(t, id, sc)
  local e = post[t]
  if not e then
    e = {ids = {}, sc = {}}
    post[t] = e
    order[#order + 1] = t
  end
  if e.sc[id] == nil then e.ids[#e.ids + 1] = id end
  e.sc[id] = sc
  if sc then
    if not e.top or sc > e.top then e.top = sc end
  end
end
local i = 4
while i <= #ARGV do
  local id = ARGV[i]
  local delta, oldLen, newLen = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local nold, nnew = tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
  local o = i + 6
  local nw = o + nold
  local last = nw + 2 * nnew - 1
  if nold > 0 then
    local newtf = {}
    for j = nw, last, 2 do newtf[ARGV[j]] = true end
    for j = o, nw - 1 do
      if not newtf[ARGV[j]] then put(ARGV[j], id, false) end
    end
  end
  local dl = newLen
  if dl > 65535 then dl = 65535 end
  local avg = dl
  if n > 0 and l > 0 then avg = l / n end
  if avg < 1 then avg = 1 end
  for j = nw, last, 2 do
    local tf = tonumber(ARGV[j + 1])
    if tf > 8191 then tf = 8191 end
    local imp = tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avg))
    local q = math.floor(imp / 2.2 * 65535)
    put(ARGV[j], id, q * 536870912 + tf * 65536 + dl)
  end
  n, l = n + delta, l + newLen - oldLen
  dn, dlsum = dn + delta, dlsum + newLen - oldLen
  i = last + 1
end
` + luaHeads + luaDocFreqs + `
local dictAdd, dictRem = {}, {}
for _, t in ipairs(order) do
  local e, k = post[t], p .. 't:' .. t
  local m = heads[t]
  if m then
    local drop = e.top and e.top >= m
    if not drop then
      for _, id in ipairs(e.ids) do
        local old = redis.call('ZSCORE', k, id)
        if old and tonumber(old) >= m then drop = true break end
      end
    end
    if drop then
      redis.call('DEL', p .. 'th:' .. t)
      redis.call('HDEL', KEYS[3], t)
    end
  end
  local adds, rems = {}, {}
  for _, id in ipairs(e.ids) do
    local sc = e.sc[id]
    if sc then
      adds[#adds + 1] = sc
      adds[#adds + 1] = id
    else
      rems[#rems + 1] = id
    end
  end
  for j0 = 1, #rems, 1000 do
    redis.call('ZREM', k, unpack(rems, j0, math.min(j0 + 999, #rems)))
  end
  for j0 = 1, #adds, 2000 do
    redis.call('ZADD', k, unpack(adds, j0, math.min(j0 + 1999, #adds)))
  end
  local c = redis.call('ZCARD', k)
  if #adds > 0 then
    dictAdd[#dictAdd + 1] = 0
    dictAdd[#dictAdd + 1] = t
  elseif c == 0 then
    dictRem[#dictRem + 1] = t
  end
  dfNote(t, c)
end
` + luaDictWrite + luaDocFreqsWrite + `
redis.call('HINCRBY', KEYS[2], 'n', dn)
redis.call('HINCRBY', KEYS[2], 'l', dlsum)
return 1
`)

// reindexScoredScript stores postings scored by the caller (a scored
// tagWrites): what reindexLexScript does after its arithmetic, with the
// same cached-head, dictionary and version rules, per term in the order
// given.
//
// KEYS: as reindexLexScript's. ARGV: key prefix, version token, the
// document count and total length deltas, the fine flag, then per term: the term, the
// number of postings added or rescored, the number removed, the highest
// new score ("" for none), the added postings as score, id pairs, then the
// removed ids.
var reindexScoredScript = goredis.NewScript(`
local p, fine = ARGV[1], ARGV[5] == '1'
local order, at = {}, {}
local i = 6
while i <= #ARGV do
  local na, nr = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  order[#order + 1] = ARGV[i]
  at[#order] = i
  i = i + 4 + 2 * na + nr
end
` + luaHeads + luaDocFreqs + `
local dictAdd, dictRem = {}, {}
for o, t in ipairs(order) do
  local i = at[o]
  local na, nr, top = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), ARGV[i + 3]
  local a0, r0 = i + 4, i + 4 + 2 * na
  local k = p .. 't:' .. t
  local m = heads[t]
  if m then
    local drop = top ~= '' and tonumber(top) >= m
    if not drop then
      for j = a0 + 1, r0 - 1, 2 do
        local old = redis.call('ZSCORE', k, ARGV[j])
        if old and tonumber(old) >= m then drop = true break end
      end
    end
    if not drop then
      for j = r0, r0 + nr - 1 do
        local old = redis.call('ZSCORE', k, ARGV[j])
        if old and tonumber(old) >= m then drop = true break end
      end
    end
    if drop then
      redis.call('DEL', p .. 'th:' .. t)
      redis.call('HDEL', KEYS[3], t)
    end
  end
  for j0 = r0, r0 + nr - 1, 1000 do
    redis.call('ZREM', k, unpack(ARGV, j0, math.min(j0 + 999, r0 + nr - 1)))
  end
  for j0 = a0, r0 - 1, 2000 do
    redis.call('ZADD', k, unpack(ARGV, j0, math.min(j0 + 1999, r0 - 1)))
  end
  local c = redis.call('ZCARD', k)
  if na > 0 then
    dictAdd[#dictAdd + 1] = 0
    dictAdd[#dictAdd + 1] = t
  elseif c == 0 then
    dictRem[#dictRem + 1] = t
  end
  dfNote(t, c)
end
` + luaDictWrite + luaDocFreqsWrite + `
redis.call('HINCRBY', KEYS[2], 'n', ARGV[3])
redis.call('HINCRBY', KEYS[2], 'l', ARGV[4])
return 1
`)

// tagWrites gathers writes of one project's keys (one hash tag) that
// writeNodeTo queues for one MULTI, so that a batch of nodes costs one
// command per key rather than one per node and key: the posting changes
// of every document (one reindexLexScript call), and the fields and
// members added to the project's shared hashes, sets and sorted sets (the
// filter fields, digests, timeline, live set, standing and backlog sets,
// conversation sets). flush queues them after everything writeNodeTo
// queued directly; what it queues directly (removals, conditional
// deletes, the node hashes) never depends on an addition to the same key
// by another node of the batch.
type tagWrites struct {
	k    keys
	args []any // reindexLexScript's ARGV

	// With scored set (scoredTagWrites), reindex computes the postings'
	// scores here, from the statistics n and l the caller read under
	// WATCH, and groups them by term for reindexScoredScript.
	scored bool
	n, l   float64
	dn, dl int64
	terms  []string
	post   map[string]*termPostings
	docs   int // documents reindexed since the last flush

	order []string // the keys added to, in first-use order
	hsets map[string][]any
	zadds map[string][]goredis.Z
	sadds map[string][]any
}

func newTagWrites(k keys) *tagWrites {
	return &tagWrites{k: k, args: []any{k.p, dictToken(), "0"}}
}

// tagWrites returns newTagWrites(k), and forgets what this process keeps
// of the project's statistics (statscache.go): its next query reads them
// with this write in them. (A query between the two may keep them from
// before the write, for statsTTL: like another process' write.)
func (s *Store) tagWrites(k keys) *tagWrites {
	s.stats.drop(k.p, s.now())
	return newTagWrites(k)
}

// dictFineDocs is the most documents of a posting-script call that sets
// the versions of its new terms only (see reindexLexScript).
const dictFineDocs = 16

// fineFlag is the scripts' fine flag for a call of docs documents.
func fineFlag(docs int) string {
	if docs <= dictFineDocs {
		return "1"
	}
	return "0"
}

// scoredTagWrites is tagWrites for a caller that read the scope's
// statistics (n documents, l total length: HMGET of k.stats(), each
// missing or unparsable value 0, as the script reads them) with the stats
// key WATCHed: the postings are scored here (scoreDoc), as
// reindexLexScript scores them, and the script only stores them. An
// import's chunk spent about a third of its server time in that script's
// arithmetic and tables.
func (s *Store) scoredTagWrites(k keys, n, l float64) *tagWrites {
	w := s.tagWrites(k)
	w.scored, w.n, w.l = true, n, l
	return w
}

// termPostings are the postings of one term that a scored tagWrites
// changes: the new ones as score, id pairs and the removed ids. A batch
// names a document once (PutBatch refuses an id twice), and a document
// adds or removes a term's posting, not both.
type termPostings struct {
	add []any
	del []any
	top int64 // the highest new score
}

func (w *tagWrites) put(t, id string, score int64, del bool) {
	if w.post == nil {
		w.post = map[string]*termPostings{}
	}
	e := w.post[t]
	if e == nil {
		e = &termPostings{}
		w.post[t] = e
		w.terms = append(w.terms, t)
	}
	if del {
		e.del = append(e.del, id)
		return
	}
	e.add = append(e.add, score, id)
	e.top = max(e.top, score)
}

// scorePosting is a posting's packed score as reindexLexScript computes it
// (the same floating-point operations in the same order; the conversions
// keep a compiler from fusing a multiply and an add).
func scorePosting(tf, dl int, avg float64) int64 {
	ftf, fdl := float64(min(tf, 8191)), float64(dl)
	imp := float64(ftf*(bm25K1+1)) / (ftf + float64(bm25K1*((1-bm25B)+float64(float64(bm25B*fdl)/avg))))
	q := math.Floor(float64(imp/(bm25K1+1)) * 65535)
	return int64(float64(float64(q*postingShift)+float64(ftf*65536)) + fdl)
}

// reindex queues a document's move from oldTF (oldLen tokens) to newTF
// (newLen); delta is its change to the document count (1 new, -1 gone).
func (w *tagWrites) reindex(id string, delta, oldLen, newLen int, oldTF, newTF map[string]int) {
	w.docs++
	if w.scored {
		for t := range oldTF {
			if _, ok := newTF[t]; !ok {
				w.put(t, id, 0, true)
			}
		}
		dl := min(newLen, 65535)
		avg := float64(dl)
		if w.n > 0 && w.l > 0 {
			avg = w.l / w.n
		}
		if avg < 1 {
			avg = 1
		}
		for t, c := range newTF {
			w.put(t, id, scorePosting(c, dl, avg), false)
		}
		w.n, w.l = w.n+float64(delta), w.l+float64(newLen-oldLen)
		w.dn, w.dl = w.dn+int64(delta), w.dl+int64(newLen-oldLen)
		return
	}
	w.args = slices.Grow(w.args, 6+len(oldTF)+2*len(newTF))
	w.args = append(w.args, id, delta, oldLen, newLen, len(oldTF), len(newTF))
	for t := range oldTF {
		w.args = append(w.args, t)
	}
	for t, c := range newTF {
		w.args = append(w.args, t, c)
	}
}

func (w *tagWrites) use(key string) {
	if w.hsets == nil {
		w.hsets, w.zadds, w.sadds = map[string][]any{}, map[string][]goredis.Z{}, map[string][]any{}
	}
	if _, ok := w.hsets[key]; ok {
		return
	}
	if _, ok := w.zadds[key]; ok {
		return
	}
	if _, ok := w.sadds[key]; ok {
		return
	}
	w.order = append(w.order, key)
}

func (w *tagWrites) hset(key, field, value string) {
	w.use(key)
	w.hsets[key] = append(w.hsets[key], field, value)
}

func (w *tagWrites) zadd(key string, score float64, member string) {
	w.use(key)
	w.zadds[key] = append(w.zadds[key], goredis.Z{Score: score, Member: member})
}

func (w *tagWrites) sadd(key, member string) {
	w.use(key)
	w.sadds[key] = append(w.sadds[key], member)
}

// flush queues the gathered writes on pipe and empties w.
func (w *tagWrites) flush(ctx context.Context, pipe goredis.Pipeliner) {
	for _, key := range w.order {
		if v := w.hsets[key]; len(v) > 0 {
			pipe.HSet(ctx, key, v...)
		}
		if v := w.zadds[key]; len(v) > 0 {
			pipe.ZAdd(ctx, key, v...)
		}
		if v := w.sadds[key]; len(v) > 0 {
			pipe.SAdd(ctx, key, v...)
		}
	}
	w.order, w.hsets, w.zadds, w.sadds = nil, nil, nil, nil
	if w.scored {
		if len(w.terms) > 0 || w.dn != 0 || w.dl != 0 {
			args := []any{w.k.p, dictToken(), w.dn, w.dl, fineFlag(w.docs)}
			for _, t := range w.terms {
				e := w.post[t]
				var top any = ""
				if len(e.add) > 0 {
					top = e.top
				}
				args = append(args, t, len(e.add)/2, len(e.del), top)
				args = append(args, e.add...)
				args = append(args, e.del...)
			}
			reindexScoredScript.Eval(ctx, pipe, []string{w.k.terms(), w.k.stats(), w.k.heads(), w.k.dictVersions(), w.k.docFreqs()}, args...)
		}
		w.terms, w.post, w.dn, w.dl, w.docs = nil, nil, 0, 0, 0
		return
	}
	if len(w.args) > 3 {
		w.args[2] = fineFlag(w.docs)
		reindexLexScript.Eval(ctx, pipe, []string{w.k.terms(), w.k.stats(), w.k.heads(), w.k.dictVersions(), w.k.docFreqs()}, w.args...)
	}
	w.args, w.docs = append(w.args[:1], dictToken(), "0"), 0
}

// hdelIfScript deletes a hash field only while it holds the given value.
var hdelIfScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
`)

// writeNode queues, inside a MULTI of the node's slot, everything that
// stores n and keeps the indexes of its project right. old is the stored
// node (nil for a new one). The caller has WATCHed the node key, the
// digest hash and the vector set, checked the vector's dimension and, for
// a node of reach anywhere, added its space to the reach registry
// (markReach: another slot, so outside the MULTI, before it).
func (s *Store) writeNode(ctx context.Context, pipe goredis.Pipeliner, old, n *memory.Node) {
	lw := s.tagWrites(s.keys(spaceOf(n)))
	s.writeNodeTo(ctx, pipe, lw, old, n)
	lw.flush(ctx, pipe)
}

// writeNodeTo is writeNode with the posting changes queued on lw (of n's
// project), for the caller to flush with those of the other nodes it
// writes in the same MULTI.
func (s *Store) writeNodeTo(ctx context.Context, pipe goredis.Pipeliner, lw *tagWrites, old, n *memory.Node) {
	k := s.keys(spaceOf(n))
	id := n.ID

	// The hash: the packed attributes and the vector, each written only
	// when it changed. A hash of the per-attribute form loses those fields
	// when it is first written packed.
	enc := encodeNode(n)
	var oldEnc map[string]any
	if old != nil {
		oldEnc = encodeNode(old)
	}
	if pk := packNode(n); old == nil || packNode(old) != pk {
		if old != nil {
			pipe.HDel(ctx, k.node(id), nodeFields...)
		}
		pipe.HSet(ctx, k.node(id), fPacked, pk)
		// Its head's copy for the candidate loads (format.go, readHeads),
		// kept by every write whatever the store's format.
		pipe.HSet(ctx, k.packedNodes(), id, headCopy(n))
	}
	switch {
	case len(n.Embedding) > 0 && (old == nil || !slices.Equal(old.Embedding, n.Embedding)):
		pipe.HSet(ctx, k.node(id), fVector, encodeVector(n.Embedding))
	case len(n.Embedding) == 0 && old != nil && len(old.Embedding) > 0:
		pipe.HDel(ctx, k.node(id), fVector)
	}

	// The filter fields the server-side scripts judge visibility by.
	if ff := filterFields(enc); old == nil || filterFields(oldEnc) != ff {
		lw.hset(k.vis(), id, ff)
	}

	// Digest -> id.
	if old == nil || old.Digest != n.Digest {
		lw.hset(k.digests(), n.Digest, id)
		if old != nil && old.Digest != "" {
			hdelIfScript.Eval(ctx, pipe, []string{k.digests()}, old.Digest, id)
		}
	}

	// Timeline.
	if old == nil || !old.UpdatedAt.Equal(n.UpdatedAt) {
		lw.zadd(k.all(), timeScore(n), id)
	}

	// Conversation set.
	s.writeConversation(ctx, pipe, lw, k, old, n)

	// Live set.
	live := n.Live()
	if old == nil || old.Live() != live {
		if live {
			lw.sadd(k.live(), id)
		} else if old != nil {
			pipe.SRem(ctx, k.live(), id)
		}
	}

	// Standing candidates.
	if memory.IsStanding(n) {
		if old == nil || !memory.IsStanding(old) || standingScore(old) != standingScore(n) {
			lw.zadd(k.standing(), standingScore(n), id)
		}
	} else if old != nil && memory.IsStanding(old) {
		pipe.ZRem(ctx, k.standing(), id)
	}

	// Embedding backlog: live nodes without a vector (pe) or with one of a
	// model (em:<model>).
	oldModel, newModel := "", ""
	if old != nil && len(old.Embedding) > 0 {
		oldModel = old.EmbeddingModel
	}
	if len(n.Embedding) > 0 {
		newModel = n.EmbeddingModel
	}
	if old != nil && old.Live() && (!live || oldModel != newModel) {
		if oldModel == "" {
			pipe.ZRem(ctx, k.pending(), id)
		} else {
			pipe.ZRem(ctx, k.embedded(oldModel), id)
		}
	}
	if live && (old == nil || !old.Live() || oldModel != newModel) {
		if newModel == "" {
			lw.zadd(k.pending(), createdScore(n), id)
		} else {
			lw.zadd(k.embedded(newModel), createdScore(n), id)
			lw.sadd(k.models(), newModel)
		}
	}

	// Vector set of the model, and the reach-anywhere one (reach.go).
	s.writeVector(ctx, pipe, k.vectors, old, n, oldModel, newModel)
	wasAny, isAny := "", ""
	if old != nil && old.Reach == memory.ReachAnywhere {
		wasAny = oldModel
	}
	if n.Reach == memory.ReachAnywhere {
		isAny = newModel
	}
	s.writeVector(ctx, pipe, k.anywhereVectors, old, n, wasAny, isAny)

	// Lexical postings.
	newTF, newLen := docTokens(n)
	var oldTF map[string]int
	oldLen := 0
	if old != nil {
		oldTF, oldLen = docTokens(old)
	}
	if old == nil || oldLen != newLen || !sameTF(oldTF, newTF) {
		docDelta := 0
		if old == nil {
			docDelta = 1
		}
		lw.reindex(id, docDelta, oldLen, newLen, oldTF, newTF)
	}
	writeAnywhere(ctx, pipe, lw, k, id, old != nil && old.Reach == memory.ReachAnywhere, n.Reach == memory.ReachAnywhere, oldTF, newTF)

	// Path sets.
	var oldPaths []string
	if old != nil {
		oldPaths = old.Paths
	}
	for _, p := range oldPaths {
		if !slices.Contains(n.Paths, p) {
			pipe.SRem(ctx, k.path(p), id)
		}
	}
	for _, p := range n.Paths {
		if !slices.Contains(oldPaths, p) {
			pipe.SAdd(ctx, k.path(p), id)
		}
	}
}

// writeVector queues the change of n's element in the vector sets named by
// set (per model): out of oldModel's set (the model n was in, "" none),
// into newModel's ("" none) with its vector and attributes, each written
// only when it changed.
func (s *Store) writeVector(ctx context.Context, pipe goredis.Pipeliner, set func(model string) string, old, n *memory.Node, oldModel, newModel string) {
	if oldModel != "" && oldModel != newModel {
		pipe.VRem(ctx, set(oldModel), n.ID)
	}
	if newModel == "" {
		return
	}
	attrs := vectorAttrs(n)
	if oldModel != newModel || !slices.Equal(old.Embedding, n.Embedding) {
		vaddScript.Eval(ctx, pipe, []string{set(newModel)}, strings.ToUpper(s.quant), n.ID, encodeVector(n.Embedding), attrs)
	} else if vectorAttrs(old) != attrs {
		pipe.VSetAttr(ctx, set(newModel), n.ID, attrs)
	}
}

func sameTF(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for t, c := range a {
		if b[t] != c {
			return false
		}
	}
	return true
}

// vectorFilter is the FILTER expression of the vector channel for one
// project's vector set: memory.Visible written in the vector-set expression
// language. own: the set is of f.ProjectID (or global when f.ProjectID is
// empty); foreign: another project's set, read for cross-project recall.
// global: the global set.
func vectorFilter(f memory.Filter, kind tagKind, nowNano int64) string {
	var parts []string
	switch kind {
	case tagForeign:
		parts = append(parts, `.rc == "anywhere"`, `.sc != "session"`)
	case tagGlobal:
		if f.ProjectID != "" {
			parts = append(parts, `.sc != "session"`)
		} else {
			parts = append(parts, `(.sc != "session" or .ss == "`+sessionHash(f.SessionID)+`")`)
		}
	default:
		parts = append(parts, `(.sc != "session" or .ss == "`+sessionHash(f.SessionID)+`")`)
	}
	if !f.IncludeArchived {
		parts = append(parts, `.ar == 0`)
	}
	if !f.IncludeSuperseded {
		parts = append(parts, `.sb == 0`, `(.vt == 0 or .vt > `+strconv.FormatInt(nowNano, 10)+`)`)
	}
	if f.MinConfidence > 0 {
		parts = append(parts, `.cf >= `+strconv.FormatFloat(f.MinConfidence, 'g', -1, 64))
	}
	if len(f.Subkinds) > 0 {
		var or []string
		for _, sk := range f.Subkinds {
			if sk.Valid() {
				or = append(or, `.sk == "`+string(sk)+`"`)
			}
		}
		if len(or) == 0 {
			or = append(or, `.sk == "-"`)
		}
		parts = append(parts, "("+strings.Join(or, " or ")+")")
	}
	return strings.Join(parts, " and ")
}

// tagKind says how a filter relates to a project's keys.
type tagKind int

const (
	tagOwn     tagKind = iota // the filter's project
	tagGlobal                 // global memories
	tagForeign                // another project (cross-project reads: reach anywhere only)
	tagStats                  // another project whose lexical statistics count, nothing of it read (statsTags)
)

// scopeTags lists the spaces a filter reads, all of its tenant: its
// project, the tenant's global memories, and with CrossProject every other
// project of the tenant that may hold a node of reach anywhere
// (crossSpaces). No space of another tenant is ever read.
func (s *Store) scopeTags(ctx context.Context, f memory.Filter) ([]scopeTag, error) {
	own := memory.ProjectRef{Tenant: f.TenantID, Project: f.ProjectID}
	out := []scopeTag{{project: space(own), kind: tagOwn}}
	if f.ProjectID != "" {
		out = append(out, scopeTag{project: space(memory.ProjectRef{Tenant: f.TenantID}), kind: tagGlobal})
	}
	if f.CrossProject {
		ps, err := s.crossSpaces(ctx)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			if r := unspace(p); r.Tenant == f.TenantID && r.Project != "" && r.Project != f.ProjectID {
				out = append(out, scopeTag{project: p, kind: tagForeign})
			}
		}
	}
	return out, nil
}

type scopeTag struct {
	project string // the space (see space)
	kind    tagKind
}

func finiteVec(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}
