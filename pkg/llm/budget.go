package llm

import (
	"context"
	"sync"
	"time"
)

// Observer receives one CallInfo per model call (chat or embed), successful
// or not. The runtime adapts it to Prometheus; it must be fast and safe for
// concurrent use.
type Observer interface {
	ObserveCall(CallInfo)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(CallInfo)

// ObserveCall calls f.
func (f ObserverFunc) ObserveCall(ci CallInfo) { f(ci) }

// CallInfo describes one model call.
type CallInfo struct {
	Op               string // "chat" or "embed"
	Role             Role
	Project          string
	Model            string
	Latency          time.Duration
	PromptTokens     int
	CompletionTokens int
	Estimated        bool  // token counts are estimates
	Err              error // nil on success
	Class            Class // Classify(Err)
}

// TokenLedger records the tokens each project spent per UTC day. The default
// is in process memory (NewMemoryLedger); a runtime with several replicas
// passes one backed by its store so they share the budget.
type TokenLedger interface {
	// Spent returns the tokens project spent on day (midnight UTC).
	Spent(ctx context.Context, project string, day time.Time) (int64, error)
	// Add charges tokens to project on day.
	Add(ctx context.Context, project string, day time.Time, tokens int64) error
}

// MemoryLedger is an in-memory TokenLedger. It keeps only the latest day.
type MemoryLedger struct {
	mu    sync.Mutex
	day   time.Time
	spent map[string]int64
}

var _ TokenLedger = (*MemoryLedger)(nil)

// NewMemoryLedger returns an empty ledger.
func NewMemoryLedger() *MemoryLedger { return &MemoryLedger{spent: map[string]int64{}} }

// Spent implements TokenLedger.
func (l *MemoryLedger) Spent(_ context.Context, project string, day time.Time) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !day.Equal(l.day) {
		return 0, nil
	}
	return l.spent[project], nil
}

// Add implements TokenLedger.
func (l *MemoryLedger) Add(_ context.Context, project string, day time.Time, tokens int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if day.After(l.day) {
		l.day = day
		l.spent = map[string]int64{}
	}
	if day.Equal(l.day) {
		l.spent[project] += tokens
	}
	return nil
}

// dayOf is the UTC midnight starting t's day.
func dayOf(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
