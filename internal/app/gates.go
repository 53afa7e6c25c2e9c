package app

import (
	"context"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// StoreGate is a runner gate that holds while the store answers and every
// memory is loaded: a worker whose store is down stops pulling (events wait
// in the stream), as does one whose SQLite store is still loading its
// in-memory index after start (the extractor, consolidator and compactor
// judge and write memories against the whole graph).
func StoreGate(s memory.Store) runner.Gate {
	return runner.GateFunc(func(ctx context.Context) error {
		if err := reach(ctx, s); err != nil {
			return err
		}
		return loadGate(s, false)
	})
}

// ServingStoreGate is StoreGate for the injector: it holds while the store
// answers, also while the in-memory index is still loading, so that turns
// are answered from the memories loaded so far instead of waiting past
// their reply deadline.
func ServingStoreGate(s memory.Store) runner.Gate {
	return runner.GateFunc(func(ctx context.Context) error {
		if err := reach(ctx, s); err != nil {
			return err
		}
		return loadGate(s, true)
	})
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
