package memio_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/memio"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestExportSelectionWithTranscripts: an export of a project (or one
// session) writes that project's memories, the edges between them, and
// with transcripts its sessions' messages and summaries, nothing of
// another project or tenant; importing it into an empty store gives the
// same memories and transcripts, and importing it again adds nothing.
func TestExportSelectionWithTranscripts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		st := b.Open(t)
		type key struct{ tenant, project, session string }
		ids := map[key][]string{}
		for _, k := range []key{{"acme", "user-1", "s1"}, {"acme", "user-1", "s2"}, {"acme", "user-2", "s1"}, {"other", "user-1", "s1"}} {
			for _, label := range []string{"likes " + k.project + " " + k.session, "works on " + k.session + " of " + k.tenant} {
				r, err := st.Upsert(ctx, memory.Node{TenantID: k.tenant, ProjectID: k.project, SessionID: k.session, Subkind: memory.Observation, Label: label})
				if err != nil {
					t.Fatal(err)
				}
				ids[k] = append(ids[k], r.Node.ID)
			}
			if _, err := st.Link(ctx, memory.Edge{Src: ids[k][0], Dst: ids[k][1], Relation: memory.RelatesTo}); err != nil {
				t.Fatal(err)
			}
			ref := memory.SessionRef{Tenant: k.tenant, Project: k.project, Session: k.session}
			for _, turn := range []string{"t1", "t2"} {
				if _, _, err := st.AppendTranscript(ctx, ref, turn, []memory.Message{
					{Role: memory.RoleUser, Content: "question " + turn + " in " + k.session + " of " + k.project},
					{Role: memory.RoleAssistant, Content: "answer " + turn}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.SaveSummary(ctx, ref, memory.Summary{Content: "summary of " + k.session + " of " + k.project, UpTo: 2}); err != nil {
				t.Fatal(err)
			}
		}
		// An edge from user-1 to user-2: not between exported nodes.
		if _, err := st.Link(ctx, memory.Edge{Src: ids[key{"acme", "user-1", "s1"}][0], Dst: ids[key{"acme", "user-2", "s1"}][0], Relation: memory.RelatesTo}); err != nil {
			t.Fatal(err)
		}

		var buf bytes.Buffer
		stats, err := memio.ExportSelection(ctx, st, &buf, memio.Selection{Tenant: "acme", Project: "user-1", Transcripts: true})
		if err != nil {
			t.Fatal(err)
		}
		if stats.Nodes != 4 || stats.Edges != 2 || stats.Messages != 8 || stats.Summaries != 2 {
			t.Fatalf("export of project user-1: %+v\n%s", stats, buf.String())
		}
		for _, leak := range []string{"user-2", `"other"`} {
			if strings.Contains(buf.String(), leak) {
				t.Fatalf("the export of project user-1 holds %s:\n%s", leak, buf.String())
			}
		}
		var one bytes.Buffer
		stats, err = memio.ExportSelection(ctx, st, &one, memio.Selection{Tenant: "acme", Project: "user-1", Session: "s2", Transcripts: true})
		if err != nil {
			t.Fatal(err)
		}
		if stats.Nodes != 2 || stats.Edges != 1 || stats.Messages != 4 || stats.Summaries != 1 || strings.Contains(one.String(), "s1") {
			t.Fatalf("export of session s2: %+v\n%s", stats, one.String())
		}

		dst := b.Open(t)
		for round := range 2 {
			got, err := memio.Import(ctx, dst, bytes.NewReader(buf.Bytes()), "acme", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			want := memio.Stats{Nodes: 4, Edges: 2, Messages: 8, Summaries: 2}
			if round == 1 {
				want = memio.Stats{Nodes: 4, Edges: 2} // nodes and edges are rewritten by id; transcripts are not repeated
			}
			if got != want {
				t.Fatalf("import round %d: %+v, want %+v", round, got, want)
			}
		}
		for _, sid := range []string{"s1", "s2"} {
			ref := memory.SessionRef{Tenant: "acme", Project: "user-1", Session: sid}
			a, _ := st.Messages(ctx, ref, 0, 0)
			b, err := dst.Messages(ctx, ref, 0, 0)
			if err != nil || len(a) != len(b) || len(b) != 4 {
				t.Fatalf("imported messages of %s: %d vs %d, %v", sid, len(a), len(b), err)
			}
			for i := range a {
				if a[i].Content != b[i].Content || a[i].Role != b[i].Role || a[i].TurnID != b[i].TurnID || a[i].ID != b[i].ID {
					t.Fatalf("message %d of %s: %+v vs %+v", i, sid, a[i], b[i])
				}
			}
			sums, err := dst.Summaries(ctx, ref)
			if err != nil || len(sums) != 1 || sums[0].Content != "summary of "+sid+" of user-1" || sums[0].UpTo != 2 {
				t.Fatalf("imported summaries of %s: %+v %v", sid, sums, err)
			}
		}
		for _, id := range ids[key{"acme", "user-1", "s1"}] {
			if _, err := dst.Get(ctx, id); err != nil {
				t.Fatalf("imported node %s: %v", id, err)
			}
		}

		// A bad transcript line is refused with its line number, and
		// nothing is written.
		bad := buf.String() + `{"type":"message","project_id":"user-9","session_id":"s","turn_id":"t","role":"wizard","content":"x"}` + "\n" +
			`{"type":"summary","tenant_id":"other","project_id":"user-9","session_id":"s","content":"y"}` + "\n"
		third := b.Open(t)
		_, err = memio.Import(ctx, third, strings.NewReader(bad), "acme", time.Now())
		if !errors.Is(err, memio.ErrInvalidLine) || !strings.Contains(err.Error(), "wizard") || !strings.Contains(err.Error(), `of tenant "other"`) {
			t.Fatalf("bad transcript lines: %v", err)
		}
		if m, _ := third.Messages(ctx, memory.SessionRef{Tenant: "acme", Project: "user-1", Session: "s1"}, 0, 0); len(m) != 0 {
			t.Fatal("a refused import wrote messages")
		}
		// Transcripts need a project.
		if _, err := memio.ExportSelection(ctx, st, &bytes.Buffer{}, memio.Selection{Tenant: "acme", Transcripts: true}); !errors.Is(err, memory.ErrInvalid) {
			t.Fatalf("transcripts of a whole tenant: %v", err)
		}
	})
}
