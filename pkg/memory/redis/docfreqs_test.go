package redis_test

import (
	"context"
	"reflect"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

func lexical(t *testing.T, s *redis.Store, terms ...string) []memory.Scored {
	t.Helper()
	out, err := s.Lexical(t.Context(), terms, memory.Filter{ProjectID: "p"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The document frequencies hash is read only at FormatDocFreqs: at the
// latest format a frequency changed behind the store's back changes the
// scores (it is what the query reads); after a rollback the lists' own
// lengths are read again; FinishUpgrade repairs the hash.
func TestDocFreqsReadOnlyAtTheirFormat(t *testing.T) {
	c, s, want := docFreqStore(t)
	ctx := t.Context()
	if stale, err := redis.StaleDocFreqs(ctx, s); err != nil || len(stale) > 0 {
		t.Fatalf("document frequencies after writes: %v (%v)", stale, err)
	}
	if err := c.HSet(ctx, redis.DocFreqsKey(s, "p"), "postgres", 40).Err(); err != nil {
		t.Fatal(err)
	}
	if got := lexical(t, s, "postgres", "release"); reflect.DeepEqual(got, want) {
		t.Fatalf("at format %d the planted document frequency was not read: %+v", redis.FormatDocFreqs, got)
	}
	if err := s.SetFormat(ctx, redis.FormatBase); err != nil {
		t.Fatal(err)
	}
	if got := lexical(t, s, "postgres", "release"); !reflect.DeepEqual(got, want) {
		t.Fatalf("at the base format lexical = %+v, want %+v", got, want)
	}
	rep, err := s.FinishUpgrade(ctx)
	if err != nil || rep.DocFreqs != 1 {
		t.Fatalf("FinishUpgrade = %+v, %v; want 1 document frequency rewritten", rep, err)
	}
	if got := lexical(t, s, "postgres", "release"); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the upgrade lexical = %+v, want %+v", got, want)
	}
}

// docFreqDamage leaves in project p's document frequencies what replicas
// of an earlier version leave: a term they added with no frequency, one
// whose list they grew, one whose list they emptied. It returns how many
// fields FinishUpgrade must write, change or remove.
func docFreqDamage(t *testing.T, c goredis.UniversalClient, s *redis.Store, missing, wrong string) int {
	t.Helper()
	ctx := t.Context()
	df := redis.DocFreqsKey(s, "p")
	if n, err := c.HDel(ctx, df, missing).Result(); err != nil || n != 1 {
		t.Fatalf("no document frequency of %q to remove (%v)", missing, err)
	}
	if err := c.HSet(ctx, df, wrong, 999, "erasedlongago", 3).Err(); err != nil {
		t.Fatal(err)
	}
	if stale, err := redis.StaleDocFreqs(ctx, s); err != nil || len(stale) != 3 {
		t.Fatalf("stale document frequencies before the upgrade: %v (%v), want 3", stale, err)
	}
	return 3
}

func checkDocFreqs(t *testing.T, ctx context.Context, s *redis.Store) {
	t.Helper()
	if stale, err := redis.StaleDocFreqs(ctx, s); err != nil || len(stale) > 0 {
		t.Errorf("stale document frequencies after the upgrade: %v (%v)", stale, err)
	}
}

// A term of the dictionary whose document frequency is missing (the hash
// is not what its format promises: an earlier version's write since the
// format was raised, an erasure racing a write) is read from its list, not
// left out of the search.
func TestMissingDocFreqReadsTheList(t *testing.T) {
	c, s, want := docFreqStore(t)
	ctx := t.Context()
	if err := c.HDel(ctx, redis.DocFreqsKey(s, "p"), "postgres").Err(); err != nil {
		t.Fatal(err)
	}
	if got := lexical(t, s, "postgres", "release"); !reflect.DeepEqual(got, want) {
		t.Fatalf("without postgres' document frequency lexical = %+v, want %+v", got, want)
	}
	// Repaired by the next finish, as any damage to the hash.
	if stale, err := redis.StaleDocFreqs(ctx, s); err != nil || len(stale) != 1 {
		t.Fatalf("StaleDocFreqs = %v, %v; want the missing one", stale, err)
	}
	if err := s.SetFormat(ctx, redis.FormatBase); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishUpgrade(ctx); err != nil {
		t.Fatal(err)
	}
}

// docFreqStore is a store holding formatNodes, its client, and the two hits
// of the query the document frequency tests ask ("postgres release").
func docFreqStore(t *testing.T) (*goredis.Client, *redis.Store, []memory.Scored) {
	t.Helper()
	c := testClient(t)
	s := openStore(t, c)
	formatNodes(t, s)
	want := lexical(t, s, "postgres", "release")
	if len(want) != 2 {
		t.Fatalf("lexical = %+v, want 2 hits", want)
	}
	return c, s, want
}
