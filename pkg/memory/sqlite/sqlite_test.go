package sqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
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
