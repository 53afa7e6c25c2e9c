package extract

import (
	"errors"
	"fmt"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// Config holds the extractor's constants. Defaults gives the values of issue
// 5; Validate reports every problem at once.
type Config struct {
	// Ranking weighs the related-memories look-up as the injector ranks
	// (inject.Config.RankingFor the embedder); nil: memory.Retrieve's default.
	Ranking *memory.Ranking
	// Transcript rendering.
	AssistantChars  int // assistant text per message (2,000)
	FailedToolChars int // failed tool result shown (600)
	TranscriptChars int // whole transcript, keeping the tail (24,000)
	MinSpanChars    int // spans whose transcript is shorter are skipped (24)

	// Related memories.
	RelatedQueryChars    int     // the last characters of the transcript used as the query (4,000)
	RelatedLimit         int     // related memories shown (12)
	RelatedMinConfidence float64 // (0.25)
	RelatedLineChars     int     // first characters of the first line shown (200)
	InjectedLabelChars   int     // injected label shown (300)

	// Writing.
	// CrossProject lets a memory be global (within its tenant) or reach
	// the tenant's other projects, as the model proposes (true). False
	// (ENGRAM_CROSS_PROJECT=false: e.g. a platform whose projects are its
	// end users): every memory the model proposes stays in its project,
	// reach here, whatever scope and reach it names.
	CrossProject bool
	MaxMemories  int     // memories accepted from one reply (5)
	SameCosine   float64 // a memory this close to one written earlier in the span reinforces it (0.85)

	// Failure handling.
	MaxInvalid   int           // invalid replies (after the repair attempt) before a span is dead-lettered (3)
	InvalidDelay time.Duration // first retry delay after an invalid reply; doubles each failure (30s)

	// Coordination.
	LeaseTTL  time.Duration // per-session lease; must be shorter than the consumer's ack wait (30s)
	RecordTTL time.Duration // processed records (turn extracted, feedback applied) (30 days)
	// InjectionWait bounds how long a span waits for the injection record
	// of a turn that the platform says carried memories, from the first
	// time a span found it missing, on the store's clock (1m; see
	// ErrInjectionPending).
	InjectionWait time.Duration
	ScanWindow    int // messages read back to find the span start, widened x8 when needed (16)
	MaxSpanLoops  int // spans extracted by one lease holder before it lets go (16)
	// SpanTurns bounds a span: at most this many turns, and no more than
	// fit TranscriptChars rendered (at least one turn), so that a backlog
	// (turns stored while the model was down) is extracted oldest first in
	// spans the model reads whole, never one span cut at its head (8).
	SpanTurns int

	// Embedding.
	EmbedBatch    int           // texts per embedding call (32)
	BacklogPeriod time.Duration // how often the backlog embedder looks for memories without a vector (5s)

	// Model call.
	Temperature float64       // (0.1)
	CallTimeout time.Duration // 0: the llm role's timeout
}

// Defaults returns the constants of issue 5.
func Defaults() Config {
	return Config{
		AssistantChars: 2000, FailedToolChars: 600, TranscriptChars: 24000, MinSpanChars: 24,
		RelatedQueryChars: 4000, RelatedLimit: 12, RelatedMinConfidence: 0.25, RelatedLineChars: 200,
		InjectedLabelChars: 300,
		CrossProject:       true, MaxMemories: 5, SameCosine: 0.85,
		MaxInvalid: 3, InvalidDelay: 30 * time.Second,
		LeaseTTL: 30 * time.Second, RecordTTL: 30 * 24 * time.Hour, InjectionWait: time.Minute, ScanWindow: 16, MaxSpanLoops: 16, SpanTurns: 8,
		EmbedBatch: 32, BacklogPeriod: 5 * time.Second,
		Temperature: 0.1,
	}
}

// Validate lists every problem of c.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("extract: "+format, a...)) }
	pos := func(name string, v int) {
		if v < 1 {
			bad("%s %d must be at least 1", name, v)
		}
	}
	pos("assistant chars", c.AssistantChars)
	pos("failed tool chars", c.FailedToolChars)
	pos("transcript chars", c.TranscriptChars)
	pos("related query chars", c.RelatedQueryChars)
	pos("related line chars", c.RelatedLineChars)
	pos("injected label chars", c.InjectedLabelChars)
	pos("max invalid", c.MaxInvalid)
	pos("scan window", c.ScanWindow)
	pos("max span loops", c.MaxSpanLoops)
	pos("span turns", c.SpanTurns)
	pos("embed batch", c.EmbedBatch)
	if c.MinSpanChars < 0 {
		bad("min span chars %d is negative", c.MinSpanChars)
	}
	if c.RelatedLimit < 0 {
		bad("related limit %d is negative", c.RelatedLimit)
	}
	if c.RelatedMinConfidence < 0 || c.RelatedMinConfidence > 1 {
		bad("related min confidence %v is outside [0, 1]", c.RelatedMinConfidence)
	}
	if c.MaxMemories < 0 || c.MaxMemories > MaxReplyMemories {
		bad("max memories %d is outside [0, %d]", c.MaxMemories, MaxReplyMemories)
	}
	if c.SameCosine <= 0 || c.SameCosine > 1 {
		bad("same cosine %v is outside (0, 1]", c.SameCosine)
	}
	if c.InvalidDelay <= 0 {
		bad("invalid delay %v must be positive", c.InvalidDelay)
	}
	if c.LeaseTTL <= 0 {
		bad("lease TTL %v must be positive", c.LeaseTTL)
	}
	if c.RecordTTL <= 0 {
		bad("record TTL %v must be positive", c.RecordTTL)
	}
	if c.InjectionWait <= 0 {
		bad("injection wait %v must be positive", c.InjectionWait)
	}
	if c.BacklogPeriod <= 0 {
		bad("backlog period %v must be positive", c.BacklogPeriod)
	}
	if c.Temperature < 0 || c.Temperature > 2 {
		bad("temperature %v is outside [0, 2]", c.Temperature)
	}
	if c.CallTimeout < 0 {
		bad("call timeout %v is negative", c.CallTimeout)
	}
	return errors.Join(errs...)
}
