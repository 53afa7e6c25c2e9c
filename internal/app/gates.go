package app

import (
	"context"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// StoreGate is a runner gate that holds while the store answers: a worker
// whose store is down stops pulling (events wait in the stream).
func StoreGate(s memory.Store) runner.Gate {
	return runner.GateFunc(StoreCheck(s).Run)
}

// ModelGate is a runner gate that holds while Ollama answers and every
// configured model is installed. Use it for workers that cannot work
// without the chat model (extractor, consolidator, compactor), not for the
// injector.
func ModelGate(c *llm.Client) runner.Gate {
	return runner.GateFunc(func(ctx context.Context) error {
		_, err := c.Check(ctx)
		return err
	})
}
