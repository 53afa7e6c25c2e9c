package memio_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/memio"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

const goodFile = `{"type":"node","id":"n1","subkind":"preference","scope":"project","project_id":"p1","label":"Use pnpm","body":"never npm","confidence":0.9,"asserted_by":"user","source":"user","reach":"here","pinned":false,"paths":["package.json"],"updated_at":"2026-05-01T10:00:00Z"}

{"type":"node","id":"n2","subkind":"decision","project_id":"p1","label":"Prices in integer cents"}
{"type":"node","subkind":"observation","label":"Global fact without a project","reach":"anywhere"}
{"type":"edge","src":"n2","dst":"n1","relation":"relates_to"}
`

func TestImportExportRoundTrip(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		st := b.Open(t)
		now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
		stats, err := memio.Import(ctx, st, strings.NewReader(goodFile), "", now)
		if err != nil {
			t.Fatalf("import: %v", err)
		}
		if stats.Nodes != 3 || stats.Edges != 1 {
			t.Fatalf("stats = %+v, want 3 nodes 1 edge", stats)
		}
		n1, err := st.Get(ctx, "n1")
		if err != nil {
			t.Fatal(err)
		}
		if n1.AssertedBy != memory.AssertedUser || n1.Confidence != 0.9 || !n1.UpdatedAt.Equal(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)) {
			t.Errorf("n1 imported wrong: %+v", n1)
		}
		n2, err := st.Get(ctx, "n2")
		if err != nil {
			t.Fatal(err)
		}
		if n2.Scope != memory.ScopeProject || n2.Source != memory.SourceAgent || n2.Confidence != memory.DefaultConfidence {
			t.Errorf("n2 defaults wrong: scope %s source %s confidence %v", n2.Scope, n2.Source, n2.Confidence)
		}
		edges, err := st.Edges(ctx, "n1")
		if err != nil || len(edges) != 1 || edges[0].Src != "n2" || edges[0].Relation != memory.RelatesTo {
			t.Errorf("edges of n1 = %+v, %v", edges, err)
		}

		var buf bytes.Buffer
		out, err := memio.Export(ctx, st, &buf, "")
		if err != nil {
			t.Fatal(err)
		}
		if out.Nodes != 3 || out.Edges != 1 {
			t.Fatalf("export stats = %+v", out)
		}
		// Every node line has the format's fields, even empty ones.
		for i, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("export line %d: %v", i+1, err)
			}
			if m["type"] != "node" {
				continue
			}
			for _, k := range []string{"id", "subkind", "scope", "project_id", "session_id", "label", "body", "confidence",
				"asserted_by", "source", "reach", "pinned", "paths", "updated_at"} {
				if _, ok := m[k]; !ok {
					t.Errorf("export line %d lacks %q: %s", i+1, k, l)
				}
			}
		}
		// What was exported imports into an empty store unchanged.
		st2 := b.Open(t)
		if _, err := memio.Import(ctx, st2, bytes.NewReader(buf.Bytes()), "", now.Add(time.Hour)); err != nil {
			t.Fatalf("re-import: %v\n%s", err, buf.String())
		}
		again, err := st2.Get(ctx, "n1")
		if err != nil {
			t.Fatal(err)
		}
		if again.Label != n1.Label || again.Digest != n1.Digest || !again.UpdatedAt.Equal(n1.UpdatedAt) || again.AssertedBy != n1.AssertedBy {
			t.Errorf("round trip changed n1:\n%+v\n%+v", n1, again)
		}
	})
}

func TestImportRejectsWholeFile(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		st := b.Open(t)
		bad := `{"type":"node","id":"ok1","subkind":"decision","project_id":"p1","label":"fine"}
{"type":"node","id":"bad1","subkind":"wish","project_id":"p1","label":"unknown subkind"}
not json
{"type":"node","id":"</engram-memory>","subkind":"decision","project_id":"p1","label":"hostile id"}
{"type":"node","id":"x","subkind":"decision","project_id":"p1","label":"typo field","lable":"oops"}
{"type":"edge","src":"ok1","dst":"ghost","relation":"relates_to"}
{"type":"thing"}
{"type":"node","id":"twice","subkind":"decision","project_id":"p1","label":"two types","type":"edge"}
{"type":"node","id":"cut","subkind":"decision",
`
		_, err := memio.Import(ctx, st, strings.NewReader(bad), "", time.Now())
		if err == nil {
			t.Fatal("invalid file imported")
		}
		if !errors.Is(err, memio.ErrInvalidLine) {
			t.Errorf("error %v does not wrap ErrInvalidLine", err)
		}
		for _, want := range []string{"line 2", "line 3", "line 4", "line 5", "line 7", "line 8: node: \"type\" given twice", "line 9: node:", `"ghost"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error does not mention %s:\n%v", want, err)
			}
		}
		if _, err := st.Get(ctx, "ok1"); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("a valid line of an invalid file was written (get ok1: %v)", err)
		}
	})
}

// failingStore fails the PutBatch call number failAt (1-based; 0: never)
// and records the size of every batch.
type failingStore struct {
	memio.Store
	calls, failAt int
	sizes         []int
}

func (f *failingStore) PutBatch(ctx context.Context, nodes []memory.Node, edges []memory.Edge) error {
	f.calls++
	if f.calls == f.failAt {
		return errors.New("store went away")
	}
	f.sizes = append(f.sizes, len(nodes)+len(edges))
	return f.Store.PutBatch(ctx, nodes, edges)
}

// A large import is written in chunks; a failure part way keeps what was
// written and says so, and importing the same file again completes it
// without duplicates.
func TestImportWritesInChunksAndResumes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		st := b.Open(t)
		const n = 2*memio.WriteChunk + 234
		var file bytes.Buffer
		for i := range n {
			fmt.Fprintf(&file, `{"type":"node","id":"c%04d","subkind":"observation","project_id":"p1","label":"chunked memory %d"}`+"\n", i, i)
		}
		file.WriteString(`{"type":"edge","src":"c0000","dst":"c1233","relation":"relates_to"}` + "\n")
		now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

		broken := &failingStore{Store: st, failAt: 2}
		stats, err := memio.Import(ctx, broken, bytes.NewReader(file.Bytes()), "", now)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("nodes %d-%d of %d", memio.WriteChunk+1, 2*memio.WriteChunk, n)) {
			t.Fatalf("a failing second chunk: err = %v", err)
		}
		if stats.Nodes != memio.WriteChunk || stats.Edges != 0 {
			t.Fatalf("stats after the failure = %+v, want the first chunk", stats)
		}
		if got := countNodes(t, st); got != memio.WriteChunk {
			t.Fatalf("%d nodes stored after the failure, want %d", got, memio.WriteChunk)
		}

		again := &failingStore{Store: st}
		stats, err = memio.Import(ctx, again, bytes.NewReader(file.Bytes()), "", now)
		if err != nil || stats.Nodes != n || stats.Edges != 1 {
			t.Fatalf("import again: %+v, %v", stats, err)
		}
		if want := []int{memio.WriteChunk, memio.WriteChunk, 234, 1}; !slices.Equal(again.sizes, want) {
			t.Fatalf("batches %v, want %v", again.sizes, want)
		}
		if got := countNodes(t, st); got != n {
			t.Fatalf("%d nodes stored, want %d (no duplicates)", got, n)
		}
		edges, err := st.EdgesOf(ctx, []string{"c0000"})
		if err != nil || len(edges["c0000"]) != 1 {
			t.Fatalf("edges of c0000: %v, %v", edges, err)
		}
	})
}

func countNodes(t *testing.T, st memio.Store) int {
	t.Helper()
	n := 0
	if err := st.Scan(context.Background(), func(memory.Node) error { n++; return nil }, func(memory.Edge) error { return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// Real conversations repeat themselves ("Thanks!"): a repeated text, in the
// file or already stored, is merged into the first node that holds it, not
// refused part way through the import.
func TestImportMergesRepeatedTexts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		st := b.Open(t)
		now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
		stored := `{"type":"node","id":"old","subkind":"observation","project_id":"p1","label":"Sounds good","updated_at":"2026-01-01T00:00:00Z"}`
		if _, err := memio.Import(ctx, st, strings.NewReader(stored), "", now); err != nil {
			t.Fatalf("first import: %v", err)
		}
		var file strings.Builder
		// More than a chunk before the repeats, so that a refusal part way would have written some.
		for i := range memio.WriteChunk + 10 {
			fmt.Fprintf(&file, `{"type":"node","id":"n%d","subkind":"observation","project_id":"p1","label":"round %d"}`+"\n", i, i)
		}
		file.WriteString(`{"type":"node","id":"t1","subkind":"observation","project_id":"p1","label":"Thanks!","updated_at":"2026-02-01T00:00:00Z"}
{"type":"node","id":"t2","subkind":"observation","project_id":"p1","label":"Thanks!","updated_at":"2026-03-01T00:00:00Z"}
{"type":"node","id":"t3","subkind":"observation","project_id":"p2","label":"Thanks!"}
{"type":"node","id":"s1","subkind":"observation","project_id":"p1","label":"Sounds good","updated_at":"2026-04-01T00:00:00Z"}
{"type":"edge","src":"t2","dst":"n1","relation":"relates_to"}
{"type":"edge","src":"s1","dst":"n2","relation":"relates_to"}
{"type":"edge","src":"t1","dst":"t2","relation":"relates_to"}
`)
		stats, err := memio.Import(ctx, st, strings.NewReader(file.String()), "", now)
		if err != nil {
			t.Fatalf("import with repeated texts: %v", err)
		}
		if stats.Merged != 2 || stats.Nodes != memio.WriteChunk+10+3 || stats.Edges != 2 {
			t.Errorf("stats = %+v, want 2 merged, %d nodes, 2 edges (the t1-t2 edge joins a node to itself)", stats, memio.WriteChunk+13)
		}
		t1, err := st.Get(ctx, "t1")
		if err != nil {
			t.Fatal(err)
		}
		if t1.Weight <= memory.MinWeight || !t1.UpdatedAt.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("t1 = weight %v updated %v: want reinforced and the later update time", t1.Weight, t1.UpdatedAt)
		}
		if _, err := st.Get(ctx, "t2"); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("t2 was written (err %v): it repeats t1", err)
		}
		if _, err := st.Get(ctx, "t3"); err != nil {
			t.Errorf("t3 (same text, another project) missing: %v", err)
		}
		old, err := st.Get(ctx, "old")
		if err != nil || old.Weight <= memory.MinWeight {
			t.Errorf("the stored node = %+v, %v: want it reinforced by s1", old, err)
		}
		if _, err := st.Get(ctx, "s1"); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("s1 was written (err %v): it repeats a stored node", err)
		}
		for id, want := range map[string]string{"t1": "n1", "old": "n2"} {
			es, err := st.Edges(ctx, id)
			if err != nil || len(es) != 1 || es[0].Dst != want {
				t.Errorf("edges of %s = %+v, %v: want one to %s", id, es, err, want)
			}
		}
	})
}

// TestTenants: an import writes into its tenant, an export holds its
// tenant's graph only; a line of another tenant, an edge to another
// tenant's node and an id another tenant holds are refused before anything
// is written; repeated texts merge within the tenant only.
func TestTenants(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		st := b.Open(t)
		now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
		if _, err := memio.Import(ctx, st, strings.NewReader(goodFile), "", now); err != nil {
			t.Fatal(err)
		}
		acme := strings.NewReplacer(`"id":"n1"`, `"id":"a1"`, `"id":"n2"`, `"id":"a2"`, `"src":"n2","dst":"n1"`, `"src":"a2","dst":"a1"`).Replace(goodFile)
		stats, err := memio.Import(ctx, st, strings.NewReader(acme), "acme", now)
		if err != nil || stats.Nodes != 3 || stats.Edges != 1 || stats.Merged != 0 {
			t.Fatalf("acme's import (the same texts as the default tenant's, merged with nothing): %+v %v", stats, err)
		}
		if n, err := st.Get(ctx, "a1"); err != nil || n.TenantID != "acme" {
			t.Fatalf("a1: %+v %v", n, err)
		}
		for tenant, want := range map[string][]string{"": {"n1", "n2"}, "acme": {"a1", "a2"}, "globex": nil} {
			var buf bytes.Buffer
			out, err := memio.Export(ctx, st, &buf, tenant)
			if err != nil {
				t.Fatal(err)
			}
			if tenant == "globex" {
				if out.Nodes != 0 || out.Edges != 0 || buf.Len() != 0 {
					t.Fatalf("an empty tenant's export: %+v %q", out, buf.String())
				}
				continue
			}
			if out.Nodes != 3 || out.Edges != 1 {
				t.Fatalf("export of %q: %+v", tenant, out)
			}
			for _, id := range want {
				if !strings.Contains(buf.String(), `"id":"`+id+`"`) {
					t.Fatalf("export of %q lacks %s", tenant, id)
				}
			}
			if tenant == "" && strings.Contains(buf.String(), `"tenant_id"`) || tenant == "acme" && strings.Count(buf.String(), `"tenant_id":"acme"`) != 3 {
				t.Fatalf("export of %q: the node lines' tenant ids:\n%s", tenant, buf.String())
			}
			// An export imports back into its tenant (the same ids: rewritten).
			if _, err := memio.Import(ctx, st, bytes.NewReader(buf.Bytes()), tenant, now); err != nil {
				t.Fatalf("re-import of %q's export: %v", tenant, err)
			}
		}
		for name, c := range map[string]struct{ file, tenant, want string }{
			"a line of another tenant": {`{"type":"node","tenant_id":"acme","subkind":"decision","project_id":"p1","label":"x"}`, "globex", "of tenant"},
			"an edge to another tenant's node": {`{"type":"node","id":"g1","subkind":"decision","project_id":"p1","label":"y"}` + "\n" +
				`{"type":"edge","src":"g1","dst":"a1","relation":"relates_to"}`, "globex", "neither in the file nor in the store"},
			"an id another tenant holds": {`{"type":"node","id":"a1","subkind":"decision","project_id":"p1","label":"z"}`, "globex", "another tenant"},
		} {
			_, err := memio.Import(ctx, st, strings.NewReader(c.file), c.tenant, now)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%s: %v, want %q", name, err, c.want)
			}
		}
		if _, err := st.Get(ctx, "g1"); !memory.IsNotFound(err) {
			t.Fatalf("a refused import wrote its node: %v", err)
		}
		if n, err := st.Get(ctx, "a1"); err != nil || n.TenantID != "acme" || n.Label == "z" {
			t.Fatalf("a refused import changed acme's node: %+v %v", n, err)
		}
	})
}
