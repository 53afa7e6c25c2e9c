package hashembed

import (
	"context"
	"math"
	"strings"
	"testing"
)

func cos(a, b []float32) float64 {
	var d float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
	}
	return d // vectors are unit length
}

// A paraphrase set in the style of stored memories: each anchor has a
// related text (same fact, reworded, sharing some words or stems) and an
// unrelated one. A lexical embedder must rank related above unrelated.
var paraphrases = []struct{ anchor, related, unrelated string }{
	{"The user prefers tabs over spaces for indentation", "Indent with tabs, not spaces, as the user prefers", "The deploy pipeline runs on every merge to main"},
	{"Deploys go through the staging cluster first", "Always deploy to staging before the production cluster", "The user's cat is called Miso"},
	{"Never run database migrations on Fridays", "Database migrations must not run on a Friday", "Use vim keybindings in the editor"},
	{"The API rate limit is 100 requests per minute", "Requests to the API are limited to 100 per minute", "Tests are written with the testify package"},
	{"Alice owns the billing service", "The billing service is owned by Alice", "The office moved to Berlin in March"},
	{"Build failed because the Go toolchain was outdated", "Outdated Go toolchain caused the build failure", "She likes hiking in the mountains on weekends"},
	{"Redis cluster uses hash tags for project keys", "Project keys share a hash tag in the Redis cluster", "The quarterly report is due next Thursday"},
	{"User is allergic to peanuts", "Peanut allergy: the user must avoid peanuts", "Kubernetes pods restart when memory runs out"},
	{"Prefer table-driven tests in Go code", "Go tests should be table driven", "The meeting with the design team was cancelled"},
	{"Logs are shipped to Loki via promtail", "promtail ships the logs into Loki", "He switched from coffee to green tea"},
	{"Running integration tests requires Docker", "Docker is required to run the integration tests", "Paris is the capital of France"},
	{"The password reset email is sent by the auth service", "Auth service sends password-reset emails", "Our team plays football on Tuesdays"},
}

func TestParaphrasesScoreAboveUnrelated(t *testing.T) {
	e := New(0)
	var margin float64
	for _, p := range paraphrases {
		a, r, u := e.Vector(p.anchor), e.Vector(p.related), e.Vector(p.unrelated)
		rel, unrel := cos(a, r), cos(a, u)
		if rel <= unrel {
			t.Errorf("%q: related %.3f <= unrelated %.3f", p.anchor, rel, unrel)
		}
		margin += rel - unrel
	}
	margin /= float64(len(paraphrases))
	if margin < 0.2 {
		t.Errorf("mean margin %.3f: related texts barely beat unrelated ones", margin)
	}
	t.Logf("mean cosine margin related-unrelated: %.3f", margin)
}

// Retrieval-style check: for each related text as a query, the anchor is the
// best of all anchors.
func TestParaphraseRetrieval(t *testing.T) {
	e := New(0)
	anchors := make([][]float32, len(paraphrases))
	for i, p := range paraphrases {
		anchors[i] = e.Vector(p.anchor)
	}
	hits := 0
	for i, p := range paraphrases {
		q := e.Vector(p.related)
		best, bestScore := -1, -2.0
		for j, a := range anchors {
			if s := cos(q, a); s > bestScore {
				best, bestScore = j, s
			}
		}
		if best == i {
			hits++
		} else {
			t.Logf("query %q retrieved %q", p.related, paraphrases[best].anchor)
		}
	}
	if hits < len(paraphrases)-1 {
		t.Fatalf("top-1 retrieval %d/%d", hits, len(paraphrases))
	}
}

func TestDeterministicUnitVectors(t *testing.T) {
	e := New(128)
	if e.Dim() != 128 || e.Model() != "hashembed-v1-128" || !strings.Contains(e.Description(), "lexical, not semantic") {
		t.Fatalf("dim %d model %q description %q", e.Dim(), e.Model(), e.Description())
	}
	vs, err := e.Embed(context.Background(), []string{"Hello, world!", "hello world", "", "the a of"})
	if err != nil {
		t.Fatal(err)
	}
	again := New(128).Vector("Hello, world!")
	for i := range again {
		if again[i] != vs[0][i] {
			t.Fatal("not deterministic")
		}
	}
	for i, v := range [][]float32{vs[0], vs[3]} {
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		if math.Abs(n-1) > 1e-5 {
			t.Errorf("vector %d norm² %f", i, n)
		}
	}
	if c := cos(vs[0], vs[1]); c < 0.999 {
		t.Errorf("case and punctuation change the vector: cos %f", c)
	}
	for _, x := range vs[2] {
		if x != 0 {
			t.Fatal("empty text is not the zero vector")
		}
	}
	if New(0).Dim() != DefaultDim || len(New(-3).Vector("x")) != DefaultDim {
		t.Fatal("default dim")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, []string{"x"}); err == nil {
		t.Fatal("canceled context ignored")
	}
}

func TestStem(t *testing.T) {
	for in, want := range map[string]string{"deploys": "deploy", "deploying": "deploy", "deployed": "deploy",
		"libraries": "library", "tests": "test", "bus": "bu", "go": "go", "quickly": "quick"} {
		if got := stem(in); got != want {
			t.Errorf("stem(%q) = %q, want %q", in, got, want)
		}
	}
}

var sink []float32

func BenchmarkVector(b *testing.B) {
	e := New(0)
	text := "The user prefers table-driven tests in Go and wants deploys to go through the staging cluster before production; never run migrations on Fridays."
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		sink = e.Vector(text)
	}
}

func BenchmarkEmbedBatch32(b *testing.B) {
	e := New(0)
	texts := make([]string, 32)
	for i := range texts {
		texts[i] = paraphrases[i%len(paraphrases)].anchor + " " + paraphrases[i%len(paraphrases)].related
	}
	for b.Loop() {
		if _, err := e.Embed(context.Background(), texts); err != nil {
			b.Fatal(err)
		}
	}
}
