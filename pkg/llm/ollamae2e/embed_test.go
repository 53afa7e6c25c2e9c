package ollamae2e

import (
	"math"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/tools/tinymodel/tiny"
)

var embedTexts = []string{
	"the user prefers tabs",
	"never run migrations on Friday",
	"x",
	strings.Repeat("a long text that goes on ", 40),
	"the user prefers tabs", // same text twice: same vector
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// TestEmbeddings: one unit vector of the model width per text, in order,
// the same however the texts are batched.
func TestEmbeddings(t *testing.T) {
	ctx := ctxT(t)
	one := client(t, func(cfg *llm.Config) { cfg.EmbedBatch = 32 }).Embedder()
	vecs, err := one.Embed(ctx, embedTexts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != len(embedTexts) {
		t.Fatalf("%d vectors for %d texts", len(vecs), len(embedTexts))
	}
	if one.Dim() != tiny.Width || one.Model() != embedModel {
		t.Errorf("Dim %d Model %q, want %d %q", one.Dim(), one.Model(), tiny.Width, embedModel)
	}
	for i, v := range vecs {
		if len(v) != tiny.Width {
			t.Errorf("vector %d has dimension %d, want %d", i, len(v), tiny.Width)
		}
		if n := norm(v); math.Abs(n-1) > 1e-3 {
			t.Errorf("vector %d has norm %v, want 1", i, n)
		}
	}
	if d := maxDiff(vecs[0], vecs[4]); d > 1e-5 {
		t.Errorf("same text, vectors differ by %v", d)
	}
	for i := 1; i < 4; i++ {
		if d := maxDiff(vecs[0], vecs[i]); d < 1e-3 {
			t.Errorf("texts 0 and %d embed the same (max diff %v)", i, d)
		}
	}

	// Batches of two: three /api/embed calls, same vectors.
	two := client(t, func(cfg *llm.Config) { cfg.EmbedBatch = 2 }).Embedder()
	vecs2, err := two.Embed(ctx, embedTexts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs2) != len(vecs) {
		t.Fatalf("batched: %d vectors", len(vecs2))
	}
	for i := range vecs {
		if d := maxDiff(vecs[i], vecs2[i]); d > 1e-4 {
			t.Errorf("text %d: batched vector differs by %v", i, d)
		}
	}

	// The chat model (same weights, chat template) embeds too.
	chatEmb := client(t, func(cfg *llm.Config) { cfg.Embed.Name = chatModel }).Embedder()
	v3, err := chatEmb.Embed(ctx, embedTexts[:1])
	if err != nil {
		t.Fatalf("embed with the chat model: %v", err)
	}
	if len(v3[0]) != tiny.Width {
		t.Errorf("chat model embedding dimension %d", len(v3[0]))
	}
}

func TestEmbedEmptyInput(t *testing.T) {
	e := client(t).Embedder()
	vecs, err := e.Embed(ctxT(t), nil)
	if err != nil || len(vecs) != 0 {
		t.Errorf("no texts: %d vectors, %v", len(vecs), err)
	}
}
