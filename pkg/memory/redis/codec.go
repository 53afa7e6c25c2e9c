package redis

import (
	"encoding/binary"
	"encoding/json"
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
var nodeFields = []string{fID, fSubkind, fScope, fProject, fSession, fLabel, fBody, fDigest, fConf,
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

// encodeNode returns the hash fields of n (zero values left out).
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

// decodeNode rebuilds a node from its hash fields. A hash without an id is
// not a node (ok false).
func decodeNode(h map[string]string) (n memory.Node, ok bool, err error) {
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
