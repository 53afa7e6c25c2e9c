package sqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
	"github.com/engram-memory/engram/pkg/memory/vecindex"
)

func TestConformance(t *testing.T) {
	memorytest.Run(t, func(t *testing.T, now func() time.Time) memory.Store {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "memory.db"), sqlite.WithClock(now))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestConformanceGraphIndex runs the suite with the vector graph answering
// from the first vector (the suite's stores are far below the exact-scan
// threshold): the graph walk's filter, which reads heads by the rid tagged
// on each vector, must honour every visibility rule the suite checks.
func TestConformanceGraphIndex(t *testing.T) {
	memorytest.Run(t, func(t *testing.T, now func() time.Time) memory.Store {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "memory.db"), sqlite.WithClock(now),
			sqlite.WithVectorIndex(vecindex.WithExactThreshold(1)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
