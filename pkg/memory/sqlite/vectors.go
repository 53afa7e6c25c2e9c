package sqlite

import (
	"math"
	"slices"
	"strings"

	"github.com/engram-memory/engram/pkg/memory/vecindex"
)

// flatVecs serves a model's vector channel by exact search while the nodes
// load and its graph index is built in the background after Open. Writes
// made meanwhile are applied here and logged for replay into the new index.
type flatVecs struct {
	dim  int
	ids  []string
	rids []uint32
	vecs [][]float32 // unit vectors; nil: removed
	at   map[string]int
	log  []vecOp
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

// addUnit is add of a vector already made a unit vector (u); logged, when
// not nil, is the vector to log for the replay.
func (f *flatVecs) addUnit(id string, rid uint32, u, logged []float32) {
	if i, ok := f.at[id]; ok {
		f.vecs[i], f.rids[i] = u, rid
	} else {
		f.at[id] = len(f.ids)
		f.ids = append(f.ids, id)
		f.rids = append(f.rids, rid)
		f.vecs = append(f.vecs, u)
	}
	if logged != nil {
		f.log = append(f.log, vecOp{id: id, rid: rid, vec: logged})
	}
}

func (f *flatVecs) remove(id string) {
	if i, ok := f.at[id]; ok {
		f.vecs[i] = nil
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

// similarities is the cosine of q to the vector of each id that has one.
func (f *flatVecs) similarities(q []float32, ids []string) []vecindex.Hit {
	if len(q) != f.dim {
		return nil
	}
	qu := unit(q)
	out := make([]vecindex.Hit, 0, len(ids))
	for _, id := range ids {
		i, ok := f.at[id]
		if !ok || f.vecs[i] == nil {
			continue
		}
		out = append(out, vecindex.Hit{ID: id, Score: vecindex.Dot(qu, f.vecs[i])})
	}
	return out
}

// snapshot returns the live vectors (unit length: never changed in place,
// a write replaces the slice) and empties the log: the graph built from
// the snapshot replays only what is logged after it.
func (f *flatVecs) snapshot() (ids []string, rids []uint32, vecs [][]float32) {
	for i, v := range f.vecs {
		if v != nil {
			ids, rids, vecs = append(ids, f.ids[i]), append(rids, f.rids[i]), append(vecs, v)
		}
	}
	f.log = nil
	return ids, rids, vecs
}

// search is an exact cosine scan with the accept filter (on the row id),
// best first.
func (f *flatVecs) search(q []float32, k int, accept func(rid uint32) bool) []vecindex.Hit {
	if len(q) != f.dim || k <= 0 {
		return nil
	}
	qu := unit(q)
	var out []vecindex.Hit
	for i, v := range f.vecs {
		if v == nil || !accept(f.rids[i]) {
			continue
		}
		h := vecindex.Hit{ID: f.ids[i], Score: vecindex.Dot(qu, v)}
		if len(out) == k && !hitBefore(h, out[k-1]) {
			continue
		}
		at, _ := slices.BinarySearchFunc(out, h, func(a, b vecindex.Hit) int {
			if hitBefore(a, b) {
				return -1
			}
			if hitBefore(b, a) {
				return 1
			}
			return 0
		})
		out = slices.Insert(out, at, h)
		if len(out) > k {
			out = out[:k]
		}
	}
	return out
}

func hitBefore(a, b vecindex.Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return strings.Compare(a.ID, b.ID) < 0
}
