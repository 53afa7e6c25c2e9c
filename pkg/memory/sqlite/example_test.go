package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

func Example() {
	dir, _ := os.MkdirTemp("", "engram")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "memory.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	r, _ := s.Upsert(ctx, memory.Node{Subkind: memory.Decision, ProjectID: "shop", Label: "Payments go through the outbox",
		Paths: []string{"internal/payments/outbox.go"}, AssertedBy: memory.AssertedUser})
	hits, _ := s.Lexical(ctx, memory.Terms("how do payments work?"), memory.Filter{ProjectID: "shop"}, 5)
	standing, _ := s.StandingInstructions(ctx, memory.ProjectRef{Project: "shop"}, 6)
	fmt.Println(r.Created, len(hits), hits[0].ID == r.Node.ID, len(standing))
	// Output: true 1 true 1
}
