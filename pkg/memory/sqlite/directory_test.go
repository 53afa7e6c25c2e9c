package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// TestDirectory: projects, sessions, summaries and Find stay within their
// tenant; Find pages newest first through what keep accepts.
func TestDirectory(t *testing.T) {
	ctx := context.Background()
	clock := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "d.db"), sqlite.WithClock(func() time.Time {
		clock = clock.Add(time.Second) // every write a second later: the order is by update time
		return clock
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ids []string
	for i := range 7 {
		n := memory.Node{Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: "shop", Label: fmt.Sprintf("decision %d", i),
			Source: memory.SourceAgent, AssertedBy: memory.AssertedInferred, Confidence: 0.6}
		if i%2 == 0 {
			n.AssertedBy = memory.AssertedUser
		}
		res, err := s.Upsert(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Node.ID)
	}
	for _, n := range []memory.Node{
		{Subkind: memory.Decision, Scope: memory.ScopeProject, TenantID: "acme", ProjectID: "shop", Label: "acme's", AssertedBy: memory.AssertedUser},
		{Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: "blog", Label: "blog's"},
	} {
		n.Source, n.Confidence = memory.SourceAgent, 0.6
		if _, err := s.Upsert(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, ref := range []memory.SessionRef{{Project: "shop", Session: "s1"}, {Project: "shop", Session: "s2"}, {Tenant: "acme", Project: "shop", Session: "a1"}} {
		if _, _, err := s.AppendTranscript(ctx, ref, "t1", []memory.Message{{Role: memory.RoleUser, Content: "hi"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveSummary(ctx, ref, memory.Summary{Content: "sum of " + ref.String(), UpTo: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if ps, err := s.Projects(ctx, ""); err != nil || !slices.Equal(ps, []string{"blog", "shop"}) {
		t.Fatalf("projects %v %v", ps, err)
	}
	if ps, err := s.Projects(ctx, "acme"); err != nil || !slices.Equal(ps, []string{"shop"}) {
		t.Fatalf("acme's projects %v %v", ps, err)
	}
	ss, err2 := s.SessionList(ctx, memory.ProjectRef{Project: "shop"}, 0)
	if err2 != nil || len(ss) != 2 || ss[0].Turns != 1 || ss[0].Messages != 1 || ss[0].LastAt.IsZero() {
		t.Fatalf("sessions %+v %v", ss, err2)
	}
	if sums, err := s.Summaries(ctx, memory.SessionRef{Tenant: "acme", Project: "shop", Session: "a1"}); err != nil || len(sums) != 1 || sums[0].Content != "sum of acme:shop/a1" {
		t.Fatalf("acme's summaries %+v %v", sums, err)
	}
	user := func(n *memory.Node) bool { return n.AssertedBy == memory.AssertedUser }
	q := memory.TimelineQuery{Filter: memory.Filter{ProjectID: "shop"}, Limit: 2}
	var got []string
	for off := 0; ; off += 2 {
		page, more, err := s.Find(ctx, q, user, off)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range page {
			got = append(got, n.ID)
		}
		if !more {
			break
		}
	}
	if want := []string{ids[6], ids[4], ids[2], ids[0]}; !slices.Equal(got, want) {
		t.Fatalf("Find pages %v, want the user's newest first %v (acme's never)", got, want)
	}
}
