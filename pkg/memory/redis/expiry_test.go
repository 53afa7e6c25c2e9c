package redis_test

import (
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestRecordFieldExpiry: an injection record and a processed-event record
// are hash fields that Redis collects gcMargin after their expiry, and a
// record written again without one loses the field's expiry.
func TestRecordFieldExpiry(t *testing.T) {
	c := testClient(t)
	s := openStore(t, c)
	ctx := t.Context()
	ref := memory.SessionRef{Project: "p", Session: "s"}
	pr := ref.ProjectRef()
	ttlOf := func(key, field string) time.Duration {
		t.Helper()
		v, err := c.HPTTL(ctx, key, field).Result()
		if err != nil || len(v) != 1 {
			t.Fatalf("HPTTL %s %s: %v %v", key, field, v, err)
		}
		if v[0] < 0 {
			return time.Duration(v[0])
		}
		return time.Duration(v[0]) * time.Millisecond
	}
	within := func(what string, got, want time.Duration) {
		t.Helper()
		if got > want || got < want-time.Minute {
			t.Fatalf("%s: field expires in %v, want about %v", what, got, want)
		}
	}
	in := memory.Injection{IDs: []string{"a"}}
	if err := s.PutInjection(ctx, ref, "t1", in, time.Hour); err != nil {
		t.Fatal(err)
	}
	within("injection", ttlOf(redis.InjectionsKey(s, ref), "t1"), time.Hour+redis.GCMargin)
	if err := s.PutInjection(ctx, ref, "t1", in, 0); err != nil {
		t.Fatal(err)
	}
	if got := ttlOf(redis.InjectionsKey(s, ref), "t1"); got != -1 {
		t.Fatalf("injection rewritten without expiry: field TTL %v, want none (-1)", got)
	}
	if _, err := s.GetInjection(ctx, ref, "t1"); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkEventProcessed(ctx, pr, "c", "e1", 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	within("processed event", ttlOf(redis.EventsKey(s, pr, "c"), "e1"), 2*time.Hour+redis.GCMargin)
	if err := s.MarkEventProcessed(ctx, pr, "c", "e1", 0); err != nil {
		t.Fatal(err)
	}
	if got := ttlOf(redis.EventsKey(s, pr, "c"), "e1"); got != -1 {
		t.Fatalf("processed event marked again without expiry: field TTL %v, want none (-1)", got)
	}
}
