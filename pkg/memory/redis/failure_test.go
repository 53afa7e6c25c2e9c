package redis_test

import (
	"context"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// cmdHook counts EVALSHA calls (all, and of lexDictScript) and round
// trips while counting is on, and
// while noscript is on sends every EVALSHA with a SHA the server does not
// know, so that it answers NOSCRIPT as a server that lost its scripts (a
// restart, a failover, SCRIPT FLUSH) does, without flushing the shared
// test server's scripts.
type cmdHook struct {
	noscript, count atomic.Bool
	evalsha, trips  atomic.Int64
	dictScript      atomic.Int64
	// spoil, when above 0, is how many EVALSHA more are sent as noscript
	// sends them (a server that lost its scripts, then loaded them again).
	spoil atomic.Int64
}

func (h *cmdHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *cmdHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.see([]goredis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (h *cmdHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.see(cmds)
		return next(ctx, cmds)
	}
}

func (h *cmdHook) see(cmds []goredis.Cmder) {
	if h.count.Load() {
		h.trips.Add(1)
	}
	for _, c := range cmds {
		if c.Name() != "evalsha" {
			continue
		}
		if h.count.Load() {
			h.evalsha.Add(1)
			if c.Args()[1] == redis.DictScriptSHA {
				h.dictScript.Add(1)
			}
		}
		if h.noscript.Load() || h.spoil.Add(-1) >= 0 {
			c.Args()[1] = strings.Repeat("0", 40)
		}
	}
}

// hookedClient is a client of its own on the shared test server, with h.
func hookedClient(t *testing.T, h *cmdHook) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(testClient(t).Options())
	c.AddHook(h)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestDictionaryErrorAfterNoscript: the dictionary's one pipeline holds
// lexDictScript for a tag whose range was dropped and the plain reads of
// another tag. When the script answers NOSCRIPT (forgiven: the script is
// loaded and asked again) and the other tag's reads fail, the query
// returns that failure: Exec reports only the first failed command, and
// the reply was once built from the failed read (a panic, index out of
// range) or from failed document frequencies (terms silently dropped).
func TestDictionaryErrorAfterNoscript(t *testing.T) {
	h := &cmdHook{}
	c := hookedClient(t, h)
	s := openStore(t, c)
	ctx := t.Context()
	n := func(id, scope, label string) memory.Node {
		x := memory.Node{ID: id, Subkind: memory.Decision, Scope: memory.Scope(scope), Label: label, Body: "body " + id, Confidence: 0.9}
		if scope == "project" {
			x.ProjectID = "p"
		}
		return x
	}
	if err := s.PutBatch(ctx, []memory.Node{n("a", "project", "deploying things"), n("g", "global", "deployment globally")}, nil); err != nil {
		t.Fatal(err)
	}
	f := memory.Filter{ProjectID: "p"}
	q := []string{"deployments"}
	if _, err := s.Lexical(ctx, q, f, 10); err != nil { // fills both tags' ranges
		t.Fatal(err)
	}
	// A new term in the project's "dep" bucket: its range is found stale
	// and dropped; the global one stays cached.
	if err := s.PutBatch(ctx, []memory.Node{n("b", "project", "deployzz")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lexical(ctx, q, f, 10); err != nil {
		t.Fatal(err)
	}
	// The project's script is unknown to the server, and the global tag's
	// statistics cannot be read (here a wrong type; on a cluster another
	// shard down or moving).
	gstats := redis.StatsKey(s, "")
	if err := c.Del(ctx, gstats).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, gstats, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	h.noscript.Store(true)
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Lexical panicked instead of returning the global tag's error: %v", r)
		}
	}()
	_, err := s.Lexical(ctx, q, f, 10)
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("Lexical: %v, want the global statistics' WRONGTYPE", err)
	}
}

// TestAdjacentErrorAfterNotStored: a memory not stored answers nil to its
// ZRANK, which Adjacent reads as "no entry"; a ZRANK that fails in the
// same pipeline after it (here a wrong type; on a cluster a shard down)
// is the call's error, not one more "not stored".
func TestAdjacentErrorAfterNotStored(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	mk := func(id, project string) memory.Node {
		return memory.Node{ID: id, Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: project, SessionID: "s",
			Label: "x", Body: "y " + id, Confidence: 0.9, CreatedAt: at}
	}
	nodes := []memory.Node{mk("a1", "a"), mk("a2", "a"), mk("b1", "b"), mk("b2", "b")}
	if err := s.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
	missing := mk("gone", "a") // not stored: its ZRANK answers nil
	got, err := s.Adjacent(ctx, []memory.Node{missing, nodes[2]}, 2)
	if err != nil || len(got) != 1 || len(got["b1"].After) != 1 {
		t.Fatalf("Adjacent before the failure: %v, %v; want b1's neighbour b2 only", got, err)
	}
	// Project b's conversation set cannot be read.
	key := redis.ConversationKey(s, "b", "s")
	if err := c.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, key, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	got, err = s.Adjacent(ctx, []memory.Node{missing, nodes[2]}, 2)
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("Adjacent: %v (answer %v), want b's WRONGTYPE", err, got)
	}
}

// TestPendingEmbeddingsAcrossAMove: HasPendingEmbeddings reads the
// backlog and the models, then the other models' sets. A content change
// between the two reads moves the project's one memory from another
// model's set to the backlog; the second read, which once saw only the
// emptied set, counts the backlog again and still answers true.
func TestPendingEmbeddingsAcrossAMove(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	res, err := s.Upsert(ctx, memory.Node{Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: "p",
		Label: "use helm", Body: "for releases", Confidence: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Node.ID
	if err := s.SetEmbedding(ctx, id, "old", []float32{1, 0, 0}); err != nil {
		t.Fatal(err)
	}
	p := memory.ProjectRef{Project: "p"}
	if ok, err := s.HasPendingEmbeddings(ctx, p, "old"); err != nil || ok {
		t.Fatalf("embedded by old, asked for old: %v %v, want false", ok, err)
	}
	moved := false
	redis.BetweenPendingReads(s, func() {
		if moved {
			return
		}
		moved = true
		body := "for every release"
		if _, err := s.Update(ctx, id, memory.Patch{Body: &body}); err != nil {
			t.Error(err)
		}
	})
	ok, err := s.HasPendingEmbeddings(ctx, p, "new")
	if err != nil {
		t.Fatal(err)
	}
	if !moved {
		t.Fatal("the write between the reads did not run")
	}
	if !ok {
		t.Fatal("a memory moved from another model's set to the backlog between the reads: not pending")
	}
	if n, err := c.ZCard(ctx, redis.PendingKey(s, "p")).Result(); err != nil || n != 1 {
		t.Fatalf("the content change left %d memories in the backlog (%v), want 1", n, err)
	}
}

// StandingAndPending answers what StandingInstructions and
// HasPendingEmbeddings answer, and a failure of one part is that part's
// error only.
func TestStandingAndPending(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	for i, lbl := range []string{"use pnpm", "British English", "tabs in Go"} {
		n := memory.Node{Subkind: memory.Preference, Scope: memory.ScopeProject, ProjectID: "p", AssertedBy: memory.AssertedUser,
			Label: lbl, Body: "always", Confidence: 0.9}
		if i == 1 {
			n.Scope, n.ProjectID = memory.ScopeGlobal, ""
		}
		res, err := s.Upsert(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if i != 2 {
			if err := s.SetEmbedding(ctx, res.Node.ID, "m", []float32{1, 0, 0}); err != nil {
				t.Fatal(err)
			}
		}
	}
	p := memory.ProjectRef{Project: "p"}
	check := func(model string) {
		t.Helper()
		want, err := s.StandingInstructions(ctx, p, 6)
		if err != nil {
			t.Fatal(err)
		}
		wantPending, err := s.HasPendingEmbeddings(ctx, p, model)
		if err != nil {
			t.Fatal(err)
		}
		got, serr, pending, perr := s.StandingAndPending(ctx, p, 6, model)
		if serr != nil || perr != nil || pending != wantPending || !reflect.DeepEqual(got, want) || len(got) != 3 {
			t.Fatalf("StandingAndPending(%s) = %d nodes, %v, %v, %v; want %d nodes, %v", model, len(got), serr, pending, perr, len(want), wantPending)
		}
	}
	check("m") // the third memory has no vector: pending
	if err := c.Del(ctx, redis.PendingKey(s, "p")).Err(); err != nil {
		t.Fatal(err)
	}
	check("m")     // no backlog, one model
	check("other") // embedded by another model: pending
	// The backlog cannot be read: the readiness part fails, the standing
	// selection answers.
	if err := c.Set(ctx, redis.PendingKey(s, "p"), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	got, serr, _, perr := s.StandingAndPending(ctx, p, 6, "m")
	if serr != nil || len(got) != 3 || perr == nil || !strings.Contains(perr.Error(), "WRONGTYPE") {
		t.Fatalf("with the backlog unreadable: %d nodes, %v, %v", len(got), serr, perr)
	}
	if err := c.Del(ctx, redis.PendingKey(s, "p")).Err(); err != nil {
		t.Fatal(err)
	}
}
