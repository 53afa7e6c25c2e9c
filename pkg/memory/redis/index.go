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
var vaddScript = goredis.NewScript(`
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
`)

// reindexLexScript moves a document's postings from its old terms to its
// new ones, drops emptied terms from the term dictionary and keeps the
// corpus statistics (document count n, total length l) for BM25.
//
// A posting's score packs three numbers: the document's BM25 term weight
// at indexing time (tf*(k1+1)/(tf + k1*(1-b+b*dl/avgdl)) with the average
// length of that moment, quantised to 16 bits) times 2^29, plus tf (13
// bits) times 2^16, plus the document length (16 bits). Postings therefore
// sort by impact, which lets the lexical channel read the best postings of
// a very common term first, while tf and length are exact for scoring.
//
// A change to a posting in a list's cached head (see lexhead.go) drops
// that head (headGuardLua), in the same script as the change.
//
// KEYS: term dictionary, corpus statistics, heads hash. ARGV: key
// prefix, id, document count delta, old length, new length, the number of
// old terms, the old terms, then the new terms and frequencies.
var reindexLexScript = goredis.NewScript(`
local p, id = ARGV[1], ARGV[2]
local nold = tonumber(ARGV[6])
local newtf = {}
local i = 7 + nold
local touched = {}
while i <= #ARGV do newtf[ARGV[i]] = tonumber(ARGV[i + 1]); touched[#touched + 1] = ARGV[i]; i = i + 2 end
for j = 7, 6 + nold do
  if not newtf[ARGV[j]] then touched[#touched + 1] = ARGV[j] end
end
` + headGuardLua + `
for j = 7, 6 + nold do
  local t = ARGV[j]
  if not newtf[t] then
    local k = p .. 't:' .. t
    guard(t, nil)
    redis.call('ZREM', k, id)
    if redis.call('ZCARD', k) == 0 then redis.call('ZREM', KEYS[1], t) end
  end
end
local dl = tonumber(ARGV[5])
if dl > 65535 then dl = 65535 end
local st = redis.call('HMGET', KEYS[2], 'n', 'l')
local n, l = tonumber(st[1]) or 0, tonumber(st[2]) or 0
local avg = dl
if n > 0 and l > 0 then avg = l / n end
if avg < 1 then avg = 1 end
for t, tf in pairs(newtf) do
  if tf > 8191 then tf = 8191 end
  local imp = tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avg))
  local q = math.floor(imp / 2.2 * 65535)
  local sc = q * 536870912 + tf * 65536 + dl
  guard(t, sc)
  redis.call('ZADD', p .. 't:' .. t, sc, id)
  redis.call('ZADD', KEYS[1], 0, t)
end
redis.call('HINCRBY', KEYS[2], 'n', ARGV[3])
redis.call('HINCRBY', KEYS[2], 'l', tonumber(ARGV[5]) - tonumber(ARGV[4]))
return 1
`)

// hdelIfScript deletes a hash field only while it holds the given value.
var hdelIfScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
`)

// writeNode queues, inside a MULTI of the node's slot, everything that
// stores n and keeps the indexes of its project right. old is the stored
// node (nil for a new one). The caller has WATCHed the node key, the
// digest hash and the vector set, and checked the vector's dimension.
func (s *Store) writeNode(ctx context.Context, pipe goredis.Pipeliner, old, n *memory.Node) {
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
	}
	switch {
	case len(n.Embedding) > 0 && (old == nil || !slices.Equal(old.Embedding, n.Embedding)):
		pipe.HSet(ctx, k.node(id), fVector, encodeVector(n.Embedding))
	case len(n.Embedding) == 0 && old != nil && len(old.Embedding) > 0:
		pipe.HDel(ctx, k.node(id), fVector)
	}

	// The filter fields the server-side scripts judge visibility by.
	if ff := filterFields(enc); old == nil || filterFields(oldEnc) != ff {
		pipe.HSet(ctx, k.vis(), id, ff)
	}

	// Digest -> id.
	if old == nil || old.Digest != n.Digest {
		pipe.HSet(ctx, k.digests(), n.Digest, id)
		if old != nil && old.Digest != "" {
			hdelIfScript.Eval(ctx, pipe, []string{k.digests()}, old.Digest, id)
		}
	}

	// Timeline.
	if old == nil || !old.UpdatedAt.Equal(n.UpdatedAt) {
		pipe.ZAdd(ctx, k.all(), goredis.Z{Score: timeScore(n), Member: id})
	}

	// Conversation set.
	s.writeConversation(ctx, pipe, k, old, n)

	// Live set.
	live := n.Live()
	if old == nil || old.Live() != live {
		if live {
			pipe.SAdd(ctx, k.live(), id)
		} else if old != nil {
			pipe.SRem(ctx, k.live(), id)
		}
	}

	// Standing candidates.
	if memory.IsStanding(n) {
		if old == nil || !memory.IsStanding(old) || standingScore(old) != standingScore(n) {
			pipe.ZAdd(ctx, k.standing(), goredis.Z{Score: standingScore(n), Member: id})
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
			pipe.ZAdd(ctx, k.pending(), goredis.Z{Score: createdScore(n), Member: id})
		} else {
			pipe.ZAdd(ctx, k.embedded(newModel), goredis.Z{Score: createdScore(n), Member: id})
			pipe.SAdd(ctx, k.models(), newModel)
		}
	}

	// Vector set of the model.
	if oldModel != "" && oldModel != newModel {
		pipe.VRem(ctx, k.vectors(oldModel), id)
	}
	if newModel != "" {
		attrs := vectorAttrs(n)
		if oldModel != newModel || !slices.Equal(old.Embedding, n.Embedding) {
			vaddScript.Eval(ctx, pipe, []string{k.vectors(newModel)}, strings.ToUpper(s.quant), id, encodeVector(n.Embedding), attrs)
		} else if vectorAttrs(old) != attrs {
			pipe.VSetAttr(ctx, k.vectors(newModel), id, attrs)
		}
	}

	// Lexical postings.
	newTF, newLen := docTokens(n)
	var oldTF map[string]int
	oldLen := 0
	if old != nil {
		oldTF, oldLen = docTokens(old)
	}
	if old == nil || oldLen != newLen || !sameTF(oldTF, newTF) {
		args := make([]any, 0, 6+len(oldTF)+2*len(newTF))
		docDelta := 0
		if old == nil {
			docDelta = 1
		}
		args = append(args, k.p, id, docDelta, oldLen, newLen, len(oldTF))
		for t := range oldTF {
			args = append(args, t)
		}
		for t, c := range newTF {
			args = append(args, t, c)
		}
		reindexLexScript.Eval(ctx, pipe, []string{k.terms(), k.stats(), k.heads()}, args...)
	}

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
)

// scopeTags lists the spaces a filter reads, all of its tenant: its
// project, the tenant's global memories, and with CrossProject every other
// registered project of the tenant. No space of another tenant is ever
// read.
func (s *Store) scopeTags(ctx context.Context, f memory.Filter) ([]scopeTag, error) {
	own := memory.ProjectRef{Tenant: f.TenantID, Project: f.ProjectID}
	out := []scopeTag{{project: space(own), kind: tagOwn}}
	if f.ProjectID != "" {
		out = append(out, scopeTag{project: space(memory.ProjectRef{Tenant: f.TenantID}), kind: tagGlobal})
	}
	if f.CrossProject {
		ps, err := s.recallProjects(ctx)
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
