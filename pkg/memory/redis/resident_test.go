package redis_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/memory/memorytest"
	"github.com/engram-memory/engram/pkg/memory/redis"
	goredis "github.com/redis/go-redis/v9"
)

// BenchmarkResidentBytes says what a LongMemEval-size memory (about 15 KB
// of text, a 384-dimension vector: memorytest.LongMemories) costs Redis:
// the growth of used_memory (and of its dataset part) over the seeding, per
// memory, on the Redis of ENGRAM_TEST_REDIS_URL, which should hold nothing
// else, and by key family (MEMORY USAGE of each key: n the nodes' hashes,
// t the terms' postings, ...). ENGRAM_RESIDENT_N sets how many (default
// 1,000).
func BenchmarkResidentBytes(b *testing.B) {
	c := testClient(b)
	count := memorytest.LongMemoriesCount(b, 1000)
	nodes := memorytest.LongMemories(b, "../../../../shared/eval/longmemeval-dev", count)
	text := 0
	for i := range nodes {
		text += len(nodes[i].Label) + len(nodes[i].Body)
	}
	ctx := context.Background()
	used := func() (all, dataset float64) {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "used_memory":
				all = f
			case "used_memory_dataset":
				dataset = f
			}
		}
		return all, dataset
	}
	ns := randomNamespace()
	s, err := redis.New(c, redis.WithNamespace(ns))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := redis.DeleteNamespace(context.Background(), c, ns); err != nil {
			b.Errorf("DeleteNamespace: %v", err)
		}
	})
	before, beforeData := used()
	for i := 0; i < len(nodes); i += 100 {
		if err := s.PutBatch(ctx, nodes[i:min(i+100, len(nodes))], nil); err != nil {
			b.Fatal(err)
		}
	}
	after, afterData := used()
	// By key family (the part after the hash tag: n a node's hash, t a
	// term's postings, ...), MEMORY USAGE of every key.
	families := map[string]float64{}
	iter := c.Scan(ctx, 0, ns+":*", 1000).Iterator()
	var keys []string
	flush := func() {
		pipe := c.Pipeline()
		cmds := make([]*goredis.IntCmd, len(keys))
		for i, k := range keys {
			cmds[i] = pipe.MemoryUsage(ctx, k, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		for i, k := range keys {
			fam, _, _ := strings.Cut(strings.TrimPrefix(k[strings.LastIndex(k, "}")+1:], ":"), ":")
			families[fam] += float64(cmds[i].Val())
		}
		keys = keys[:0]
	}
	for iter.Next(ctx) {
		if keys = append(keys, iter.Val()); len(keys) == 1000 {
			flush()
		}
	}
	if err := iter.Err(); err != nil {
		b.Fatal(err)
	}
	flush()
	for b.Loop() {
	}
	n := float64(len(nodes))
	b.ReportMetric(float64(text)/n, "text-bytes/memory")
	b.ReportMetric((after-before)/n, "used-bytes/memory")
	b.ReportMetric((afterData-beforeData)/n, "dataset-bytes/memory")
	for fam, v := range families {
		b.ReportMetric(v/n, "keys-"+fam+"-bytes/memory")
	}
}
