package consolidate

import (
	"errors"
	"fmt"
	"time"
)

// Config holds the consolidator's constants. Defaults gives the values of
// issue 20; Validate reports every problem at once.
type Config struct {
	Limits Limits // step budget (12), nudges (2), recalls in a row (3)

	// The transcript window: the oldest messages after the cursor, at
	// most WindowMessages of them, each cut to MessageChars, WindowChars
	// in all, and as many as fit the context (BudgetFor(window).Transcript).
	WindowMessages int // (20)
	MessageChars   int // (4,000)
	WindowChars    int // (40,000)

	// ContextTokens is the context window assumed when the chat client
	// cannot tell the model's (a Chatter without ContextLength); 0:
	// llm.DefaultContextLength. The llm.Client tells it
	// (ENGRAM_CONSOLIDATE_CONTEXT_LENGTH, else the model's own from
	// Ollama), and every step's prompt is bounded by it (BudgetFor).
	ContextTokens int // (0)
	// ReplyTokens bounds a step's reply (num_predict): a tool call with
	// its longest arguments is ~250 tokens.
	ReplyTokens int // (512)

	// Attempts bounds the passes over one window that end stuck (prose
	// only) or over budget: the cursor stays and the next pass reads the
	// window again, halved; after Attempts such passes the cursor moves
	// past the last one's window anyway (verdict skipped).
	Attempts int // (3)

	// MemoryTokens bounds the stored memories shown each step (512).
	MemoryTokens int

	// remember's duplicate rules.
	SimilarCosine  float64 // a near-duplicate by meaning (0.85)
	SimilarOverlap float64 // a near-duplicate by words: Jaccard of the terms (0.5)
	RecentFacts    int     // recent facts of the project compared by words (32)

	RecallHits int // memories one recall returns (8)

	LeaseTTL    time.Duration // per-session lease, renewed at a third (1m)
	Temperature float64       // (0.1)
	CallTimeout time.Duration // 0: the llm role's timeout
}

// Defaults returns the constants of issue 20.
func Defaults() Config {
	return Config{
		Limits:         DefaultLimits(),
		WindowMessages: 20, MessageChars: 4000, WindowChars: 40000,
		ReplyTokens: 512, Attempts: 3,
		MemoryTokens:  512,
		SimilarCosine: 0.85, SimilarOverlap: 0.5, RecentFacts: 32,
		RecallHits: 8,
		LeaseTTL:   time.Minute, Temperature: 0.1,
	}
}

// Validate lists every problem of c.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("consolidate: "+format, a...)) }
	pos := func(name string, v int) {
		if v < 1 {
			bad("%s %d must be at least 1", name, v)
		}
	}
	pos("step budget", c.Limits.Budget)
	pos("recall limit", c.Limits.RecallLimit)
	pos("window messages", c.WindowMessages)
	pos("message chars", c.MessageChars)
	pos("window chars", c.WindowChars)
	pos("memory tokens", c.MemoryTokens)
	pos("recent facts", c.RecentFacts)
	pos("recall hits", c.RecallHits)
	pos("reply tokens", c.ReplyTokens)
	pos("attempts", c.Attempts)
	if c.ContextTokens < 0 {
		bad("context tokens %d is negative", c.ContextTokens)
	} else if err := c.Budget().check(); err != nil {
		bad("%v", err)
	}
	if c.Limits.MaxNudges < 0 {
		bad("max nudges %d is negative", c.Limits.MaxNudges)
	}
	if c.SimilarCosine <= 0 || c.SimilarCosine > 1 {
		bad("similar cosine %v is outside (0, 1]", c.SimilarCosine)
	}
	if c.SimilarOverlap <= 0 || c.SimilarOverlap > 1 {
		bad("similar overlap %v is outside (0, 1]", c.SimilarOverlap)
	}
	if c.LeaseTTL <= 0 {
		bad("lease TTL %v must be positive", c.LeaseTTL)
	}
	if c.Temperature < 0 || c.Temperature > 2 {
		bad("temperature %v is outside [0, 2]", c.Temperature)
	}
	if c.CallTimeout < 0 {
		bad("call timeout %v is negative", c.CallTimeout)
	}
	return errors.Join(errs...)
}
