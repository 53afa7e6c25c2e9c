package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// TestMigrationToTenants opens a database written at schema version 2 (the
// last before tenants), with a row in every table, and checks that Open
// migrates it: everything is the default tenant's and reads as before, and
// another tenant may then hold the same project, session and text ids.
func TestMigrationToTenants(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v2.db")
	now := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for v, m := range migrations[:2] {
		if _, err := db.Exec(m); err != nil {
			t.Fatalf("migration %d: %v", v+1, err)
		}
	}
	if _, err := db.Exec(`PRAGMA user_version = 2`); err != nil {
		t.Fatal(err)
	}
	n, err := memory.PrepareNew(memory.Node{ID: "old1", Subkind: memory.Preference, Scope: memory.ScopeProject, ProjectID: "p",
		Label: "always answer in indonesian", Source: memory.SourceUser, Paths: []string{"README.md"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	g, err := memory.PrepareNew(memory.Node{ID: "old2", Subkind: memory.Decision, Label: "releases ship on fridays", Source: memory.SourceUser}, now)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := json.Marshal(memory.Message{ID: 1, TurnID: "t1", Role: memory.RoleUser, Content: "hello", CreatedAt: now})
	sum, _ := json.Marshal(memory.Summary{Content: "they said hello", UpTo: 1, CreatedAt: now})
	pass, err := memory.EncodePass(memory.Pass{ID: "pass1", Project: "p", Session: "s", Status: memory.PassFinished, StartedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	far := now.Add(240 * time.Hour).UnixNano()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, x := range []memory.Node{n, g} {
		doc, _ := json.Marshal(x)
		exec(`INSERT INTO nodes(id, project, digest, doc) VALUES (?, ?, ?, ?)`, x.ID, x.ProjectID, x.Digest, doc)
	}
	exec(`INSERT INTO node_paths(path, rid) SELECT 'README.md', rid FROM nodes WHERE id = 'old1'`)
	exec(`INSERT INTO edges(src, dst, relation, weight, source, valid_from) VALUES ('old1', 'old2', 'relates_to', 1, 'agent', ?)`, now.UnixNano())
	exec(`INSERT INTO turns(project, session, turn_id) VALUES ('p', 's', 't1')`)
	exec(`INSERT INTO messages(project, session, id, turn_id, doc) VALUES ('p', 's', 1, 't1', ?)`, msg)
	exec(`INSERT INTO summaries(project, session, doc) VALUES ('p', 's', ?)`, sum)
	exec(`INSERT INTO cursors(project, session, value) VALUES ('p', 's', 1)`)
	exec(`INSERT INTO injections(project, session, turn_id, ids) VALUES ('p', 's', 't1', '["old1"]')`)
	exec(`INSERT INTO briefs(project, session, expires) VALUES ('p', 's', ?)`, far)
	exec(`INSERT INTO leases(project, session, name, owner, expires) VALUES ('p', 's', 'extract', 'w1', ?)`, far)
	exec(`INSERT INTO processed(project, consumer, event, expires) VALUES ('p', 'extractor', 'ev1', 0)`)
	exec(`INSERT INTO passes(project, id, session, status, started, doc) VALUES ('p', 'pass1', 's', 'finished', ?, ?)`, now.UnixNano(), pass)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, path, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatalf("Open of a version 2 database: %v", err)
	}
	defer s.Close()
	var v int
	if err := s.db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != len(migrations) {
		t.Fatalf("user_version %d (%v), want %d", v, err, len(migrations))
	}

	def := memory.ProjectRef{Project: "p"}
	ref := memory.SessionRef{Project: "p", Session: "s"}
	if got, err := s.Get(ctx, "old1"); err != nil || got.TenantID != "" || got.Label != n.Label {
		t.Fatalf("Get after the migration: %+v %v", got, err)
	}
	standing, err := s.StandingInstructions(ctx, def, 0)
	if err != nil || len(standing) != 2 {
		t.Fatalf("standing instructions of the default tenant: %v %v", standing, err)
	}
	if lex, err := s.Lexical(ctx, []string{"indonesian"}, memory.Filter{ProjectID: "p"}, 10); err != nil || len(lex) != 1 || lex[0].ID != "old1" {
		t.Fatalf("Lexical: %v %v", lex, err)
	}
	if bp, err := s.ByPaths(ctx, []string{"README.md"}, memory.Filter{ProjectID: "p"}, 10); err != nil || len(bp) != 1 {
		t.Fatalf("ByPaths: %v %v", bp, err)
	}
	if es, err := s.Edges(ctx, "old1"); err != nil || len(es) != 1 {
		t.Fatalf("Edges: %v %v", es, err)
	}
	if msgs, err := s.Messages(ctx, ref, 0, 0); err != nil || len(msgs) != 1 || msgs[0].Content != "hello" {
		t.Fatalf("Messages: %v %v", msgs, err)
	}
	if _, fresh, err := s.AppendTranscript(ctx, ref, "t1", []memory.Message{{Role: memory.RoleUser, Content: "hello"}}); err != nil || fresh {
		t.Fatalf("a migrated turn is still known: fresh %v %v", fresh, err)
	}
	if sm, err := s.LatestSummary(ctx, ref); err != nil || sm.UpTo != 1 {
		t.Fatalf("LatestSummary: %+v %v", sm, err)
	}
	if c, err := s.Cursor(ctx, ref); err != nil || c != 1 {
		t.Fatalf("Cursor: %d %v", c, err)
	}
	if first, err := s.BriefOnce(ctx, ref, time.Hour); err != nil || first {
		t.Fatalf("the migrated briefing flag holds: first %v %v", first, err)
	}
	if ok, err := s.AcquireLease(ctx, ref, "extract", "w2", time.Minute); err != nil || ok {
		t.Fatalf("the migrated lease holds: %v %v", ok, err)
	}
	if done, err := s.EventProcessed(ctx, def, "extractor", "ev1"); err != nil || !done {
		t.Fatalf("EventProcessed: %v %v", done, err)
	}
	if p, err := s.GetPass(ctx, def, "pass1"); err != nil || p.Tenant != "" {
		t.Fatalf("GetPass: %+v %v", p, err)
	}
	// A record of before records held the block (a JSON array of ids,
	// no expiry) reads back as its ids.
	if in, err := s.GetInjection(ctx, ref, "t1"); err != nil || !slices.Equal(in.IDs, []string{"old1"}) || in.Text != "" {
		t.Fatalf("GetInjection: %+v %v", in, err)
	}
	if in, err := s.TakeInjection(ctx, ref, "t1"); err != nil || !slices.Equal(in.IDs, []string{"old1"}) {
		t.Fatalf("TakeInjection: %+v %v", in, err)
	}

	// Another tenant: the same project, session and text are its own.
	tref := memory.SessionRef{Tenant: "acme", Project: "p", Session: "s"}
	res, err := s.Upsert(ctx, memory.Node{TenantID: "acme", Subkind: memory.Preference, ProjectID: "p", Label: "always answer in indonesian", Source: memory.SourceUser})
	if err != nil || !res.Created || res.Node.ID == "old1" {
		t.Fatalf("the same text in another tenant: %+v %v", res, err)
	}
	if _, fresh, err := s.AppendTranscript(ctx, tref, "t1", []memory.Message{{Role: memory.RoleUser, Content: "hi"}}); err != nil || !fresh {
		t.Fatalf("the same turn in another tenant: fresh %v %v", fresh, err)
	}
	if ok, err := s.AcquireLease(ctx, tref, "extract", "w2", time.Minute); err != nil || !ok {
		t.Fatalf("the same lease in another tenant: %v %v", ok, err)
	}
	if standing, err := s.StandingInstructions(ctx, tref.ProjectRef(), 0); err != nil || len(standing) != 1 || standing[0].TenantID != "acme" {
		t.Fatalf("standing instructions of the other tenant: %v %v", standing, err)
	}
	// And the data survives a reopen (the index is rebuilt from the file).
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, path, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if standing, err := s2.StandingInstructions(ctx, tref.ProjectRef(), 0); err != nil || len(standing) != 1 {
		t.Fatalf("after a reopen: %v %v", standing, err)
	}
	if standing, err := s2.StandingInstructions(ctx, def, 0); err != nil || len(standing) != 2 {
		t.Fatalf("after a reopen, the default tenant: %v %v", standing, err)
	}
}
