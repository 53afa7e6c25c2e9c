package redis

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// Field names of a node hash. Short names keep the hashes small; a zero
// value is not written at all.
const (
	fID        = "id"
	fSubkind   = "sk"
	fScope     = "sc"
	fProject   = "pj"
	fTenant    = "tn"
	fSession   = "ss"
	fLabel     = "lb"
	fBody      = "bd"
	fDigest    = "dg"
	fConf      = "cf"
	fWeight    = "wt"
	fAccess    = "ac"
	fUseful    = "us"
	fUnhelpful = "uh"
	fSource    = "so"
	fAsserted  = "ab"
	fReach     = "rc"
	fJudged    = "rj"
	fPinned    = "pn"
	fArchived  = "ar"
	fSuperBy   = "sb"
	fStale     = "sa"
	fValidFrom = "vf"
	fValidTo   = "vt"
	fPaths     = "pa"
	fEntities  = "en"
	fCreated   = "ca"
	fUpdated   = "ua"
	fAccessed  = "aa"
	fModel     = "em"
	fVector    = "vec"
)

// nodeFields lists every field but the vector, for reads that skip it.
var nodeFields = []string{fID, fSubkind, fScope, fProject, fTenant, fSession, fLabel, fBody, fDigest, fConf,
	fWeight, fAccess, fUseful, fUnhelpful, fSource, fAsserted, fReach, fJudged, fPinned, fArchived,
	fSuperBy, fStale, fValidFrom, fValidTo, fPaths, fEntities, fCreated, fUpdated, fAccessed, fModel}

// allFields is nodeFields and the vector.
var allFields = append(append([]string(nil), nodeFields...), fVector)

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func fmtTime(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

func parseTime(s string) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, n).UTC(), nil
}

// encodeVector is the little-endian float32 blob of v (also the FP32 form
// VADD and VSIM take).
func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func decodeVector(b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("vector blob of %d bytes is not a multiple of 4", len(b))
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

// encodeNode returns the attributes of n by field name (zero values left
// out): the form hashes had before packNode, which filterFields and
// vectorAttrs still read.
func encodeNode(n *memory.Node) map[string]any {
	m := make(map[string]any, 32)
	str := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	tm := func(k string, t time.Time) {
		if !t.IsZero() {
			m[k] = fmtTime(t)
		}
	}
	in := func(k string, v int) {
		if v != 0 {
			m[k] = strconv.Itoa(v)
		}
	}
	flag := func(k string, v bool) {
		if v {
			m[k] = "1"
		}
	}
	str(fID, n.ID)
	str(fSubkind, string(n.Subkind))
	str(fScope, string(n.Scope))
	str(fProject, n.ProjectID)
	str(fTenant, n.TenantID)
	str(fSession, n.SessionID)
	str(fLabel, n.Label)
	str(fBody, n.Body)
	str(fDigest, n.Digest)
	m[fConf] = fmtFloat(n.Confidence)
	m[fWeight] = fmtFloat(n.Weight)
	in(fAccess, n.Access)
	in(fUseful, n.Useful)
	in(fUnhelpful, n.Unhelpful)
	str(fSource, string(n.Source))
	str(fAsserted, string(n.AssertedBy))
	str(fReach, string(n.Reach))
	flag(fJudged, n.ReachJudged)
	flag(fPinned, n.Pinned)
	tm(fArchived, n.ArchivedAt)
	str(fSuperBy, n.SupersededBy)
	tm(fStale, n.StaleAt)
	tm(fValidFrom, n.ValidFrom)
	tm(fValidTo, n.ValidTo)
	if len(n.Paths) > 0 {
		b, _ := json.Marshal(n.Paths)
		m[fPaths] = string(b)
	}
	if len(n.Entities) > 0 {
		b, _ := json.Marshal(n.Entities)
		m[fEntities] = string(b)
	}
	tm(fCreated, n.CreatedAt)
	tm(fUpdated, n.UpdatedAt)
	tm(fAccessed, n.AccessedAt)
	if len(n.Embedding) > 0 {
		m[fModel] = n.EmbeddingModel
		m[fVector] = encodeVector(n.Embedding)
	}
	return m
}

// decodeNode rebuilds a node from its hash: the packed value and the
// vector, or (written before packing) one field per attribute. A hash
// with neither a packed value nor an id is not a node (ok false).
func decodeNode(h map[string]string) (n memory.Node, ok bool, err error) {
	if pk := h[fPacked]; pk != "" {
		if n, err = unpackNode(pk); err != nil {
			return n, false, err
		}
		if v := h[fVector]; v != "" {
			if n.Embedding, err = decodeVector([]byte(v)); err != nil {
				return n, false, fmt.Errorf("node %s: field %s: %w", n.ID, fVector, err)
			}
		}
		return n, true, nil
	}
	if h[fID] == "" {
		return memory.Node{}, false, nil
	}
	bad := func(field string, e error) error {
		return fmt.Errorf("node %s: field %s: %w", h[fID], field, e)
	}
	n.ID = h[fID]
	n.Subkind = memory.Subkind(h[fSubkind])
	n.Scope = memory.Scope(h[fScope])
	n.ProjectID = h[fProject]
	n.TenantID = h[fTenant]
	n.SessionID = h[fSession]
	n.Label = h[fLabel]
	n.Body = h[fBody]
	n.Digest = h[fDigest]
	n.Source = memory.Source(h[fSource])
	n.AssertedBy = memory.Authority(h[fAsserted])
	n.Reach = memory.Reach(h[fReach])
	n.ReachJudged = h[fJudged] == "1"
	n.Pinned = h[fPinned] == "1"
	n.SupersededBy = h[fSuperBy]
	n.EmbeddingModel = h[fModel]
	for _, f := range []struct {
		k string
		p *float64
	}{{fConf, &n.Confidence}, {fWeight, &n.Weight}} {
		if v, ok := h[f.k]; ok {
			x, e := strconv.ParseFloat(v, 64)
			if e != nil {
				return n, false, bad(f.k, e)
			}
			*f.p = x
		}
	}
	for _, f := range []struct {
		k string
		p *int
	}{{fAccess, &n.Access}, {fUseful, &n.Useful}, {fUnhelpful, &n.Unhelpful}} {
		if v, ok := h[f.k]; ok {
			x, e := strconv.Atoi(v)
			if e != nil {
				return n, false, bad(f.k, e)
			}
			*f.p = x
		}
	}
	for _, f := range []struct {
		k string
		p *time.Time
	}{{fArchived, &n.ArchivedAt}, {fStale, &n.StaleAt}, {fValidFrom, &n.ValidFrom}, {fValidTo, &n.ValidTo},
		{fCreated, &n.CreatedAt}, {fUpdated, &n.UpdatedAt}, {fAccessed, &n.AccessedAt}} {
		if v, ok := h[f.k]; ok && v != "" {
			t, e := parseTime(v)
			if e != nil {
				return n, false, bad(f.k, e)
			}
			*f.p = t
		}
	}
	if v := h[fPaths]; v != "" {
		if e := json.Unmarshal([]byte(v), &n.Paths); e != nil {
			return n, false, bad(fPaths, e)
		}
	}
	if v := h[fEntities]; v != "" {
		if e := json.Unmarshal([]byte(v), &n.Entities); e != nil {
			return n, false, bad(fEntities, e)
		}
	}
	if v := h[fVector]; v != "" {
		vec, e := decodeVector([]byte(v))
		if e != nil {
			return n, false, bad(fVector, e)
		}
		n.Embedding = vec
	}
	return n, true, nil
}

// fieldsToMap pairs HMGET results with their field names.
func fieldsToMap(fields []string, vals []any) map[string]string {
	h := make(map[string]string, len(fields))
	for i, f := range fields {
		if i < len(vals) {
			if s, ok := vals[i].(string); ok {
				h[f] = s
			}
		}
	}
	return h
}

// fPacked is the field that holds every attribute but the vector in one
// value (packNode): a node is read with one field instead of one per
// attribute, which the per-turn candidate load (about 120 nodes) pays for
// in server time and in decoding. Hashes written before it hold one field
// per attribute (the names above); decodeNode reads both forms and the
// next write of such a node rewrites it packed.
const fPacked = "pk"

// packVersion is the first byte of a packed node.
const packVersion = 1

// Bits of a packed node's flags byte.
const (
	packJudged = 1 << iota
	packPinned
)

// packNode encodes every attribute of n but the vector: the version byte,
// then strings as uvarint length and bytes, confidence and weight as
// float64 bits, the counters as varints, a flags byte, the times as a
// presence byte (bit i: time i is set) and their Unix nanoseconds as
// varints, the paths as a count and strings, the entities as JSON, and,
// for a node of a tenant other than the default one, the tenant id (a
// default-tenant node packs as it did before tenants).
func packNode(n *memory.Node) string {
	size := 48 + len(n.TenantID) + len(n.ID) + len(n.Label) + len(n.Body) + len(n.Digest) + len(n.ProjectID) + len(n.SessionID) +
		len(n.SupersededBy) + len(n.EmbeddingModel) + 8*7
	for _, p := range n.Paths {
		size += len(p) + 2
	}
	b := make([]byte, 0, size)
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = append(b, packVersion)
	for _, s := range []string{n.ID, string(n.Subkind), string(n.Scope), n.ProjectID, n.SessionID, n.Label, n.Body,
		n.Digest, string(n.Source), string(n.AssertedBy), string(n.Reach), n.SupersededBy, n.EmbeddingModel} {
		str(s)
	}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(n.Confidence))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(n.Weight))
	b = binary.AppendVarint(b, int64(n.Access))
	b = binary.AppendVarint(b, int64(n.Useful))
	b = binary.AppendVarint(b, int64(n.Unhelpful))
	var flags byte
	if n.ReachJudged {
		flags |= packJudged
	}
	if n.Pinned {
		flags |= packPinned
	}
	b = append(b, flags)
	times := packTimes(n)
	var present byte
	for i, t := range times {
		if !t.IsZero() {
			present |= 1 << i
		}
	}
	b = append(b, present)
	for _, t := range times {
		if !t.IsZero() {
			b = binary.AppendVarint(b, t.UnixNano())
		}
	}
	b = binary.AppendUvarint(b, uint64(len(n.Paths)))
	for _, p := range n.Paths {
		str(p)
	}
	ents := ""
	if len(n.Entities) > 0 {
		j, _ := json.Marshal(n.Entities)
		ents = string(j)
	}
	str(ents)
	if n.TenantID != "" {
		str(n.TenantID)
	}
	return string(b)
}

// packTimes lists the times of a packed node in their order.
func packTimes(n *memory.Node) [7]time.Time {
	return [7]time.Time{n.ArchivedAt, n.StaleAt, n.ValidFrom, n.ValidTo, n.CreatedAt, n.UpdatedAt, n.AccessedAt}
}

// errPacked reports a packed node that ends early or holds a bad value.
var errPacked = errors.New("malformed packed node")

// unpackNode decodes packNode's encoding. Strings share one copy of s.
func unpackNode(s string) (memory.Node, error) {
	var n memory.Node
	if len(s) == 0 || s[0] != packVersion {
		return n, fmt.Errorf("%w: unknown version", errPacked)
	}
	i := 1
	bad := false
	uvarint := func() uint64 {
		if bad {
			return 0
		}
		v, w := uvarintAt(s, i)
		if w <= 0 {
			bad = true
			return 0
		}
		i += w
		return v
	}
	varint := func() int64 {
		u := uvarint()
		x := int64(u >> 1)
		if u&1 != 0 {
			x = ^x
		}
		return x
	}
	str := func() string {
		l := uvarint()
		if bad || l > uint64(len(s)-i) {
			bad = true
			return ""
		}
		v := s[i : i+int(l)]
		i += int(l)
		return v
	}
	u64 := func() uint64 {
		if bad || len(s)-i < 8 {
			bad = true
			return 0
		}
		v := binary.LittleEndian.Uint64([]byte(s[i : i+8]))
		i += 8
		return v
	}
	byt := func() byte {
		if bad || i >= len(s) {
			bad = true
			return 0
		}
		i++
		return s[i-1]
	}
	n.ID = str()
	n.Subkind = memory.Subkind(str())
	n.Scope = memory.Scope(str())
	n.ProjectID = str()
	n.SessionID = str()
	n.Label = str()
	n.Body = str()
	n.Digest = str()
	n.Source = memory.Source(str())
	n.AssertedBy = memory.Authority(str())
	n.Reach = memory.Reach(str())
	n.SupersededBy = str()
	n.EmbeddingModel = str()
	n.Confidence = math.Float64frombits(u64())
	n.Weight = math.Float64frombits(u64())
	n.Access = int(varint())
	n.Useful = int(varint())
	n.Unhelpful = int(varint())
	flags := byt()
	n.ReachJudged = flags&packJudged != 0
	n.Pinned = flags&packPinned != 0
	present := byt()
	for j, p := range []*time.Time{&n.ArchivedAt, &n.StaleAt, &n.ValidFrom, &n.ValidTo, &n.CreatedAt, &n.UpdatedAt, &n.AccessedAt} {
		if present&(1<<j) != 0 {
			*p = time.Unix(0, varint()).UTC()
		}
	}
	if np := uvarint(); np > 0 && !bad {
		if np > uint64(len(s)-i) {
			bad = true
		} else {
			n.Paths = make([]string, np)
			for j := range n.Paths {
				n.Paths[j] = str()
			}
		}
	}
	if ents := str(); ents != "" && !bad {
		if err := json.Unmarshal([]byte(ents), &n.Entities); err != nil {
			return n, fmt.Errorf("%w: entities: %v", errPacked, err)
		}
	}
	if i < len(s) && !bad {
		n.TenantID = str()
	}
	if bad || i != len(s) {
		return n, fmt.Errorf("%w at byte %d of %d", errPacked, i, len(s))
	}
	return n, nil
}

// uvarintAt is binary.Uvarint on s from i, without copying s.
func uvarintAt(s string, i int) (uint64, int) {
	var x uint64
	var shift uint
	for j := 0; i+j < len(s); j++ {
		c := s[i+j]
		if j == binary.MaxVarintLen64 {
			return 0, -1
		}
		if c < 0x80 {
			if j == binary.MaxVarintLen64-1 && c > 1 {
				return 0, -1
			}
			return x | uint64(c)<<shift, j + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, 0
}
