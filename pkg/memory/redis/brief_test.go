package redis_test

import (
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// TestBriefOnceAcrossReplicas: a replica that finds a session's flag taken
// by another learns its expiry from the reply and answers that session's
// later turns from memory; once the flag expires it is taken again, by
// exactly one of them.
func TestBriefOnceAcrossReplicas(t *testing.T) {
	c := testClient(t)
	clock := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	a := openStore(t, c, redis.WithClock(now))
	b, err := redis.New(c, redis.WithNamespace(redis.Namespace(a)), redis.WithClock(now))
	if err != nil {
		t.Fatal(err)
	}
	ref := memory.SessionRef{Project: "p", Session: "s"}
	brief := func(s *redis.Store) bool {
		t.Helper()
		ok, err := s.BriefOnce(t.Context(), ref, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if redis.BriefKnown(b, ref) {
		t.Fatal("a fresh replica claims to know the flag")
	}
	if !brief(a) || brief(b) {
		t.Fatal("the first replica must take the flag and the second find it taken")
	}
	if !redis.BriefKnown(a, ref) || !redis.BriefKnown(b, ref) {
		t.Fatal("a replica did not remember the flag's expiry")
	}
	clock = clock.Add(59 * time.Minute)
	if brief(a) || brief(b) || !redis.BriefKnown(b, ref) {
		t.Fatal("the flag expired early")
	}
	clock = clock.Add(2 * time.Minute)
	if redis.BriefKnown(a, ref) || redis.BriefKnown(b, ref) {
		t.Fatal("a remembered flag outlived its expiry")
	}
	if !brief(b) || brief(a) {
		t.Fatal("after the expiry exactly one replica must take the flag again")
	}
}
