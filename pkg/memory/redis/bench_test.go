package redis_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// The channel benchmarks seed one project with the memorytest corpus
// (384-dimension vectors) and report upserts/s and p50/p99 per query of
// each channel, then the memory one node takes on the server.
//
//	eval "$(bash scripts/redis8.sh env)"
//	go test -run '^$' -bench Channels10k -benchtime 1x ./pkg/memory/redis
//	ENGRAM_BENCH_LARGE=1 go test -run '^$' -bench Channels100k -benchtime 1x -timeout 30m ./pkg/memory/redis
func BenchmarkChannels10k(b *testing.B) { benchChannels(b, 10_000) }

// BenchmarkChannels100k runs only with ENGRAM_BENCH_LARGE=1 (it takes
// minutes and about 1 GB on the server).
func BenchmarkChannels100k(b *testing.B) {
	if os.Getenv("ENGRAM_BENCH_LARGE") == "" {
		b.Skip("set ENGRAM_BENCH_LARGE=1 to run the 100k-node benchmark")
	}
	benchChannels(b, 100_000)
}

func benchChannels(b *testing.B, nodes int) {
	c := testClient(b)
	var st *redis.Store
	s := memorytest.Bench(b, func(b *testing.B) memory.Store {
		st = openStore(b, c)
		return st
	}, nodes)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	serverCPU(b, ctx, c, st)
	u, err := namespaceUsage(ctx, c, st.Namespace())
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	if err := st.Scan(ctx, func(memory.Node) error { total++; return nil }, nil); err != nil {
		b.Fatal(err)
	}
	per := func(x int64) float64 { return float64(x) / float64(total) }
	vectorBytes := int64(4*memorytest.BenchDim) * total // the float32 blob in each node hash
	b.Run("Memory", func(b *testing.B) {
		for b.Loop() {
		}
		b.ReportMetric(per(u.all), "bytes/node")
		b.ReportMetric(per(u.all-u.vectorSets-vectorBytes), "bytes/node-excl-vector")
		b.ReportMetric(per(u.vectorSets), "vectorset-bytes/node")
	})
	b.Logf("%d nodes: %.0f bytes/node in all; vector sets %.0f, vector blobs in hashes %.0f, node hashes (with blob) %.0f, postings %.0f, other indexes %.0f",
		total, per(u.all), per(u.vectorSets), per(vectorBytes), per(u.nodes), per(u.postings), per(u.all-u.vectorSets-u.nodes-u.postings))
}

// serverCPU reports the Redis main thread's CPU time per query of each
// channel (INFO cpu before and after 300 queries): the server's share,
// which the client-side numbers of memorytest.Bench do not include and
// which stays meaningful when the machine is busy with other work.
func serverCPU(b *testing.B, ctx context.Context, c goredis.UniversalClient, s *redis.Store) {
	cpu := func() float64 {
		info, err := c.Info(ctx, "cpu").Result()
		if err != nil {
			b.Fatal(err)
		}
		var tot float64
		for _, l := range strings.Split(info, "\r\n") {
			k, v, _ := strings.Cut(l, ":")
			if k == "used_cpu_user_main_thread" || k == "used_cpu_sys_main_thread" {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				tot += x
			}
		}
		return tot
	}
	corpus := memorytest.NewBenchCorpus()
	f := memory.Filter{ProjectID: memorytest.BenchProject, SessionID: "s1"}
	const n = 300
	for _, ch := range []struct {
		name string
		q    func() error
	}{
		{"Lexical", func() error { _, err := s.Lexical(ctx, corpus.Query(), f, 60); return err }},
		{"Vector", func() error {
			_, err := s.Vector(ctx, memorytest.BenchModel, corpus.Vector(), f, 60)
			return err
		}},
		{"Standing", func() error {
			_, err := s.StandingInstructions(ctx, memory.ProjectRef{Project: memorytest.BenchProject}, 6)
			return err
		}},
	} {
		b.Run("ServerCPU/"+ch.name, func(b *testing.B) {
			for b.Loop() {
			}
			c0 := cpu()
			for range n {
				if err := ch.q(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cpu()-c0)/n*1000, "server-cpu-ms/query")
		})
	}
}

type usage struct{ all, vectorSets, nodes, postings int64 }

// namespaceUsage sums MEMORY USAGE (exact, SAMPLES 0) over the keys of a
// namespace, by kind of key.
func namespaceUsage(ctx context.Context, c goredis.UniversalClient, ns string) (usage, error) {
	var u usage
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, ns+":*", 2000).Result()
		if err != nil {
			return u, err
		}
		pipe := c.Pipeline()
		cmds := make([]*goredis.IntCmd, len(keys))
		for i, k := range keys {
			cmds[i] = pipe.MemoryUsage(ctx, k, 0)
		}
		if len(keys) > 0 {
			if _, err := pipe.Exec(ctx); err != nil && err != goredis.Nil {
				return u, err
			}
		}
		for i, k := range keys {
			n := cmds[i].Val()
			u.all += n
			switch rest := k[strings.Index(k, "}:")+2:]; {
			case strings.HasPrefix(rest, "v:"):
				u.vectorSets += n
			case strings.HasPrefix(rest, "n:"):
				u.nodes += n
			case strings.HasPrefix(rest, "t:"):
				u.postings += n
			}
		}
		if next == 0 {
			return u, nil
		}
		cursor = next
	}
}
