package redis_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestPerAttributeHashesStillRead: a node stored in the per-attribute form
// of earlier versions is read by every path (Get, GetMany, the channels)
// and is rewritten packed, without its old fields, on its next write.
func TestPerAttributeHashesStillRead(t *testing.T) {
	c := testClient(t)
	clock := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	s := openStore(t, c, redis.WithClock(func() time.Time { return clock }))
	ctx := t.Context()
	res, err := s.Upsert(ctx, memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "Deploys run through make release",
		Body: "The release target tags the image.", Confidence: 0.8, Paths: []string{"Makefile"}, AssertedBy: memory.AssertedUser,
		Entities: []memory.Entity{{Key: "make", Name: "make"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Node.ID
	if err := s.SetEmbedding(ctx, id, "m", []float32{1, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	want, err := s.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	key := redis.NodeKey(s, "p", id)
	fields, err := c.HKeys(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(fields)
	if !slices.Equal(fields, []string{redis.FieldPacked, redis.FieldVector}) {
		t.Fatalf("a new node's hash holds %v, want the packed value and the vector", fields)
	}

	// The same node as an earlier version stored it.
	if err := c.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, key, redis.LegacyHash(&want)).Err(); err != nil {
		t.Fatal(err)
	}
	// (which had no copy of it either)
	if err := c.HDel(ctx, redis.PackedNodesKey(s, "p"), id).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, id)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Get of the per-attribute form (%v):\n got %+v\nwant %+v", err, got, want)
	}
	many, err := s.GetMany(ctx, []string{"missing", id})
	bare := want
	bare.Embedding = nil
	if err != nil || len(many) != 1 || !reflect.DeepEqual(many[0], bare) {
		t.Fatalf("GetMany of the per-attribute form (%v): %+v", err, many)
	}
	standing, err := s.StandingInstructions(ctx, memory.ProjectRef{Project: "p"}, 6)
	if err != nil || len(standing) != 1 || !reflect.DeepEqual(standing[0], bare) {
		t.Fatalf("standing instructions of the per-attribute form (%v): %+v", err, standing)
	}
	lex, err := s.Lexical(ctx, []string{"release"}, memory.Filter{ProjectID: "p"}, 10)
	if err != nil || len(lex) != 1 || lex[0].ID != id {
		t.Fatalf("lexical over the per-attribute form: %v, %v", lex, err)
	}

	// The next write packs it.
	conf := 0.9 // a change that keeps the vector (new text would drop it)
	updated, err := s.Update(ctx, id, memory.Patch{Confidence: &conf})
	if err != nil {
		t.Fatal(err)
	}
	fields, err = c.HKeys(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(fields)
	if !slices.Equal(fields, []string{redis.FieldPacked, redis.FieldVector}) {
		t.Fatalf("after a write the hash holds %v, want only the packed value and the vector", fields)
	}
	got, err = s.Get(ctx, id)
	if err != nil || !reflect.DeepEqual(got, updated) || got.Confidence != conf || !slices.Equal(got.Embedding, want.Embedding) {
		t.Fatalf("after the write (%v):\n got %+v\nwant %+v", err, got, updated)
	}
}
