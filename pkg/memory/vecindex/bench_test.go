package vecindex

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// Benchmarks at the sizes of issue 2 (10,000 and 100,000 vectors of 384
// dimensions, embedding-like data). Search reports median and p99 latency
// per query, computed from per-query timings, and recall@10 against exact
// search. Run: go test -run '^$' -bench . -benchtime 1x ./pkg/memory/vecindex

const benchDim = 384

var benchCache struct {
	sync.Mutex
	data map[int]dataset
	ix   map[int]*Index
}

func benchData(n int) dataset {
	benchCache.Lock()
	defer benchCache.Unlock()
	if benchCache.data == nil {
		benchCache.data = map[int]dataset{}
		benchCache.ix = map[int]*Index{}
	}
	d, ok := benchCache.data[n]
	if !ok {
		d = embeddingData(42, n, 500, benchDim)
		benchCache.data[n] = d
	}
	return d
}

func benchIndex(b *testing.B, n int) (*Index, dataset) {
	d := benchData(n)
	benchCache.Lock()
	ix := benchCache.ix[n]
	benchCache.Unlock()
	if ix == nil {
		ix = New(benchDim, WithSeed(1))
		if err := ix.AddBatch(d.names, d.vecs); err != nil {
			b.Fatal(err)
		}
		benchCache.Lock()
		benchCache.ix[n] = ix
		benchCache.Unlock()
	}
	return ix, d
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkBuild measures AddBatch of all vectors into an empty index (the
// load at open) and the memory the index holds per vector.
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			d := benchData(n)
			var ix *Index
			var bytes uint64
			var cpu time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				ix = nil
				before := heapInUse()
				c0 := processCPU()
				b.StartTimer()
				ix = New(benchDim, WithSeed(1))
				if err := ix.AddBatch(d.names, d.vecs); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += processCPU() - c0
				bytes = heapInUse() - before
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/build")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/build")
			b.ReportMetric(float64(bytes)/float64(n), "bytes/vector")
			b.ReportMetric(float64(bytes)/float64(n)-benchDim*4, "overhead-bytes/vector")
			benchCache.Lock()
			benchCache.ix[n] = ix
			benchCache.Unlock()
		})
	}
}

// BenchmarkSearch: top-10 queries; each iteration runs every query once.
func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		ix, d := benchIndex(b, n)
		want := exactAnswers(d, 10, nil)
		wantTenth := exactAnswers(d, 10, tenth)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			runQueries(b, ix, d, want, nil)
		})
		b.Run(fmt.Sprintf("n=%d/filter=10pct", n), func(b *testing.B) {
			runQueries(b, ix, d, wantTenth, tenth)
		})
		b.Run(fmt.Sprintf("n=%d/filter=1pct", n), func(b *testing.B) {
			runQueries(b, ix, d, exactAnswers(d, 10, hundredth), hundredth)
		})
		b.Run(fmt.Sprintf("n=%d/exact", n), func(b *testing.B) {
			var lat, cpu []time.Duration
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for range b.N {
				for _, q := range d.qs[:50] {
					u, _ := ix.unit(q)
					t0, c0 := time.Now(), threadCPU()
					ix.mu.RLock()
					ix.exactLocked(u, 10, nil)
					ix.mu.RUnlock()
					cpu = append(cpu, threadCPU()-c0)
					lat = append(lat, time.Since(t0))
				}
			}
			reportLatency(b, lat, cpu)
		})
	}
}

// BenchmarkSearchEf shows the recall/latency trade-off at 100,000 vectors.
func BenchmarkSearchEf(b *testing.B) {
	ix, d := benchIndex(b, 100000)
	want := exactAnswers(d, 10, nil)
	defer func(ef int) { ix.g.efS = ef }(ix.g.efS)
	for _, ef := range []int{16, 32, 64, 96, 128, 256} {
		b.Run(fmt.Sprintf("ef=%d", ef), func(b *testing.B) {
			ix.g.efS = ef
			runQueries(b, ix, d, want, nil)
		})
	}
}

// BenchmarkSearchClustered: topic-clustered data at 10,000 vectors.
func BenchmarkSearchClustered(b *testing.B) {
	d := clusteredData(7, 10000, 200, benchDim)
	ix := New(benchDim, WithSeed(1))
	if err := ix.AddBatch(d.names, d.vecs); err != nil {
		b.Fatal(err)
	}
	runQueries(b, ix, d, exactAnswers(d, 10, nil), nil)
}

// BenchmarkSearchRandom384 is the worst case: isotropic random vectors in
// 384 dimensions, which have no neighbourhood structure.
func BenchmarkSearchRandom384(b *testing.B) {
	d := randomData(7, 10000, 200, benchDim)
	ix := New(benchDim, WithSeed(1))
	if err := ix.AddBatch(d.names, d.vecs); err != nil {
		b.Fatal(err)
	}
	want := exactAnswers(d, 10, nil)
	for _, ef := range []int{96, 256, 512} {
		b.Run(fmt.Sprintf("n=10000/ef=%d", ef), func(b *testing.B) {
			ix.g.efS = ef
			runQueries(b, ix, d, want, nil)
		})
	}
}

// hundredth accepts about one id in a hundred, by hash.
func hundredth(id string) bool {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32()%100 == 7
}

func exactAnswers(d dataset, k int, accept func(string) bool) [][]Hit {
	units := make([][]float32, len(d.vecs))
	for i, v := range d.vecs {
		units[i] = make([]float32, len(v))
		normalize(units[i], v)
	}
	out := make([][]Hit, len(d.qs))
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(d.qs); i += 2 {
				out[i] = bruteForceUnits(d.names, units, d.qs[i], k, accept)
			}
		}()
	}
	wg.Wait()
	return out
}

func runQueries(b *testing.B, ix *Index, d dataset, want [][]Hit, accept func(string) bool) {
	var lat, cpu []time.Duration
	var hit, total int
	r := rand.New(rand.NewPCG(1, 1))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	for range b.N {
		for _, i := range r.Perm(len(d.qs)) {
			t0, c0 := time.Now(), threadCPU()
			got := ix.Search(d.qs[i], 10, accept)
			cpu = append(cpu, threadCPU()-c0)
			lat = append(lat, time.Since(t0))
			set := map[string]bool{}
			for _, h := range want[i] {
				set[h.ID] = true
			}
			for _, h := range got {
				if set[h.ID] {
					hit++
				}
			}
			total += len(want[i])
		}
	}
	b.StopTimer()
	reportLatency(b, lat, cpu)
	b.ReportMetric(float64(hit)/float64(total), "recall@10")
}

// reportLatency reports median and p99 of the per-query wall times and,
// when given, of the per-query thread CPU times: on a shared, loaded machine
// wall time includes waiting for a CPU, CPU time is the query's own cost.
func reportLatency(b *testing.B, wall, cpu []time.Duration) {
	pct := func(lat []time.Duration, p float64) float64 {
		slices.Sort(lat)
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds())
	}
	b.ReportMetric(pct(wall, 0.5), "median-µs/query")
	b.ReportMetric(pct(wall, 0.99), "p99-µs/query")
	if len(cpu) > 0 {
		b.ReportMetric(pct(cpu, 0.5), "median-cpu-µs/query")
		b.ReportMetric(pct(cpu, 0.99), "p99-cpu-µs/query")
	}
}

// BenchmarkCodesOnly compares the index with and without the float32
// vectors (WithCodesOnly) at 10,000 embedding-like vectors: memory per
// vector, then top-10 search (graph walk, and a filter of 10%) and the
// exact scan, CPU per query and recall@10 against exact search on the
// float32 vectors.
func BenchmarkCodesOnly(b *testing.B) {
	const n = 10000
	d := benchData(n)
	want := exactAnswers(d, 10, nil)
	wantTenth := exactAnswers(d, 10, tenth)
	for _, mode := range []struct {
		name string
		opts []Option
	}{{"float32", nil}, {"codes", []Option{WithCodesOnly()}}} {
		before := heapInUse()
		ix := New(benchDim, append([]Option{WithSeed(1)}, mode.opts...)...)
		if err := ix.AddBatch(d.names, d.vecs); err != nil {
			b.Fatal(err)
		}
		bytes := heapInUse() - before
		b.Run(mode.name+"/search", func(b *testing.B) {
			runQueries(b, ix, d, want, nil)
			b.ReportMetric(float64(bytes)/n, "bytes/vector")
		})
		b.Run(mode.name+"/filter=10pct", func(b *testing.B) { runQueries(b, ix, d, wantTenth, tenth) })
		b.Run(mode.name+"/exact", func(b *testing.B) {
			exact := New(benchDim, append([]Option{WithSeed(1), WithExactThreshold(1 << 30)}, mode.opts...)...)
			if err := exact.AddBatch(d.names, d.vecs); err != nil {
				b.Fatal(err)
			}
			runQueries(b, exact, d, want, nil)
		})
	}
}
