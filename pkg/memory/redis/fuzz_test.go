package redis

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/engram-memory/engram/pkg/memory"
)

// FuzzDecodeNode feeds arbitrary hash fields to the node decoder: it must
// return an error or a node, never panic, and a decoded node must survive
// encode -> decode unchanged.
func FuzzDecodeNode(f *testing.F) {
	f.Add("id=n1\nsk=decision\nsc=project\npj=p\nlb=hello\ncf=0.5\nwt=1\nca=1772359200000000000")
	f.Add("id=n2\npa=[\"a.go\"]\nen=[{\"key\":\"k\",\"name\":\"K\"}]\nvec=\x00\x00\x80\x3f")
	f.Add("id=x\ncf=nan\nac=-3\nvt=notatime")
	f.Add("id=y\nen={\nvec=abc")
	f.Add("")
	f.Fuzz(func(t *testing.T, raw string) {
		h := map[string]string{}
		for _, line := range strings.Split(raw, "\n") {
			k, v, ok := strings.Cut(line, "=")
			if ok {
				h[k] = v
			}
		}
		n, ok, err := decodeNode(h)
		if err != nil || !ok {
			return
		}
		enc := encodeNode(&n)
		h2 := map[string]string{}
		for k, v := range enc {
			switch x := v.(type) {
			case string:
				h2[k] = x
			case []byte:
				h2[k] = string(x)
			}
		}
		n2, ok2, err := decodeNode(h2)
		if err != nil || !ok2 {
			t.Fatalf("re-decoding an encoded node: ok %v, %v", ok2, err)
		}
		if !sameNode(n, n2) {
			t.Fatalf("round trip changed the node:\n%+v\n%+v", n, n2)
		}
	})
}

// sameNode compares nodes, NaN confidences included.
func sameNode(a, b memory.Node) bool {
	if math.IsNaN(a.Confidence) && math.IsNaN(b.Confidence) {
		a.Confidence, b.Confidence = 0, 0
	}
	if math.IsNaN(a.Weight) && math.IsNaN(b.Weight) {
		a.Weight, b.Weight = 0, 0
	}
	// Copies: the callers' slices stay as they were.
	a.Embedding, b.Embedding = slices.Clone(a.Embedding), slices.Clone(b.Embedding)
	for i := range a.Embedding {
		if i < len(b.Embedding) && math.IsNaN(float64(a.Embedding[i])) && math.IsNaN(float64(b.Embedding[i])) {
			a.Embedding[i], b.Embedding[i] = 0, 0
		}
	}
	if len(a.Paths) == 0 && len(b.Paths) == 0 {
		a.Paths, b.Paths = nil, nil
	}
	if len(a.Entities) == 0 && len(b.Entities) == 0 {
		a.Entities, b.Entities = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

// FuzzNodeRoundTrip: every node the store can hold comes back identical.
func FuzzNodeRoundTrip(f *testing.F) {
	f.Add("n1", "label", "body", "p", 0.5, 2.25, int64(1772359200123456789), true, "a.go", "k8s", []byte{0, 0, 128, 63})
	f.Add("n2", "", "unicode ✓ text", "", 1.0, 1.0, int64(0), false, "", "", []byte{})
	f.Fuzz(func(t *testing.T, id, label, body, project string, conf, weight float64, ts int64, pinned bool,
		path, entity string, vec []byte) {
		if id == "" || !utf8.ValidString(path) || !utf8.ValidString(entity) {
			return // paths and entities are stored as JSON, which holds only UTF-8
		}
		n := memory.Node{ID: id, Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: project,
			Label: label, Body: body, Confidence: conf, Weight: weight, Pinned: pinned}
		if ts != 0 {
			n.CreatedAt = time.Unix(0, ts).UTC()
			n.ValidTo = n.CreatedAt.Add(time.Hour)
		}
		if path != "" {
			n.Paths = []string{path}
		}
		if entity != "" {
			n.Entities = []memory.Entity{{Key: entity, Name: entity}}
		}
		if len(vec) >= 4 {
			v, err := decodeVector(vec[:len(vec)/4*4])
			if err != nil {
				t.Fatal(err)
			}
			n.Embedding, n.EmbeddingModel = v, "m"
		}
		// The per-attribute form of older hashes and the packed form.
		legacy := map[string]string{}
		for k, v := range encodeNode(&n) {
			switch x := v.(type) {
			case string:
				legacy[k] = x
			case []byte:
				legacy[k] = string(x)
			}
		}
		for form, h := range map[string]map[string]string{"fields": legacy, "packed": packedHash(&n)} {
			got, ok, err := decodeNode(h)
			if err != nil || !ok {
				t.Fatalf("%s: decode: ok %v, %v", form, ok, err)
			}
			if !sameNode(n, got) {
				t.Fatalf("%s: round trip changed the node:\n%+v\n%+v", form, n, got)
			}
		}
		bare := n
		bare.Embedding = nil
		if got, err := unpackNode(packNode(&n)); err != nil || !sameNode(bare, got) {
			t.Fatalf("unpack: %v\n%+v\n%+v", err, n, got)
		}
	})
}

// packedHash is the hash writeNode stores for n.
func packedHash(n *memory.Node) map[string]string {
	h := map[string]string{fPacked: packNode(n)}
	if len(n.Embedding) > 0 {
		h[fVector] = string(encodeVector(n.Embedding))
	}
	return h
}

// FuzzUnpackNode: arbitrary bytes unpack to a node or an error, never a
// panic, and an unpacked node packs and unpacks to itself.
func FuzzUnpackNode(f *testing.F) {
	full := memory.Node{ID: "n1", Subkind: memory.Decision, Scope: memory.ScopeSession, ProjectID: "p", SessionID: "s",
		Label: "label", Body: "body\nline", Digest: "d", Confidence: 0.7, Weight: 3, Access: 4, Useful: 2, Unhelpful: -1,
		Source: memory.SourceUser, AssertedBy: memory.AssertedUser, Reach: memory.ReachAnywhere, ReachJudged: true,
		Pinned: true, ArchivedAt: time.Unix(0, 1).UTC(), SupersededBy: "n2", StaleAt: time.Unix(-5, 0).UTC(),
		ValidFrom: time.Unix(1, 0).UTC(), ValidTo: time.Unix(2, 0).UTC(), Paths: []string{"a.go", "b/c.ts"},
		Entities: []memory.Entity{{Key: "k", Name: "K"}}, CreatedAt: time.Unix(3, 0).UTC(),
		UpdatedAt: time.Unix(4, 0).UTC(), AccessedAt: time.Unix(5, 0).UTC(), EmbeddingModel: "m"}
	f.Add(packNode(&full))
	withTenant := full
	withTenant.TenantID = "acme"
	f.Add(packNode(&withTenant))
	f.Add(packNode(&memory.Node{ID: "x"}))
	f.Add("")
	f.Add("\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := unpackNode(s)
		if err != nil {
			return
		}
		again, err := unpackNode(packNode(&n))
		if err != nil || !sameNode(n, again) {
			t.Fatalf("repacking changed the node (%v):\n%+v\n%+v", err, n, again)
		}
	})
}

// FuzzDecodeEdge: edge records decode or fail, never panic; a decoded edge
// survives encode -> decode.
func FuzzDecodeEdge(f *testing.F) {
	f.Add(`{"src":"a","dst":"b","relation":"about","weight":1.25,"valid_from":"2026-03-01T10:00:00Z"}`)
	f.Add(`{"src":1}`)
	f.Add(`not json`)
	f.Fuzz(func(t *testing.T, raw string) {
		e, err := decodeEdge(raw)
		if err != nil {
			return
		}
		e2, err := decodeEdge(encodeEdge(e))
		if err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		if !e.ValidFrom.Equal(e2.ValidFrom) || !e.ValidTo.Equal(e2.ValidTo) || e.Src != e2.Src || e.Dst != e2.Dst ||
			e.Relation != e2.Relation || (e.Weight != e2.Weight && !math.IsNaN(e.Weight)) {
			t.Fatalf("round trip changed the edge: %+v %+v", e, e2)
		}
	})
}

// FuzzParseRange: turn records parse or fail, never panic.
func FuzzParseRange(f *testing.F) {
	f.Add("1,3")
	f.Add("5,4")
	f.Add(",")
	f.Add("x,1")
	f.Fuzz(func(t *testing.T, s string) {
		a, b, err := parseRange(s)
		if err == nil && s != "" && !strings.Contains(s, ",") {
			t.Fatalf("parsed %q without a comma: %d %d", s, a, b)
		}
	})
}

// FuzzDocTokens: the document tokenizer agrees with memory.Terms, the query
// tokenizer: every query term of a text is a term of the document made of
// that text, so a query always finds the words it was made from.
func FuzzDocTokens(f *testing.F) {
	f.Add("Use PostgreSQL replication for the orders DB")
	f.Add("pkg/memory/redis/store.go: a_b-c Ünïcödé 東京 x y")
	f.Add(strings.Repeat("long", 40) + " word")
	f.Fuzz(func(t *testing.T, text string) {
		tf, length := docTokens(&memory.Node{Label: text})
		total := 0
		for _, c := range tf {
			total += c
		}
		if total != length {
			t.Fatalf("term counts add up to %d, length %d", total, length)
		}
		for _, q := range memory.Terms(text) {
			if _, ok := tf[cutTerm(q)]; !ok {
				t.Fatalf("query term %q of %q is not indexed (%v)", q, text, tf)
			}
		}
		for term := range tf {
			if len(term) > maxTermBytes {
				t.Fatalf("term %q longer than %d bytes", term, maxTermBytes)
			}
		}
	})
}

// FuzzSpace: a tenant's project has one space name that unspace reads back,
// no two (tenant, project) pairs share one, and the default tenant's space
// is the project id itself (the keys from before tenants).
func FuzzSpace(f *testing.F) {
	f.Add("", "p", "acme", "p")
	f.Add("acme", "", "", "acme")
	f.Add("a", "b\xffc", "a\xffb", "c")
	f.Add("t", "{braces}", "", "{braces}")
	f.Fuzz(func(t *testing.T, t1, p1, t2, p2 string) {
		if !utf8.ValidString(t1) || !utf8.ValidString(p1) || !utf8.ValidString(t2) || !utf8.ValidString(p2) {
			return // the store refuses ids that are not UTF-8 (memory.PrepareNew, CheckSession)
		}
		a, b := memory.ProjectRef{Tenant: t1, Project: p1}, memory.ProjectRef{Tenant: t2, Project: p2}
		if got := unspace(space(a)); got != a {
			t.Fatalf("unspace(space(%q)) = %q", a, got)
		}
		if a != b && (space(a) == space(b) || tagOf(space(a)) == tagOf(space(b))) {
			t.Fatalf("%q and %q share a space or a tag: %q, %q", a, b, space(a), tagOf(space(a)))
		}
		if t1 == "" && space(a) != p1 {
			t.Fatalf("the default tenant's space of %q is %q", p1, space(a))
		}
		if t1 != "" && !strings.HasPrefix(tagOf(space(a)), "{t:") {
			t.Fatalf("a tenant's tag: %q", tagOf(space(a)))
		}
	})
}

// TestPackedTenant: a node of the default tenant packs exactly as before
// tenants (older replicas read it), a tenant's node carries its tenant.
func TestPackedTenant(t *testing.T) {
	n := memory.Node{ID: "n1", Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: "p", Label: "l"}
	def := packNode(&n)
	n.TenantID = "acme"
	ten := packNode(&n)
	if !strings.HasPrefix(ten, def) || ten == def {
		t.Fatalf("a tenant's packed node is the default one's plus the tenant: %q vs %q", def, ten)
	}
	got, err := unpackNode(ten)
	if err != nil || got.TenantID != "acme" {
		t.Fatalf("unpack: %+v %v", got, err)
	}
	if got, err := unpackNode(def); err != nil || got.TenantID != "" {
		t.Fatalf("unpack of the default: %+v %v", got, err)
	}
	if f, ok := fieldsNode("session\x1fhere\x1f\x1f\x1f\x1f0.5\x1fdecision\x1fs", space(memory.ProjectRef{Tenant: "acme", Project: "p"})); !ok ||
		f.TenantID != "acme" || f.ProjectID != "p" {
		t.Fatalf("fieldsNode of a tenant's vis value: %+v %v", f, ok)
	}
}
