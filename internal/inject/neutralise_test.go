package inject_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/memio"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/neutralisetest"
)

// blockBody is a block's text without its fixed frame (tags, directive or
// reminder, section headers): what memories put there.
func blockBody(text string) string {
	for _, fixed := range []string{inject.OpenTag, inject.CloseTag, inject.Directive, inject.Reminder, inject.StandingHeader, inject.RecalledHeader} {
		text = strings.ReplaceAll(text, fixed, "")
	}
	return text
}

// Issue 31: every payload of the attack corpus, imported as a user's
// standing instruction of its own project (and as a recalled memory), is
// inert in that project's memory block; every line of the ordinary corpus
// reaches the block unchanged (whitespace aside) in at least 99% of cases.
func TestAttackCorpusThroughImportIntoTheBlock(t *testing.T) {
	f := newFixture(t, storetest.Backend{Name: "sqlite", Open: storetest.OpenSQLite}, nil)
	attacks := neutralisetest.Attacks()
	ordinary := neutralisetest.Ordinary()
	var file bytes.Buffer
	line := func(id, project, subkind, label string) {
		b, err := json.Marshal(map[string]any{"type": "node", "id": id, "subkind": subkind, "scope": "project", "project_id": project,
			"label": label, "asserted_by": "user", "source": "user", "confidence": 0.9})
		if err != nil {
			t.Fatal(err)
		}
		file.Write(append(b, '\n'))
	}
	for i, a := range attacks {
		line(fmt.Sprintf("a%03d", i), fmt.Sprintf("pa%03d", i), "preference", a.Text)
	}
	for i, o := range ordinary {
		line(fmt.Sprintf("o%03d", i), fmt.Sprintf("po%03d", i), "decision", o)
	}
	if _, err := memio.Import(f.ctx, f.st, &file, "", f.clock.t); err != nil {
		t.Fatal(err)
	}
	// embedded, as the embedding backfill would (recall waits for it)
	var imported []memory.Node
	if err := f.st.Scan(f.ctx, func(n memory.Node) error { imported = append(imported, n); return nil }, func(memory.Edge) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, n := range imported {
		vecs, err := f.emb.Embed(f.ctx, []string{memory.EmbedText(&n)})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(vecs[0], func(x float32) bool { return x != 0 }) {
			vecs[0][0] = 1 // a text of no words (CJK, symbols) hashes to nothing
		}
		if err := f.st.SetEmbedding(f.ctx, n.ID, f.emb.Model(), vecs[0]); err != nil {
			t.Fatal(err)
		}
	}
	neutralised := 0
	for i, a := range attacks {
		b, err := f.inj.Build(f.ctx, inject.Request{Project: fmt.Sprintf("pa%03d", i), Session: "s", Turn: "t", Text: a.Text})
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Standing) != 1 {
			t.Fatalf("%q: %d standing lines, want 1", a.Text, len(b.Standing))
		}
		if s := neutralisetest.Survives(blockBody(b.Text)); len(s) > 0 {
			t.Errorf("%s payload %q reaches the block as\n%s\nstill holding %s", a.Family, a.Text, b.Text, strings.Join(s, "; "))
			continue
		}
		if strings.Count(b.Text, inject.CloseTag) != 1 || !strings.HasSuffix(b.Text, inject.CloseTag) {
			t.Errorf("%q: the block has another close tag:\n%s", a.Text, b.Text)
			continue
		}
		neutralised++
	}
	altered := 0
	for i, o := range ordinary {
		b, err := f.inj.Build(f.ctx, inject.Request{Project: fmt.Sprintf("po%03d", i), Session: "s", Turn: "t", Text: "ok"})
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Standing) != 1 {
			t.Fatalf("%q: %d standing lines, want 1", o, len(b.Standing))
		}
		want := strings.Join(strings.Fields(memory.Redact(o)), " ")
		if got := b.Standing[0].Text; got != want && !strings.HasSuffix(got, "…") {
			altered++
			t.Logf("ordinary line altered in the block: %q -> %q", o, got)
		}
	}
	t.Logf("import -> memory block: %d/%d attack payloads neutralised; ordinary lines altered %d/%d (%.2f%%)",
		neutralised, len(attacks), altered, len(ordinary), 100*float64(altered)/float64(len(ordinary)))
	if float64(altered) > 0.01*float64(len(ordinary)) {
		t.Errorf("%d of %d ordinary lines altered, want at most 1%%", altered, len(ordinary))
	}
}
