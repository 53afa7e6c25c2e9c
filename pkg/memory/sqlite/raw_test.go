package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/engram-memory/engram/pkg/memory/redacttest/rawcheck"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// Issue 31: the credential forms found stored in clear, written through the
// store's write paths (node, transcript, summary), are in neither the
// database file nor its WAL. The same files do hold the text around them.
func TestNoSecretInTheDatabaseFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "engram.db"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := rawcheck.WriteSecrets(t, ctx, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if found := rawcheck.FindInDir(t, dir, []string{"noted: ", "## Critical context"}); len(found) < 2 {
		t.Fatalf("the files do not hold the written text (%v): the check reads nothing", found)
	}
	for _, f := range rawcheck.FindInDir(t, dir, secrets) {
		t.Error(f)
	}
}
