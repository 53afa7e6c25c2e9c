package memory

import (
	"context"
	"fmt"
)

// EmbedText is the text a memory's vector is made from: the label, a
// newline, the body. Every writer of vectors uses it, so that vectors of one
// model are comparable whoever made them.
func EmbedText(n *Node) string { return n.Label + "\n" + n.Body }

// Embedder makes vectors (pkg/llm's embedders satisfy it).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Model() string
}

// PendingStore is what EmbedPending needs of a store.
type PendingStore interface {
	PendingEmbeddings(ctx context.Context, model string, limit int) ([]Node, error)
	SetEmbedding(ctx context.Context, id, model string, vec []float32) error
}

// EmbedPending embeds the live memories that have no vector of emb's model,
// batch at a time, until none is left or a call fails. It returns how many
// it embedded. This is the readiness backlog: recall waits until it is empty.
func EmbedPending(ctx context.Context, st PendingStore, emb Embedder, batch int) (int, error) {
	if batch <= 0 {
		batch = 64
	}
	model := emb.Model()
	total := 0
	for {
		nodes, err := st.PendingEmbeddings(ctx, model, batch)
		if err != nil {
			return total, fmt.Errorf("memory: pending embeddings: %w", err)
		}
		if len(nodes) == 0 {
			return total, nil
		}
		texts := make([]string, len(nodes))
		for i := range nodes {
			texts[i] = EmbedText(&nodes[i])
		}
		vecs, err := emb.Embed(ctx, texts)
		if err != nil {
			return total, fmt.Errorf("memory: embed backlog: %w", err)
		}
		if len(vecs) != len(nodes) {
			return total, fmt.Errorf("memory: embed backlog: %d vectors for %d texts", len(vecs), len(nodes))
		}
		for i := range nodes {
			if err := st.SetEmbedding(ctx, nodes[i].ID, model, vecs[i]); err != nil {
				return total, fmt.Errorf("memory: store vector of %s: %w", nodes[i].ID, err)
			}
			total++
		}
	}
}
