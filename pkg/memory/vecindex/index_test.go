package vecindex

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"unsafe"
)

func randVec(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// clustered returns n vectors around c random centres with noise spread,
// the shape real text embeddings have.
func clustered(r *rand.Rand, n, dim, c int, spread float64) [][]float32 {
	centres := make([][]float32, c)
	for i := range centres {
		centres[i] = randVec(r, dim)
		normalize(centres[i], centres[i])
	}
	out := make([][]float32, n)
	for i := range out {
		cen := centres[r.IntN(c)]
		v := make([]float32, dim)
		for j := range v {
			v[j] = cen[j] + float32(r.NormFloat64()*spread/math.Sqrt(float64(dim)))
		}
		out[i] = v
	}
	return out
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("n%06d", i)
	}
	return out
}

// bruteForce is the reference: exact cosine top-k over the given vectors.
func bruteForce(idList []string, vecs [][]float32, q []float32, k int, accept func(string) bool) []Hit {
	units := make([][]float32, len(vecs))
	for i, v := range vecs {
		units[i] = make([]float32, len(v))
		normalize(units[i], v)
	}
	return bruteForceUnits(idList, units, q, k, accept)
}

// bruteForceUnits is bruteForce over vectors already normalised.
func bruteForceUnits(idList []string, units [][]float32, q []float32, k int, accept func(string) bool) []Hit {
	qu := make([]float32, len(q))
	normalize(qu, q)
	all := make([]Hit, 0, len(units))
	for i, u := range units {
		if accept != nil && !accept(idList[i]) {
			continue
		}
		all = append(all, Hit{ID: idList[i], Score: dot(qu, u)})
	}
	slices.SortFunc(all, func(a, b Hit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	if len(all) > k {
		all = all[:k]
	}
	return all
}

// TestDotMatchesNaive checks every kernel (the AVX2 one where the CPU has
// it, and the plain Go one) against a float64 sum, at lengths around the
// kernels' 8-, 16- and 32-float steps.
func TestDotMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	naive := dot64
	check := func(name string, n int, got float32, want float64) {
		t.Helper()
		if math.Abs(float64(got)-want) > 1e-4*(1+math.Abs(want)) {
			t.Errorf("%s len %d = %v, want %v", name, n, got, want)
		}
	}
	lens := []int{383, 384, 385, 768, 1536}
	for n := 0; n <= 70; n++ {
		lens = append(lens, n)
	}
	for _, n := range lens {
		q, a, b, c, d := randVec(r, n), randVec(r, n), randVec(r, n), randVec(r, n), randVec(r, n)
		check("dot", n, dot(q, a), naive(q, a))
		check("dotGeneric", n, dotGeneric(q, a), naive(q, a))
		ga, gb, gc, gd := dot4(q, a, b, c, d)
		pa, pb, pc, pd := dot4Generic(q, a, b, c, d)
		for i, v := range [][]float32{a, b, c, d} {
			want := naive(q, v)
			check(fmt.Sprintf("dot4[%d]", i), n, []float32{ga, gb, gc, gd}[i], want)
			check(fmt.Sprintf("dot4Generic[%d]", i), n, []float32{pa, pb, pc, pd}[i], want)
		}
	}
}

func TestDotI8MatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	code := func(n int, extreme bool) []int8 {
		c := make([]int8, n)
		for i := range c {
			if extreme {
				c[i] = []int8{-127, 127}[r.IntN(2)] // the largest products the codes make
			} else {
				c[i] = int8(r.IntN(255) - 127)
			}
		}
		return c
	}
	naive := func(a, b []int8) int32 {
		var s int64
		for i := range a {
			s += int64(a[i]) * int64(b[i])
		}
		return int32(s)
	}
	lens := []int{383, 384, 385, 768, 1536, 4096}
	for n := 0; n <= 70; n++ {
		lens = append(lens, n)
	}
	for _, n := range lens {
		for _, extreme := range []bool{false, true} {
			q, a, b, c, d := code(n, extreme), code(n, extreme), code(n, extreme), code(n, extreme), code(n, extreme)
			if got, want := dotI8(q, a), naive(q, a); got != want {
				t.Errorf("dotI8 len %d = %d, want %d", n, got, want)
			}
			if got, want := dotI8Generic(q, a), naive(q, a); got != want {
				t.Errorf("dotI8Generic len %d = %d, want %d", n, got, want)
			}
			ga, gb, gc, gd := dot4I8(q, a, b, c, d)
			pa, pb, pc, pd := dot4I8Generic(q, a, b, c, d)
			for i, v := range [][]int8{a, b, c, d} {
				want := naive(q, v)
				if got := []int32{ga, gb, gc, gd}[i]; got != want {
					t.Errorf("dot4I8[%d] len %d = %d, want %d", i, n, got, want)
				}
				if got := []int32{pa, pb, pc, pd}[i]; got != want {
					t.Errorf("dot4I8Generic[%d] len %d = %d, want %d", i, n, got, want)
				}
			}
		}
	}
}

func TestQuantize(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 7, 384} {
		v := randVec(r, n)
		normalize(v, v)
		c := make([]int8, n)
		s := quantize(c, v)
		for i := range v {
			if d := math.Abs(float64(v[i]) - float64(c[i])*float64(s)); d > float64(s)/2+1e-7 {
				t.Fatalf("len %d component %d: %v coded %d x %v (error %v > half a step)", n, i, v[i], c[i], s, d)
			}
		}
		if !slices.ContainsFunc(c, func(x int8) bool { return x == 127 || x == -127 }) {
			t.Errorf("len %d: no code reaches the scale's end", n)
		}
	}
	zero := []int8{5, 5}
	if s := quantize(zero, []float32{0, 0}); s != 0 || zero[0] != 0 || zero[1] != 0 {
		t.Errorf("zero vector: scale %v codes %v", s, zero)
	}
}

func TestAddValidation(t *testing.T) {
	ix := New(4)
	if err := ix.Add("a", []float32{1, 2, 3}); !errors.Is(err, ErrDimension) {
		t.Errorf("short vector: err = %v, want ErrDimension", err)
	}
	if err := ix.Add("a", []float32{1, 2, 3, 4, 5}); !errors.Is(err, ErrDimension) {
		t.Errorf("long vector: err = %v, want ErrDimension", err)
	}
	if err := ix.Add("a", []float32{0, 0, 0, 0}); !errors.Is(err, ErrBadVector) {
		t.Errorf("zero vector: err = %v, want ErrBadVector", err)
	}
	if err := ix.Add("a", []float32{1, float32(math.NaN()), 0, 0}); !errors.Is(err, ErrBadVector) {
		t.Errorf("NaN vector: err = %v, want ErrBadVector", err)
	}
	if err := ix.Add("a", []float32{float32(math.Inf(1)), 0, 0, 0}); !errors.Is(err, ErrBadVector) {
		t.Errorf("Inf vector: err = %v, want ErrBadVector", err)
	}
	if err := ix.Add("", []float32{1, 0, 0, 0}); !errors.Is(err, ErrEmptyID) {
		t.Errorf("empty id: err = %v, want ErrEmptyID", err)
	}
	if ix.Len() != 0 {
		t.Fatalf("Len after rejected adds = %d, want 0", ix.Len())
	}
	// A good add after bad ones works, and a bad replacement keeps the old vector.
	if err := ix.Add("a", []float32{1, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Add("a", []float32{1, 0}); !errors.Is(err, ErrDimension) {
		t.Fatalf("bad replacement: err = %v", err)
	}
	hits := ix.Search([]float32{1, 0, 0, 0}, 1, nil)
	if len(hits) != 1 || hits[0].ID != "a" || math.Abs(float64(hits[0].Score)-1) > 1e-6 {
		t.Fatalf("after bad replacement: %v, want a with score 1", hits)
	}
	// Wrong-dimension and zero queries have no neighbours.
	if got := ix.Search([]float32{1, 0}, 1, nil); got != nil {
		t.Errorf("wrong-dimension query = %v, want nil", got)
	}
	if got := ix.Search([]float32{0, 0, 0, 0}, 1, nil); got != nil {
		t.Errorf("zero query = %v, want nil", got)
	}
	if got := ix.Search([]float32{1, 0, 0, 0}, 0, nil); got != nil {
		t.Errorf("k=0 = %v, want nil", got)
	}
}

func TestAddBatchValidation(t *testing.T) {
	ix := New(3)
	err := ix.AddBatch([]string{"a", "b", "", "d"}, [][]float32{{1, 0, 0}, {1, 0}, {0, 1, 0}, {0, 0, 0}})
	for _, want := range []error{ErrDimension, ErrEmptyID, ErrBadVector} {
		if !errors.Is(err, want) {
			t.Errorf("batch err = %v, want it to wrap %v", err, want)
		}
	}
	if ix.Len() != 0 {
		t.Fatalf("Len after rejected batch = %d, want 0 (all or nothing)", ix.Len())
	}
	if err := ix.AddBatch([]string{"a"}, nil); err == nil {
		t.Error("mismatched lengths: no error")
	}
	if err := ix.AddBatch([]string{"a", "b", "a"}, [][]float32{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if ix.Len() != 2 {
		t.Fatalf("Len = %d, want 2 (duplicate id in batch counts once)", ix.Len())
	}
	if h := ix.Search([]float32{0, 0, 1}, 1, nil); len(h) != 1 || h[0].ID != "a" {
		t.Fatalf("later duplicate should win: %v", h)
	}
}

func TestAddReplaceRemove(t *testing.T) {
	for _, exact := range []bool{true, false} {
		t.Run(fmt.Sprintf("exact=%v", exact), func(t *testing.T) {
			opts := []Option{WithSeed(7)}
			if !exact {
				opts = append(opts, WithExactThreshold(1)) // always use the graph
			}
			const dim, n = 16, 600
			r := rand.New(rand.NewPCG(3, 4))
			ix := New(dim, opts...)
			names := ids(n)
			vecs := make([][]float32, n)
			for i := range vecs {
				vecs[i] = randVec(r, dim)
				if err := ix.Add(names[i], vecs[i]); err != nil {
					t.Fatal(err)
				}
			}
			if ix.Len() != n {
				t.Fatalf("Len = %d, want %d", ix.Len(), n)
			}
			// Each vector finds itself first with score ~1.
			for i := 0; i < n; i += 37 {
				h := ix.Search(vecs[i], 1, nil)
				if len(h) != 1 || h[0].ID != names[i] || h[0].Score < 0.9999 {
					t.Fatalf("self search %d: %v", i, h)
				}
			}
			// Replace: the id moves to a new vector; Len unchanged.
			target := randVec(r, dim)
			if err := ix.Add(names[5], target); err != nil {
				t.Fatal(err)
			}
			vecs[5] = target
			if ix.Len() != n {
				t.Fatalf("Len after replace = %d, want %d", ix.Len(), n)
			}
			if h := ix.Search(target, 1, nil); len(h) != 1 || h[0].ID != names[5] {
				t.Fatalf("replaced vector not found: %v", h)
			}
			// Remove half of them (enough to trigger cleanup); none comes back.
			removed := map[string]bool{}
			for i := 0; i < n; i += 2 {
				ix.Remove(names[i])
				removed[names[i]] = true
			}
			ix.Remove("never-added")
			if ix.Len() != n/2 {
				t.Fatalf("Len after removals = %d, want %d", ix.Len(), n/2)
			}
			for i := 0; i < n; i += 7 {
				for _, h := range ix.Search(vecs[i], 10, nil) {
					if removed[h.ID] {
						t.Fatalf("removed id %s returned", h.ID)
					}
				}
				if !removed[names[i]] {
					if h := ix.Search(vecs[i], 1, nil); len(h) != 1 || h[0].ID != names[i] {
						t.Fatalf("live %s not found after removals: %v", names[i], h)
					}
				}
			}
			// Re-adding a removed id works.
			if err := ix.Add(names[0], vecs[0]); err != nil {
				t.Fatal(err)
			}
			if h := ix.Search(vecs[0], 1, nil); len(h) != 1 || h[0].ID != names[0] {
				t.Fatalf("re-added id not found: %v", h)
			}
			if ix.Len() != n/2+1 {
				t.Fatalf("Len after re-add = %d, want %d", ix.Len(), n/2+1)
			}
			// Remove everything, then the index still works.
			for _, id := range names {
				ix.Remove(id)
			}
			if ix.Len() != 0 || ix.Search(vecs[1], 3, nil) != nil {
				t.Fatalf("empty index: Len %d, search not empty", ix.Len())
			}
			if err := ix.Add("z", vecs[1]); err != nil {
				t.Fatal(err)
			}
			if h := ix.Search(vecs[1], 3, nil); len(h) != 1 || h[0].ID != "z" {
				t.Fatalf("after emptying and re-adding: %v", h)
			}
		})
	}
}

func TestSearchOrderAndTies(t *testing.T) {
	ix := New(2)
	must(t, ix.Add("b", []float32{1, 0}))
	must(t, ix.Add("a", []float32{2, 0})) // same direction as b: tie, broken by id
	must(t, ix.Add("c", []float32{1, 1}))
	must(t, ix.Add("d", []float32{-1, 0}))
	got := ix.Search([]float32{3, 0}, 10, nil)
	want := []string{"a", "b", "c", "d"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i, h := range got {
		if h.ID != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	if math.Abs(float64(got[2].Score)-math.Sqrt2/2) > 1e-6 || math.Abs(float64(got[3].Score)+1) > 1e-6 {
		t.Fatalf("scores are not cosines: %v", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentAddSearch(t *testing.T) {
	const dim = 32
	ix := New(dim, WithExactThreshold(50), WithSeed(11))
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 99))
			for i := range 300 {
				id := fmt.Sprintf("w%d-%d", w, i%200) // some replacements
				if err := ix.Add(id, randVec(r, dim)); err != nil {
					t.Error(err)
					return
				}
				if i%5 == 0 {
					ix.Remove(fmt.Sprintf("w%d-%d", w, i/3))
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		batch := make([][]float32, 100)
		r := rand.New(rand.NewPCG(5, 5))
		for i := range batch {
			batch[i] = randVec(r, dim)
		}
		if err := ix.AddBatch(ids(100), batch); err != nil {
			t.Error(err)
		}
	}()
	for s := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(s), 7))
			for range 300 {
				hits := ix.Search(randVec(r, dim), 5, func(id string) bool { return id[0] == 'w' })
				for i := 1; i < len(hits); i++ {
					if hits[i].Score > hits[i-1].Score {
						t.Error("hits not sorted")
						return
					}
				}
				_ = ix.Len()
			}
		}()
	}
	wg.Wait()
	if ix.Len() == 0 {
		t.Fatal("nothing stored")
	}
}

// TestSearchTagged: a filter on tags answers what the same filter on ids
// answers, hits carry their tags, and re-adding an id replaces its tag.
func TestSearchTagged(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{500, 5000} { // exact scan, then graph walk
		ix := New(32, WithSeed(1), WithExactThreshold(1000))
		ids := make([]string, n)
		tags := make([]uint32, n)
		vecs := make([][]float32, n)
		tagOf := map[string]uint32{}
		for i := range ids {
			ids[i], tags[i], vecs[i] = fmt.Sprintf("v%d", i), uint32(i*7+1), randVec(r, 32)
			tagOf[ids[i]] = tags[i]
		}
		if err := ix.AddBatchTagged(ids, tags[:n-1], vecs); err == nil {
			t.Fatal("a tags slice shorter than ids was accepted")
		}
		if err := ix.AddBatchTagged(ids, tags, vecs); err != nil {
			t.Fatal(err)
		}
		// v3 comes back with another tag.
		tagOf["v3"] = 99991
		if err := ix.AddTagged("v3", 99991, vecs[3]); err != nil {
			t.Fatal(err)
		}
		even := func(tag uint32) bool { return tag%2 == 1 } // i*7+1 odd <=> i even
		for qi := range 20 {
			q := vecs[qi*13%n]
			got := ix.SearchTagged(q, 10, even)
			want := ix.Search(q, 10, func(id string) bool { return even(tagOf[id]) })
			if len(got) != 10 || len(got) != len(want) {
				t.Fatalf("n=%d: %d tagged hits, %d by id", n, len(got), len(want))
			}
			for i := range got {
				if got[i].ID != want[i].ID || got[i].Tag != tagOf[got[i].ID] || !even(got[i].Tag) {
					t.Fatalf("n=%d hit %d: %+v, by id %+v (tag %d)", n, i, got[i], want[i], tagOf[got[i].ID])
				}
			}
		}
		if h := ix.SearchTagged(vecs[3], 1, nil); len(h) != 1 || h[0].ID != "v3" || h[0].Tag != 99991 {
			t.Fatalf("re-added v3: %+v", h)
		}
	}
}

// TestSimilarities: exact cosines for the ids asked, in their order, with
// their tags; removed and unknown ids left out; a bad query gets nothing.
func TestSimilarities(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ix := New(16, WithSeed(1))
	vecs := map[string][]float32{}
	for i := range 50 {
		id := fmt.Sprintf("v%d", i)
		vecs[id] = randVec(r, 16)
		if err := ix.AddTagged(id, uint32(i+100), vecs[id]); err != nil {
			t.Fatal(err)
		}
	}
	ix.Remove("v7")
	q := randVec(r, 16)
	got := ix.Similarities(q, []string{"v3", "v7", "nope", "v42"})
	if len(got) != 2 || got[0].ID != "v3" || got[1].ID != "v42" || got[0].Tag != 103 || got[1].Tag != 142 {
		t.Fatalf("similarities %+v, want v3 and v42 with their tags", got)
	}
	cos := func(a, b []float32) float64 { return dot64(a, b) / math.Sqrt(dot64(a, a)*dot64(b, b)) }
	for _, h := range got {
		if want := cos(q, vecs[h.ID]); math.Abs(float64(h.Score)-want) > 1e-5 {
			t.Errorf("%s: %v, want %v", h.ID, h.Score, want)
		}
	}
	if got := ix.Similarities(q[:8], []string{"v3"}); got != nil {
		t.Errorf("a query of another dimension: %+v", got)
	}
}

// dot64 is the dot product summed in float64.
func dot64(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// TestQuantizeMatchesRound: quantize's codes and scale are those of the
// largest magnitude found with max and codes rounded with math.Round (as
// it was written first), on random vectors and on components that land
// exactly on a half step.
func TestQuantizeMatchesRound(t *testing.T) {
	reference := func(dst []int8, v []float32) float32 {
		var m float32
		for _, x := range v {
			m = max(m, x, -x)
		}
		if m == 0 {
			clear(dst)
			return 0
		}
		inv := 127 / m
		for i, x := range v {
			dst[i] = int8(math.Round(float64(x * inv)))
		}
		return m / 127
	}
	r := rand.New(rand.NewPCG(9, 10))
	halves := 0
	for round := range 5000 {
		n := 1 + r.IntN(400)
		v := randVec(r, n)
		if round%3 == 0 {
			normalize(v, v)
		}
		if round%5 == 0 {
			// components a whole or half step of the scale: 127 / 127 = 1
			// once the largest is 1
			v[0] = 1
			for i := 1; i < n; i++ {
				v[i] = float32(r.IntN(255)-127) / 2 / 127 * 2
				if r.IntN(2) == 0 {
					v[i] = (float32(r.IntN(254)-127) + 0.5) / 127
				}
			}
		}
		want, got := make([]int8, n), make([]int8, n)
		ws, gs := reference(want, v), quantize(got, v)
		if ws != gs || !slices.Equal(want, got) {
			t.Fatalf("round %d: scale %v codes %v, want %v %v (vector %v)", round, gs, got, ws, want, v)
		}
		for i, x := range v {
			if f := x * (127 / max(v[0], 1e-30)); round%5 == 0 && f == float32(math.Trunc(float64(f)))+0.5 {
				halves++
			}
			_ = i
		}
	}
	if halves < 1000 {
		t.Errorf("only %d components on a half step: the test does not exercise rounding ties", halves)
	}
}

// TestReserveGrowsOnce: vectors added batch by batch after Reserve fill
// storage grown once, exactly (a load adds them so; grown batch by batch
// the arrays kept up to a quarter spare).
func TestReserveGrowsOnce(t *testing.T) {
	const n, dim, batch = 1000, 64, 100
	rng := rand.New(rand.NewPCG(3, 4))
	for _, reserve := range []bool{true, false} {
		ix := New(dim, WithCodesOnly(), WithSeed(1))
		if reserve {
			ix.Reserve(n)
		}
		var codes *int8
		var v7 []float32
		grew := 0
		for b := 0; b < n; b += batch {
			ids := make([]string, batch)
			vecs := make([][]float32, batch)
			for i := range ids {
				ids[i] = fmt.Sprintf("v%d", b+i)
				vecs[i] = make([]float32, dim)
				for j := range vecs[i] {
					vecs[i][j] = rng.Float32() - 0.5
				}
			}
			if b == 0 {
				v7 = vecs[7]
			}
			if err := ix.AddBatch(ids, vecs); err != nil {
				t.Fatal(err)
			}
			if p := unsafe.SliceData(ix.codes); p != codes {
				codes, grew = p, grew+1
			}
		}
		spare := cap(ix.codes) - n*dim
		rows := cap(ix.links0) - n*ix.g.m0
		t.Logf("reserve %v: codes grew %d times, %d spare code bytes, %d spare link entries", reserve, grew, spare, rows)
		if reserve && (grew != 1 || spare > 8192 || rows > 2048) {
			t.Fatalf("reserved: storage grew %d times; %d code bytes and %d link entries spare", grew, spare, rows)
		}
		if !reserve && grew == 1 {
			t.Fatal("batches without Reserve grew storage once: the test cannot tell Reserve's effect")
		}
		if got := ix.Search(v7, 1, nil); len(got) != 1 || got[0].ID != "v7" {
			t.Fatalf("reserve %v: the nearest vector to v7 is %v", reserve, got)
		}
	}
}

// TestFootprintMatchesTheHeap: Footprint's parts add up to what an index
// takes of the live heap, within a tenth (the map's slack is estimated).
func TestFootprintMatchesTheHeap(t *testing.T) {
	const n, dim = 20000, 64
	rng := rand.New(rand.NewPCG(5, 6))
	ids := make([]string, n)
	vecs := make([][]float32, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("v%d", i)
		vecs[i] = randVec(rng, dim)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ix := New(dim, WithCodesOnly(), WithSeed(2))
	ix.Reserve(n)
	for b := 0; b < n; b += 2000 {
		if err := ix.AddBatch(ids[b:b+2000], vecs[b:b+2000]); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	v, g, m := ix.Footprint()
	heap := int(after.HeapAlloc) - int(before.HeapAlloc)
	t.Logf("heap %d bytes a vector; footprint: vectors %d, graph %d, ids %d", heap/n, v/n, g/n, m/n)
	if sum := v + g + m; sum < heap*9/10 || sum > heap*11/10 {
		t.Fatalf("footprint %d bytes, the index took %d of the heap", sum, heap)
	}
	runtime.KeepAlive(ix)
	runtime.KeepAlive(vecs)
}
