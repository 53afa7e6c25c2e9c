package llm_test

import (
	"errors"
	"testing"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/hashembed"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

func TestOllamaEmbedBatchesAndDim(t *testing.T) {
	srv := llmtest.New(t, llmtest.WithEmbedDim(64))
	cfg := srv.Config()
	cfg.EmbedBatch = 2
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	emb := c.Embedder()
	if emb.Model() != llmtest.EmbedModel || emb.Dim() != 0 {
		t.Fatalf("before any call: model %q dim %d", emb.Model(), emb.Dim())
	}
	texts := []string{"deploy with make", "use tabs", "the cat sat", "vim is the editor", "go test"}
	vecs, err := emb.Embed(ctx(t), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 5 || srv.Calls("/api/embed") != 3 || emb.Dim() != 64 {
		t.Fatalf("%d vectors in %d calls, dim %d", len(vecs), srv.Calls("/api/embed"), emb.Dim())
	}
	// Order is kept: each vector is the hashing embedder's for its text.
	want := hashembed.New(64)
	for i, text := range texts {
		w := want.Vector(text)
		for j := range w {
			if w[j] != vecs[i][j] {
				t.Fatalf("vector %d differs from the text's embedding", i)
			}
		}
	}
	for _, r := range srv.Requests() {
		if r.Embed != nil && (r.Embed.KeepAlive == nil || r.Embed.Truncate == nil || !*r.Embed.Truncate) {
			t.Fatalf("embed request without keep-alive/truncate: %+v", r.Embed)
		}
	}
	if out, err := emb.Embed(ctx(t), nil); err != nil || len(out) != 0 {
		t.Fatalf("empty batch: %v %v", out, err)
	}
}

func TestOllamaEmbedDimFromCheckAndMismatch(t *testing.T) {
	srv := llmtest.New(t, llmtest.WithEmbedDim(32))
	c := srv.Client()
	rd, err := c.Check(ctx(t))
	if err != nil || rd.EmbedDim != 32 || c.Embedder().Dim() != 32 {
		t.Fatalf("check: %+v %v", rd, err)
	}
	cfg := srv.Config()
	cfg.EmbedDim = 16 // the model really makes 32
	c2, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c2.Embedder().Embed(ctx(t), []string{"x"})
	if !errors.Is(err, llm.ErrInvalidRequest) {
		t.Fatalf("dimension mismatch: %v", err)
	}
}

func TestOllamaEmbedFaults(t *testing.T) {
	srv := llmtest.New(t)
	srv.OnEmbed(llmtest.ServerError("out of memory"), llmtest.InvalidSchema())
	emb := srv.Client().Embedder()
	if _, err := emb.Embed(ctx(t), []string{"x"}); !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("500: %v", err)
	}
	if _, err := emb.Embed(ctx(t), []string{"x"}); !errors.Is(err, llm.ErrInvalidRequest) {
		t.Fatalf("permanent 500: %v", err)
	}
	if _, err := emb.Embed(ctx(t), []string{"x"}); err != nil {
		t.Fatalf("after faults: %v", err)
	}
}

func TestNoEmbedModelMeansNoOllamaEmbedder(t *testing.T) {
	srv := llmtest.New(t)
	cfg := srv.Config()
	cfg.Embed.Name = ""
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.Embedder() != nil {
		t.Fatal("embedder without a model")
	}
	rd, err := c.Check(ctx(t))
	if err != nil || len(rd.Models) != 3 {
		t.Fatalf("check without embed model: %+v %v", rd, err)
	}
}
