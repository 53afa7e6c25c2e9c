package redis_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

var (
	clusterOnce sync.Once
	cluster     *goredis.ClusterClient
	clusterErr  string
)

// testCluster returns the shared client of ENGRAM_TEST_REDIS_CLUSTER.
func testCluster(t testing.TB) *goredis.ClusterClient {
	t.Helper()
	clusterOnce.Do(func() {
		addrs := os.Getenv("ENGRAM_TEST_REDIS_CLUSTER")
		if addrs == "" {
			clusterErr = "ENGRAM_TEST_REDIS_CLUSTER is not set"
			return
		}
		c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: strings.Split(addrs, ","), PoolSize: 16})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		for ctx.Err() == nil {
			if err = c.Ping(ctx).Err(); err == nil {
				var info string
				info, err = c.ClusterInfo(ctx).Result()
				if err == nil && strings.Contains(info, "cluster_state:ok") {
					break
				}
				if err == nil {
					err = fmt.Errorf("cluster state is not ok")
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			clusterErr = "Redis cluster at " + addrs + " is not usable: " + err.Error()
			_ = c.Close()
			return
		}
		cluster = c
	})
	if cluster == nil {
		need(t, clusterErr)
	}
	return cluster
}

// TestClusterConformance runs the whole suite on a three-node Redis 8
// cluster: every multi-key script and transaction must stay on one slot, or
// Redis answers CROSSSLOT and the suite fails.
func TestClusterConformance(t *testing.T) {
	c := testCluster(t)
	memorytest.Run(t, func(t *testing.T, now func() time.Time) memory.Store {
		return openStore(t, c, redis.WithClock(now))
	})
}

// TestClusterSpread writes, reads and runs scripts for many projects (and
// links across projects and to global memories) and checks that the
// projects' keys landed on every master.
func TestClusterSpread(t *testing.T) {
	c := testCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := openStore(t, c)
	const projects = 24
	global, err := s.Upsert(ctx, memory.Node{Subkind: memory.Preference, Label: "tabs over spaces",
		AssertedBy: memory.AssertedUser, Embedding: []float32{1, 0, 0, 0}, EmbeddingModel: "m"})
	if err != nil {
		t.Fatal(err)
	}
	var firsts []string
	for i := range projects {
		p := fmt.Sprintf("proj-%02d", i)
		var ids []string
		for j := range 4 {
			r, err := s.Upsert(ctx, memory.Node{
				Subkind: memory.Decision, ProjectID: p, Label: fmt.Sprintf("decision %d about caching", j),
				Body: "we cache the parser output", Paths: []string{"pkg/parse/parse.go"},
				Reach: memory.ReachAnywhere, AssertedBy: memory.AssertedUser,
				Embedding: []float32{1, float32(j), float32(i), 1}, EmbeddingModel: "m",
			})
			if err != nil {
				t.Fatalf("%s: upsert: %v", p, err)
			}
			ids = append(ids, r.Node.ID)
		}
		firsts = append(firsts, ids[0])
		if _, err := s.Link(ctx, memory.Edge{Src: ids[0], Dst: ids[1], Relation: memory.RelatesTo}); err != nil {
			t.Fatalf("%s: link: %v", p, err)
		}
		if _, err := s.Link(ctx, memory.Edge{Src: ids[1], Dst: global.Node.ID, Relation: memory.About}); err != nil {
			t.Fatalf("%s: link to global: %v", p, err)
		}
		if i > 0 {
			if _, err := s.Link(ctx, memory.Edge{Src: ids[2], Dst: firsts[i-1], Relation: memory.RelatedTo}); err != nil {
				t.Fatalf("%s: link across projects: %v", p, err)
			}
		}
		f := memory.Filter{ProjectID: p}
		lex, err := s.Lexical(ctx, []string{"cach"}, f, 10)
		if err != nil || len(lex) != 4 {
			t.Fatalf("%s: lexical: %v %v", p, lex, err)
		}
		vec, err := s.Vector(ctx, "m", []float32{1, 0, 0, 0}, f, 10)
		if err != nil || len(vec) != 5 {
			t.Fatalf("%s: vector: %v %v", p, vec, err)
		}
		if got, err := s.ByPaths(ctx, []string{"pkg/parse/parse.go"}, f, 10); err != nil || len(got) != 4 {
			t.Fatalf("%s: by paths: %v %v", p, got, err)
		}
		if got, err := s.StandingInstructions(ctx, memory.ProjectRef{Project: p}, 0); err != nil || len(got) != 5 {
			t.Fatalf("%s: standing: %d %v", p, len(got), err)
		}
		if _, err := s.Revise(ctx, ids[3], memory.Node{Label: "decision 3 revised", AssertedBy: memory.AssertedUser}); err != nil {
			t.Fatalf("%s: revise: %v", p, err)
		}
		if err := s.Supersede(ctx, ids[2], ids[0]); err != nil {
			t.Fatalf("%s: supersede: %v", p, err)
		}
		if _, err := s.Neighbours(ctx, ids[0], 3, memory.Filter{ProjectID: p, CrossProject: true}); err != nil {
			t.Fatalf("%s: neighbours: %v", p, err)
		}
		ref := memory.SessionRef{Project: p, Session: "s1"}
		if _, _, err := s.AppendTranscript(ctx, ref, "t1", []memory.Message{{Role: memory.RoleUser, Content: "hi"}}); err != nil {
			t.Fatalf("%s: transcript: %v", p, err)
		}
		if ok, err := s.AcquireLease(ctx, ref, "consolidate", "w1", time.Minute); err != nil || !ok {
			t.Fatalf("%s: lease: %v %v", p, ok, err)
		}
		if _, err := s.AdvanceCursor(ctx, ref, 1); err != nil {
			t.Fatalf("%s: cursor: %v", p, err)
		}
		if err := s.MarkEventProcessed(ctx, memory.ProjectRef{Project: p}, "extractor", "e1", time.Hour); err != nil {
			t.Fatalf("%s: mark event: %v", p, err)
		}
		if err := s.ApplyFeedback(ctx, map[string]memory.Verdict{ids[0]: memory.VerdictUsed}); err != nil {
			t.Fatalf("%s: feedback: %v", p, err)
		}
	}
	// Cross-project reads touch every project, one slot per command.
	got, err := s.Lexical(ctx, []string{"caching"}, memory.Filter{ProjectID: "proj-00", CrossProject: true}, 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < projects*2 {
		t.Fatalf("cross-project lexical found %d, want >= %d", len(got), projects*2)
	}
	if _, err := s.Vector(ctx, "m", []float32{1, 1, 1, 1}, memory.Filter{ProjectID: "proj-00", CrossProject: true}, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Timeline(ctx, memory.TimelineQuery{Filter: memory.Filter{ProjectID: "proj-01", CrossProject: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PendingEmbeddings(ctx, "other", 500); err != nil {
		t.Fatal(err)
	}
	nodes, edges := 0, 0
	if err := s.Scan(ctx, func(memory.Node) error { nodes++; return nil }, func(memory.Edge) error { edges++; return nil }); err != nil {
		t.Fatal(err)
	}
	if want := 1 + projects*5; nodes != want {
		t.Fatalf("scan found %d nodes, want %d", nodes, want)
	}

	// Every master holds keys of the namespace.
	var mu sync.Mutex
	perMaster := map[string]int{}
	err = c.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
		keys, _, err := m.Scan(ctx, 0, s.Namespace()+":*", 100000).Result()
		if err != nil {
			return err
		}
		n := 0
		for _, k := range keys {
			if strings.Contains(k, "{p:proj-") {
				n++
			}
		}
		mu.Lock()
		perMaster[m.Options().Addr] = n
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(perMaster) < 3 {
		t.Fatalf("expected 3 masters, got %v", perMaster)
	}
	for addr, n := range perMaster {
		if n == 0 {
			t.Errorf("master %s holds no project keys: %v", addr, perMaster)
		}
	}
	t.Logf("project keys per master: %v", perMaster)
}
