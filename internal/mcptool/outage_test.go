package mcptool

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestEmbedderOutage: with Ollama's embedder down, recall is refused
// (never lexical-only) and an update is kept, waiting in the embedding
// backlog, which holds recall until the backlog is embedded.
func TestEmbedderOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := llmtest.New(t)
	emb := srv.Client().Embedder()
	st := storetest.OpenSQLite(t)
	r, err := st.Upsert(ctx, memory.Node{Subkind: memory.Decision, ProjectID: "shop", Label: "Stripe Checkout for payments"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := memory.EmbedPending(ctx, st, emb, 8); err != nil {
		t.Fatal(err)
	}
	tool, err := New(st, emb, Config{MinConfidence: 0.3})
	if err != nil {
		t.Fatal(err)
	}
	run := func(ops ...Op) []Result {
		t.Helper()
		resp, err := tool.Run(ctx, shop, Request{Ops: ops})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Results
	}
	if rs := run(Op{Op: OpRecall, Query: "Stripe Checkout"}); !rs[0].OK || len(rs[0].Memories) != 1 {
		t.Fatalf("recall with the embedder up: %+v", rs)
	}

	srv.Down()
	rs := run(Op{Op: OpRecall, Query: "Stripe Checkout"}, Op{Op: OpUpdate, ID: r.Node.ID, Body: str("Payment Links since May.")}, Op{Op: OpStats})
	if rs[0].OK || !strings.Contains(rs[0].Error, inject.SkipEmbedFailed) {
		t.Fatalf("recall with the embedder down: %+v", rs[0])
	}
	if !rs[1].OK || !strings.Contains(rs[1].Note, "embedding backlog") || rs[1].Memory.Text != "Stripe Checkout for payments: Payment Links since May." {
		t.Fatalf("update with the embedder down: %+v", rs[1])
	}
	if !rs[2].OK || rs[2].Stats.Counts.Pending != 1 || rs[2].Stats.Ready {
		t.Fatalf("stats: %+v", rs[2].Stats)
	}

	srv.Up()
	if rs := run(Op{Op: OpRecall, Query: "Payment Links"}); rs[0].OK || !strings.Contains(rs[0].Error, inject.SkipNotReady) {
		t.Fatalf("recall before the backlog is embedded: %+v", rs[0])
	}
	if n, err := memory.EmbedPending(ctx, st, emb, 8); err != nil || n != 1 {
		t.Fatalf("backlog: %d, %v", n, err)
	}
	if rs := run(Op{Op: OpRecall, Query: "Payment Links"}); !rs[0].OK || rs[0].Memories[0].ID != r.Node.ID {
		t.Fatalf("recall after the backlog: %+v", rs[0])
	}
}
