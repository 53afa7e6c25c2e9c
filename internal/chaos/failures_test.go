package chaos_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// recT is the suite's *testing.T that also keeps the first line of every
// failed check, so that TestChaos can repeat them as its last lines: CI
// shows only the tail of a run's output, and the chaos log and the report
// come after the checks.
type recT struct {
	*testing.T
	mu    sync.Mutex
	fails []string
}

func (r *recT) note(msg string) {
	line, _, _ := strings.Cut(msg, "\n")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fails = append(r.fails, fmt.Sprintf("%.300s", line))
}

func (r *recT) Errorf(format string, args ...any) {
	r.T.Helper()
	r.note(fmt.Sprintf(format, args...))
	r.T.Errorf(format, args...)
}

func (r *recT) Error(args ...any) {
	r.T.Helper()
	r.note(fmt.Sprint(args...))
	r.T.Error(args...)
}

func (r *recT) Fatalf(format string, args ...any) {
	r.T.Helper()
	r.note(fmt.Sprintf(format, args...))
	r.T.Fatalf(format, args...)
}

func (r *recT) Fatal(args ...any) {
	r.T.Helper()
	r.note(fmt.Sprint(args...))
	r.T.Fatal(args...)
}

// summary logs the failed checks, at most 30 of them (TestChaos defers it,
// so it also follows a Fatal).
func (r *recT) summary() {
	r.T.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.fails) == 0 {
		return
	}
	shown := r.fails[:min(len(r.fails), 30)]
	r.T.Logf("%d failed checks (first line of each, the first %d):\n  %s", len(r.fails), len(shown), strings.Join(shown, "\n  "))
}
