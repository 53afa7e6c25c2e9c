package extract

import (
	"context"

	"github.com/engram-memory/engram/pkg/llm"
)

// ModelGate returns a readiness check for the runner: it fails while Ollama
// cannot be reached or the extraction model is not installed (llm.RoleGate;
// other roles' missing models do not hold the extractor), so that
// turn_ended events wait in the stream instead of spending deliveries.
func ModelGate(c llm.Checker) func(ctx context.Context) error {
	return llm.RoleGate(c, llm.RoleExtract)
}
