//go:build engram_testworker

package main

// A worker for the end-to-end test of `engram serve` (built only with
// -tags engram_testworker): it takes the consumer named by
// ENGRAM_TESTWORKER_ROLE (default compactor) and acks every event, except
// events of a project listed in the file ENGRAM_TESTWORKER_REJECT_FILE,
// which it rejects as permanent failures (dead letters).

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
)

func init() {
	role := os.Getenv("ENGRAM_TESTWORKER_ROLE")
	if role == "" {
		role = events.ConsumerCompactor
	}
	rejectFile := os.Getenv("ENGRAM_TESTWORKER_REJECT_FILE")
	registerWorker(app.ProvideWorker(func() app.Worker {
		return app.Worker{Role: role, Handler: func(_ context.Context, ev events.Envelope) error {
			if rejectFile == "" {
				return nil
			}
			data, err := os.ReadFile(rejectFile)
			if err != nil {
				return nil // no file: accept everything
			}
			for _, p := range strings.Fields(string(data)) {
				if p == ev.ProjectID {
					return runner.Permanent(errors.New("rejected by the test worker: project " + p))
				}
			}
			return nil
		}}
	}))
}
