package extract

import (
	"context"
	"errors"
	"fmt"

	"github.com/engram-memory/engram/pkg/llm"
)

// Checker reports whether Ollama is reachable and which models it has
// (llm.Client implements it).
type Checker interface {
	Check(ctx context.Context) (llm.Readiness, error)
}

var _ Checker = (*llm.Client)(nil)

// ModelGate returns a readiness check for the runner: it fails while Ollama
// cannot be reached or the extraction model is not installed (other roles'
// missing models do not hold the extractor), so that turn_ended events wait
// in the stream instead of spending deliveries.
func ModelGate(c Checker) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		rd, err := c.Check(ctx)
		if err == nil {
			return nil
		}
		if !errors.Is(err, llm.ErrModelMissing) {
			return err
		}
		for _, m := range rd.Models {
			if m.Role == llm.RoleExtract {
				if m.Present {
					return nil
				}
				return fmt.Errorf("extract: %w", err)
			}
		}
		return err
	}
}
