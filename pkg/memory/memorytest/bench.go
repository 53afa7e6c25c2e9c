package memorytest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// BenchFactory returns a fresh, empty store for a benchmark (real clock).
type BenchFactory func(b *testing.B) memory.Store

// Benchmark corpus constants.
const (
	BenchDim     = 384      // embedding dimensions
	BenchModel   = "bench"  // embedding model name
	BenchProject = "bench"  // the one project every node is in
	benchSamples = 300      // latency samples per channel, at least
	benchLimit   = 60       // candidates asked of each channel (retrieval asks 60)
	benchBatch   = 1000     // nodes per PutBatch while seeding
	benchVocab   = 6000     // distinct words of the corpus
	benchCenters = 96       // vector clusters
	benchPaths   = 4000     // distinct paths
	benchSeed    = 20260301 // the corpus is the same on every run and backend
)

// BenchCorpus generates the benchmark corpus deterministically.
type BenchCorpus struct {
	rng     *rand.Rand
	zipf    *rand.Zipf
	words   []string
	centers [][]float32
	paths   []string
	n       int
}

// NewBenchCorpus returns the corpus generator.
func NewBenchCorpus() *BenchCorpus {
	rng := rand.New(rand.NewPCG(benchSeed, 1))
	c := &BenchCorpus{rng: rng, zipf: rand.NewZipf(rng, 1.1, 2, benchVocab-1)}
	syll := []string{"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "de", "fo", "gi", "ho", "ja", "xe", "yu", "bra", "cle", "dro", "fli", "gro", "pla", "stu", "tre"}
	seen := map[string]bool{}
	for len(c.words) < benchVocab {
		var sb strings.Builder
		for range 2 + rng.IntN(3) {
			sb.WriteString(syll[rng.IntN(len(syll))])
		}
		if w := sb.String(); !seen[w] {
			seen[w] = true
			c.words = append(c.words, w)
		}
	}
	for range benchCenters {
		v := make([]float32, BenchDim)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		c.centers = append(c.centers, v)
	}
	dirs := []string{"cmd", "internal", "pkg", "api", "web", "scripts", "deploy", "docs"}
	for i := range benchPaths {
		c.paths = append(c.paths, fmt.Sprintf("%s/%s/%s_%d.go", dirs[i%len(dirs)], c.words[i%500], c.words[(i*7)%benchVocab], i))
	}
	return c
}

func (c *BenchCorpus) text(n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = c.words[c.zipf.Uint64()]
	}
	return strings.Join(ws, " ")
}

// Vector returns a vector near a random cluster centre.
func (c *BenchCorpus) Vector() []float32 {
	ctr := c.centers[c.rng.IntN(len(c.centers))]
	v := make([]float32, BenchDim)
	for i := range v {
		v[i] = ctr[i] + float32(c.rng.NormFloat64()*0.6)
	}
	return v
}

// Node returns the next corpus node: a project memory of BenchProject with
// text, paths, sometimes entities, and an embedding; about 2% are user
// preferences or decisions (standing instructions), 5% session-scoped.
func (c *BenchCorpus) Node() memory.Node {
	c.n++
	kinds := []memory.Subkind{memory.Observation, memory.Decision, memory.Pattern, memory.Failure, memory.Observation}
	n := memory.Node{
		ID:             fmt.Sprintf("b%07d", c.n),
		Subkind:        kinds[c.rng.IntN(len(kinds))],
		Scope:          memory.ScopeProject,
		ProjectID:      BenchProject,
		SessionID:      fmt.Sprintf("s%d", c.rng.IntN(200)),
		Label:          c.text(6 + c.rng.IntN(6)),
		Body:           c.text(15 + c.rng.IntN(30)),
		Confidence:     0.3 + 0.7*c.rng.Float64(),
		Paths:          []string{c.paths[c.rng.IntN(len(c.paths))]},
		Embedding:      c.Vector(),
		EmbeddingModel: BenchModel,
	}
	n.Label += fmt.Sprintf(" n%d", c.n) // unique digest
	switch r := c.rng.IntN(100); {
	case r < 2:
		n.Subkind = []memory.Subkind{memory.Preference, memory.Decision}[r]
		n.AssertedBy, n.Source = memory.AssertedUser, memory.SourceUser
	case r < 7:
		n.Scope = memory.ScopeSession
	}
	if c.rng.IntN(4) == 0 {
		n.Entities = []memory.Entity{{Key: c.words[c.rng.IntN(200)]}}
	}
	return n
}

// Query returns a lexical query of 2 to 5 corpus words.
func (c *BenchCorpus) Query() []string { return memory.Terms(c.text(2 + c.rng.IntN(4))) }

// Seed writes nodes corpus nodes into s with PutBatch.
func (c *BenchCorpus) Seed(ctx context.Context, s memory.Store, nodes int) error {
	for done := 0; done < nodes; {
		batch := make([]memory.Node, 0, benchBatch)
		for ; len(batch) < benchBatch && done < nodes; done++ {
			batch = append(batch, c.Node())
		}
		if err := s.PutBatch(ctx, batch, nil); err != nil {
			return fmt.Errorf("seed at %d: %w", done, err)
		}
	}
	return nil
}

// Bench seeds a fresh store with nodes corpus nodes (one project,
// 384-dimension vectors) and measures, as sub-benchmarks: Upsert (new nodes
// with a vector; metric upserts/s), Lexical, Vector, ByPaths and Standing
// (one query per op; metrics p50-ms and p99-ms of wall-clock time and, on
// Linux, cpu-p50-ms and cpu-p99-ms of on-CPU time, at least 300 samples
// each, so even -benchtime 1x reports percentiles). It returns the seeded store (for
// backend-specific metrics such as bytes per node); the caller closes it.
func Bench(b *testing.B, newStore BenchFactory, nodes int) memory.Store {
	ctx := context.Background()
	s := newStore(b)
	c := NewBenchCorpus()
	start := time.Now()
	if err := c.Seed(ctx, s, nodes); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d nodes in %v (%.0f nodes/s with PutBatch)", nodes, time.Since(start).Round(time.Millisecond),
		float64(nodes)/time.Since(start).Seconds())
	f := memory.Filter{ProjectID: BenchProject, SessionID: "s1"}

	b.Run("Upsert", func(b *testing.B) {
		var lat, cpu []time.Duration
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		one := func() {
			n := c.Node()
			n.ID = ""
			c0, cpuOK := ThreadCPU()
			t := time.Now()
			if _, err := s.Upsert(ctx, n); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t))
			if c1, ok := ThreadCPU(); ok && cpuOK {
				cpu = append(cpu, c1-c0)
			}
		}
		for b.Loop() {
			one()
		}
		for len(lat) < benchSamples {
			one()
		}
		var total time.Duration
		for _, d := range lat {
			total += d
		}
		b.ReportMetric(float64(len(lat))/total.Seconds(), "upserts/s")
		reportPercentiles(b, lat, cpu)
	})
	queries := make([][]string, 512)
	vectors := make([][]float32, 512)
	paths := make([][]string, 512)
	for i := range queries {
		queries[i] = c.Query()
		vectors[i] = c.Vector()
		paths[i] = []string{c.paths[c.rng.IntN(len(c.paths))], c.paths[c.rng.IntN(len(c.paths))]}
	}
	channel := func(name string, q func(i int) (int, error)) {
		b.Run(name, func(b *testing.B) {
			var lat, cpu []time.Duration
			hits := 0
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			one := func() {
				i := len(lat) % len(queries)
				c0, cpuOK := ThreadCPU()
				t := time.Now()
				n, err := q(i)
				lat = append(lat, time.Since(t))
				if c1, ok := ThreadCPU(); ok && cpuOK {
					cpu = append(cpu, c1-c0)
				}
				if err != nil {
					b.Fatal(err)
				}
				hits += n
			}
			for b.Loop() {
				one()
			}
			for len(lat) < benchSamples {
				one()
			}
			if hits == 0 {
				b.Fatalf("%s: no query returned anything", name)
			}
			b.ReportMetric(float64(hits)/float64(len(lat)), "hits/query")
			reportPercentiles(b, lat, cpu)
		})
	}
	channel("Lexical", func(i int) (int, error) {
		r, err := s.Lexical(ctx, queries[i], f, benchLimit)
		return len(r), err
	})
	channel("Vector", func(i int) (int, error) {
		r, err := s.Vector(ctx, BenchModel, vectors[i], f, benchLimit)
		return len(r), err
	})
	channel("ByPaths", func(i int) (int, error) {
		r, err := s.ByPaths(ctx, paths[i], f, benchLimit)
		return len(r), err
	})
	channel("Standing", func(int) (int, error) {
		r, err := s.StandingInstructions(ctx, memory.ProjectRef{Project: BenchProject}, 6)
		return len(r), err
	})
	return s
}

// reportPercentiles reports wall-clock p50-ms and p99-ms and, when cpu
// samples are given, cpu-p50-ms and cpu-p99-ms: the on-CPU time of the
// calling thread, which stays meaningful on a machine shared with other
// work (the wall-clock numbers then include waiting for a core).
func reportPercentiles(b *testing.B, lat, cpu []time.Duration) {
	pct := func(xs []time.Duration, p float64) float64 {
		i := int(math.Ceil(p*float64(len(xs)))) - 1
		return float64(xs[max(0, min(i, len(xs)-1))]) / float64(time.Millisecond)
	}
	slices.Sort(lat)
	b.ReportMetric(pct(lat, 0.50), "p50-ms")
	b.ReportMetric(pct(lat, 0.99), "p99-ms")
	if len(cpu) > 0 {
		slices.Sort(cpu)
		b.ReportMetric(pct(cpu, 0.50), "cpu-p50-ms")
		b.ReportMetric(pct(cpu, 0.99), "cpu-p99-ms")
	}
}
