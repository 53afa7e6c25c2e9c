package app

import (
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/hashembed"
)

// Embedder is the process's embedder: the Ollama embedding model when one is
// configured (ENGRAM_EMBED_MODEL), else the built-in hashing embedder
// (lexical, not semantic). Every worker must use the same one: the
// injector's readiness gate waits for vectors of its model.
type Embedder interface {
	llm.Embedder
}

// NewEmbedder returns the embedder of cfg.
func NewEmbedder(cfg config.Config, c *llm.Client) Embedder {
	if cfg.LLM.Embed.Name != "" {
		return c.Embedder()
	}
	return hashembed.New(cfg.LLM.EmbedDim)
}
