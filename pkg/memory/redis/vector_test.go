package redis_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestVectorWidensAndFallsBack: when the nearest neighbours fail the
// filter, the vector channel widens its unfiltered search, and when even
// the widest finds too few visible ones it falls back to VSIM FILTER.
// Either way it must return the visible nodes nearest the query, in order
// (checked against an exact scan). The result cannot tell a widened search
// from the fallback (widening only saves the slow FILTER), so the first
// case checks the answer; the second fails without the fallback.
func TestVectorWidensAndFallsBack(t *testing.T) {
	c := testClient(t)
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	// float32: the hidden vectors differ in the fourth decimal of one of
	// four dimensions, which int8 codes cannot tell apart, and a graph of
	// identical points is not one HNSW can walk out of.
	s := openStore(t, c, redis.WithVectorQuantization("noquant"))
	ctx := t.Context()
	query := []float32{1, 0, 0, 0}
	for _, tc := range []struct {
		project string
		hidden  int // archived nodes nearer the query than any visible one
	}{
		{"widen", 100},     // 15 asked, then 60, then 240: all 120 seen
		{"fallback", 1100}, // 15 ... 1,000 asked, none visible: VSIM FILTER
	} {
		var nodes []memory.Node
		var want []memory.Scored
		for i := range tc.hidden {
			nodes = append(nodes, memory.Node{ID: fmt.Sprintf("%s-h%04d", tc.project, i), Subkind: memory.Decision,
				Scope: memory.ScopeProject, ProjectID: tc.project, Label: fmt.Sprintf("hidden %d", i), Confidence: 0.9,
				ArchivedAt: now, Embedding: []float32{1, float32(i) * 0.0001, 0.05, 0}, EmbeddingModel: "m"})
		}
		for i := range 20 {
			n := memory.Node{ID: fmt.Sprintf("%s-v%02d", tc.project, i), Subkind: memory.Decision,
				Scope: memory.ScopeProject, ProjectID: tc.project, Label: fmt.Sprintf("visible %d", i), Confidence: 0.9,
				Embedding: []float32{0.6, 1, 0.1 * float32(i), 0}, EmbeddingModel: "m"}
			nodes = append(nodes, n)
			want = append(want, memory.Scored{ID: n.ID, Score: cosine(query, n.Embedding)})
		}
		for i := 0; i < len(nodes); i += 300 {
			if err := s.PutBatch(ctx, nodes[i:min(i+300, len(nodes))], nil); err != nil {
				t.Fatal(err)
			}
		}
		slices.SortFunc(want, func(a, b memory.Scored) int {
			if a.Score > b.Score {
				return -1
			}
			return 1
		})
		got, err := s.Vector(ctx, "m", query, memory.Filter{ProjectID: tc.project}, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 5 {
			t.Fatalf("%s: %d results %v, want the 5 nearest visible %v", tc.project, len(got), got, want[:5])
		}
		for i := range got {
			if got[i].ID != want[i].ID || math.Abs(got[i].Score-want[i].Score) > 1e-5 {
				t.Fatalf("%s: got %v, want the 5 nearest visible %v", tc.project, got, want[:5])
			}
		}
	}
}

// TestVectorQuantization: new vector sets are int8 (Q8) by default, with
// scores within 0.01 of the exact cosine and the exact nearest neighbours
// found; a set created float32 (before the default changed, or with
// "noquant") keeps taking writes from a store whose default is Q8 — Redis
// refuses a VADD whose quantization differs from the set's — and stays
// float32.
func TestVectorQuantization(t *testing.T) {
	c := testClient(t)
	ctx := t.Context()
	quantType := func(key string) string {
		info, err := c.Do(ctx, "VINFO", key).Result()
		if err != nil {
			t.Fatalf("VINFO %s: %v", key, err)
		}
		switch v := info.(type) {
		case map[any]any:
			s, _ := v["quant-type"].(string)
			return s
		case []any:
			for i := 0; i+1 < len(v); i += 2 {
				if v[i] == "quant-type" {
					s, _ := v[i+1].(string)
					return s
				}
			}
		}
		t.Fatalf("VINFO %s: no quant-type in %v", key, info)
		return ""
	}
	rng := rand.New(rand.NewPCG(7, 9))
	randVec := func() []float32 {
		v := make([]float32, 384)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}

	s := openStore(t, c)
	query := randVec()
	var nodes []memory.Node
	for i := range 300 {
		v := randVec()
		// Mix in the query so that scores spread over (0, 1).
		w := float32(i%10) / 10
		for j := range v {
			v[j] = w*query[j] + (1-w)*v[j]
		}
		nodes = append(nodes, memory.Node{ID: fmt.Sprintf("q-%03d", i), Subkind: memory.Decision, Scope: memory.ScopeProject,
			ProjectID: "quant", Label: fmt.Sprintf("node %d", i), Confidence: 0.9, Embedding: v, EmbeddingModel: "m"})
	}
	if err := s.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
	if q := quantType(redis.VectorKey(s, "quant", "m")); q != "int8" {
		t.Fatalf("a new vector set is %q, want int8 (Q8)", q)
	}
	got, err := s.Vector(ctx, "m", query, memory.Filter{ProjectID: "quant"}, 20)
	if err != nil {
		t.Fatal(err)
	}
	exact := make(map[string]float64, len(nodes))
	var order []memory.Scored
	for _, n := range nodes {
		exact[n.ID] = cosine(query, n.Embedding)
		order = append(order, memory.Scored{ID: n.ID, Score: exact[n.ID]})
	}
	slices.SortFunc(order, func(a, b memory.Scored) int { return cmp.Compare(b.Score, a.Score) })
	if len(got) != 20 {
		t.Fatalf("%d results, want 20", len(got))
	}
	for _, g := range got {
		if math.Abs(g.Score-exact[g.ID]) > 0.01 {
			t.Fatalf("score of %s = %.4f, exact cosine %.4f", g.ID, g.Score, exact[g.ID])
		}
	}
	// The 30 nodes nearest the query (w = 0.9) are far ahead of the rest:
	// the 20 found are among them.
	near := map[string]bool{}
	for _, o := range order[:30] {
		near[o.ID] = true
	}
	for _, g := range got {
		if !near[g.ID] {
			t.Fatalf("%s (cosine %.3f) is not among the 30 nearest (the 30th is %.3f)", g.ID, exact[g.ID], order[29].Score)
		}
	}

	// A float32 set keeps its quantization under a Q8 store.
	old := openStore(t, c, redis.WithVectorQuantization("noquant"))
	n := nodes[0]
	n.ID, n.ProjectID = "legacy-1", "legacy"
	if err := old.PutBatch(ctx, []memory.Node{n}, nil); err != nil {
		t.Fatal(err)
	}
	cur, err := redis.New(c, redis.WithNamespace(redis.Namespace(old)))
	if err != nil {
		t.Fatal(err)
	}
	n2 := nodes[9]
	n2.ID, n2.ProjectID = "legacy-2", "legacy"
	if err := cur.PutBatch(ctx, []memory.Node{n2}, nil); err != nil {
		t.Fatalf("writing to a float32 set from a Q8 store: %v", err)
	}
	if q := quantType(redis.VectorKey(cur, "legacy", "m")); q != "f32" {
		t.Fatalf("the float32 set became %q", q)
	}
	got, err = cur.Vector(ctx, "m", n2.Embedding, memory.Filter{ProjectID: "legacy"}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "legacy-2" || math.Abs(got[0].Score-1) > 1e-5 {
		t.Fatalf("float32 set after a Q8 store's write: %v, want legacy-2 first with cosine 1 (exact)", got)
	}
}

// cosine is the exact cosine similarity of a and b.
func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

// vsimRecorder records the arguments of every VSIM the client sends.
type vsimRecorder struct {
	mu   sync.Mutex
	args [][]any
}

func (r *vsimRecorder) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (r *vsimRecorder) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		r.note(cmd)
		return next(ctx, cmd)
	}
}
func (r *vsimRecorder) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		for _, c := range cmds {
			r.note(c)
		}
		return next(ctx, cmds)
	}
}
func (r *vsimRecorder) note(c goredis.Cmder) {
	if strings.EqualFold(c.Name(), "vsim") {
		r.mu.Lock()
		r.args = append(r.args, c.Args())
		r.mu.Unlock()
	}
}

// take returns whether each VSIM of key since the last take asked
// NOTHREAD.
func (r *vsimRecorder) take(key string) []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []bool
	for _, a := range r.args {
		if len(a) > 1 && a[1] == key {
			out = append(out, slices.ContainsFunc(a, func(v any) bool { s, _ := v.(string); return strings.EqualFold(s, "nothread") }))
		}
	}
	r.args = nil
	return out
}

// TestVectorSmallSetsSearchedInline: a vector set that answered fewer
// neighbours than asked (all its elements) is searched next on the
// server's main thread (NOTHREAD: cheaper than a thread for a small set);
// once it answers a full count it goes back to a thread. The answers are
// the exact nearest neighbours either way.
func TestVectorSmallSetsSearchedInline(t *testing.T) {
	opt, err := goredis.ParseURL(os.Getenv("ENGRAM_TEST_REDIS_URL"))
	testClient(t) // skips (or fails under CI) without a server
	if err != nil {
		t.Fatal(err)
	}
	rec := &vsimRecorder{}
	c := goredis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() }) // after openStore's cleanup
	c.AddHook(rec)
	s := openStore(t, c, redis.WithVectorQuantization("noquant"))
	ctx := t.Context()
	key := redis.VectorKey(s, "grow", "m")
	query := []float32{1, 0, 0, 0}
	var nodes []memory.Node
	add := func(n int) {
		var batch []memory.Node
		for range n {
			i := len(nodes)
			nd := memory.Node{ID: fmt.Sprintf("g-%03d", i), Subkind: memory.Decision, Scope: memory.ScopeProject,
				ProjectID: "grow", Label: fmt.Sprintf("node %d", i), Confidence: 0.9,
				Embedding: []float32{1, float32(i%17) * 0.1, float32(i) * 0.01, 0.5}, EmbeddingModel: "m"}
			nodes = append(nodes, nd)
			batch = append(batch, nd)
		}
		if err := s.PutBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
	}
	search := func(step string, wantNoThread bool) {
		t.Helper()
		got, err := s.Vector(ctx, "m", query, memory.Filter{ProjectID: "grow"}, 5)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]memory.Scored, len(nodes))
		for i, n := range nodes {
			want[i] = memory.Scored{ID: n.ID, Score: cosine(query, n.Embedding)}
		}
		slices.SortFunc(want, func(a, b memory.Scored) int { return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(a.ID, b.ID)) })
		if len(got) != 5 {
			t.Fatalf("%s: %d results, want 5", step, len(got))
		}
		for i := range got {
			if got[i].ID != want[i].ID || math.Abs(got[i].Score-want[i].Score) > 1e-5 {
				t.Fatalf("%s: got %v, want %v", step, got, want[:5])
			}
		}
		if sent := rec.take(key); len(sent) != 1 || sent[0] != wantNoThread {
			t.Fatalf("%s: VSIMs sent with NOTHREAD %v, want [%v]", step, sent, wantNoThread)
		}
	}
	add(8)
	search("first search of 8 elements", false)
	if !redis.SmallSet(s, key) {
		t.Fatal("a set that answered 8 of 15 neighbours asked is not marked small")
	}
	search("second search of 8 elements", true)
	add(100)
	search("first search after growing to 108", true)
	if redis.SmallSet(s, key) {
		t.Fatal("a set that answered a full count is still marked small")
	}
	search("second search of 108 elements", false)
}

// TestVectorScoresEachQuantization: VectorScores reads each quantization's
// stored form (VEMB RAW): exact cosines for float32, the codes' for int8,
// the sign vector's for bin.
func TestVectorScoresEachQuantization(t *testing.T) {
	c := testClient(t)
	ctx := t.Context()
	v := []float32{0.9, -0.3, 0.2, 0.1, -0.05, 0.4, 0, 0.7, -0.6, 0.25}
	q := []float32{1, 0.5, -0.2, 0, 0.3, 0.1, -0.4, 0.8, -0.1, 0.05}
	cos := cosine
	signs := make([]float32, len(v))
	for i, x := range v {
		signs[i] = -1
		if x > 0 {
			signs[i] = 1
		}
	}
	for _, tc := range []struct {
		quant string
		want  float64
		tol   float64
	}{
		{"noquant", cos(q, v), 1e-6},
		{"q8", cos(q, v), 0.01},
		{"bin", cos(q, signs), 1e-6},
	} {
		t.Run(tc.quant, func(t *testing.T) {
			s := openStore(t, c, redis.WithVectorQuantization(tc.quant))
			res, err := s.Upsert(ctx, memory.Node{Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: "p", Label: "x"})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetEmbedding(ctx, res.Node.ID, "m", v); err != nil {
				t.Fatal(err)
			}
			got, err := s.VectorScores(ctx, "m", q, []string{res.Node.ID})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || math.Abs(got[0].Score-tc.want) > tc.tol {
				t.Fatalf("scores %v, want %v (within %v)", got, tc.want, tc.tol)
			}
			long := make([]float32, 70) // another dimension (bin: another number of 64-bit words)
			long[0] = 1
			if _, err := s.VectorScores(ctx, "m", long, []string{res.Node.ID}); !errors.Is(err, memory.ErrInvalid) {
				t.Errorf("a query of another dimension: err %v, want ErrInvalid", err)
			}
		})
	}
}
