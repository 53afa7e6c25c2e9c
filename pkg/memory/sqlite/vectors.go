package sqlite

import (
	"math"
	"slices"
	"strings"

	"github.com/engram-memory/engram/pkg/memory/vecindex"
)

// flatVecs serves a model's vector channel by exact search while the nodes
// load and its graph index is built in the background after Open (and
// always, WithBulkWrites). Writes made meanwhile are applied here and
// logged for replay into the new index. It keeps each unit vector as int8
// codes and a scale (vecindex.Quantize: a quarter of the float32 bytes),
// like the graphs (vecindex.WithCodesOnly), and scores a query against
// them with vecindex.DotCode.
type flatVecs struct {
	dim    int
	ids    []string
	rids   []uint32
	codes  [][]int8 // quantised unit vectors; nil: removed
	scales []float32
	at     map[string]int
	log    []vecOp
	// erased are the ids an erasure removed (erase): the graph built from
	// this set erases them after the replay.
	erased []string
}

type vecOp struct {
	id  string
	rid uint32
	vec []float32 // nil: remove
}

func newFlat(dim int) *flatVecs { return &flatVecs{dim: dim, at: map[string]int{}} }

func (f *flatVecs) add(id string, rid uint32, v []float32, logIt bool) {
	var logged []float32
	if logIt {
		logged = v
	}
	f.addUnit(id, rid, unit(v), logged)
}

// addUnit is add of a vector already made a unit vector (u, quantised
// here and not kept); logged, when not nil, is the vector to log for the
// replay.
func (f *flatVecs) addUnit(id string, rid uint32, u, logged []float32) {
	code := make([]int8, len(u))
	scale := vecindex.Quantize(code, u)
	if i, ok := f.at[id]; ok {
		f.codes[i], f.scales[i], f.rids[i] = code, scale, rid
	} else {
		f.at[id] = len(f.ids)
		f.ids = append(f.ids, id)
		f.rids = append(f.rids, rid)
		f.codes = append(f.codes, code)
		f.scales = append(f.scales, scale)
	}
	if logged != nil {
		f.log = append(f.log, vecOp{id: id, rid: rid, vec: logged})
	}
}

func (f *flatVecs) remove(id string) {
	if i, ok := f.at[id]; ok {
		f.codes[i] = nil
		delete(f.at, id)
	}
	f.log = append(f.log, vecOp{id: id})
}

func unit(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	n = math.Sqrt(n)
	u := make([]float32, len(v))
	if n == 0 {
		return u
	}
	for i, x := range v {
		u[i] = float32(float64(x) / n)
	}
	return u
}

// similarities is the cosine of q to the vector of each id that has one
// (within the quantisation error).
func (f *flatVecs) similarities(q []float32, ids []string) []vecindex.Hit {
	if len(q) != f.dim {
		return nil
	}
	qu := unit(q)
	out := make([]vecindex.Hit, 0, len(ids))
	for _, id := range ids {
		i, ok := f.at[id]
		if !ok || f.codes[i] == nil {
			continue
		}
		out = append(out, vecindex.Hit{ID: id, Score: vecindex.DotCode(qu, f.codes[i], f.scales[i])})
	}
	return out
}

// snapshot returns the live vectors as codes and scales (a code is never
// changed in place: a write replaces the slice) and empties the log: the
// graph built from the snapshot replays only what is logged after it.
func (f *flatVecs) snapshot() (ids []string, rids []uint32, codes [][]int8, scales []float32) {
	for i, c := range f.codes {
		if c != nil {
			ids, rids = append(ids, f.ids[i]), append(rids, f.rids[i])
			codes, scales = append(codes, c), append(scales, f.scales[i])
		}
	}
	f.log = nil
	return ids, rids, codes, scales
}

// decode makes a vector back from its code and scale (code x scale): the
// graph built from it quantises it to the same code.
func decode(code []int8, scale float32) []float32 {
	v := make([]float32, len(code))
	for j, c := range code {
		v[j] = float32(c) * scale
	}
	return v
}

// search is an exact cosine scan with the accept filter (on the row id),
// best first, in two passes like the graphs' exact scan on codes: the
// integer kernel (the query quantised too) keeps the best 4k+16 of the
// accepted vectors, which are then scored with the float32 query.
func (f *flatVecs) search(q []float32, k int, accept func(rid uint32) bool) []vecindex.Hit {
	if len(q) != f.dim || k <= 0 {
		return nil
	}
	qu := unit(q)
	qcode := make([]int8, f.dim)
	qscale := vecindex.Quantize(qcode, qu)
	keep := 4*k + 16
	type cand struct {
		i     int
		score float32
	}
	var best []cand // best first
	for i, c := range f.codes {
		if c == nil || !accept(f.rids[i]) {
			continue
		}
		s := qscale * f.scales[i] * float32(vecindex.DotCodes(qcode, c))
		if len(best) == keep && s <= best[keep-1].score {
			continue
		}
		at, _ := slices.BinarySearchFunc(best, s, func(a cand, s float32) int {
			if a.score > s {
				return -1
			}
			return 1
		})
		best = slices.Insert(best, at, cand{i, s})
		if len(best) > keep {
			best = best[:keep]
		}
	}
	out := make([]vecindex.Hit, len(best))
	for j, c := range best {
		out[j] = vecindex.Hit{ID: f.ids[c.i], Score: vecindex.DotCode(qu, f.codes[c.i], f.scales[c.i])}
	}
	slices.SortFunc(out, func(a, b vecindex.Hit) int {
		if hitBefore(a, b) {
			return -1
		}
		if hitBefore(b, a) {
			return 1
		}
		return 0
	})
	return out[:min(k, len(out))]
}

func hitBefore(a, b vecindex.Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return strings.Compare(a.ID, b.ID) < 0
}
