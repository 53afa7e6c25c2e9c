package compact

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Threshold is when a conversation is compacted: an absolute token count
// (Tokens > 0) or a fraction of the model's context window (Fraction in
// (0, 1]). It reads and prints as one number: "0.5" is a fraction, "64000"
// tokens (a flag.Value).
type Threshold struct {
	Tokens   int64
	Fraction float64
}

// String implements flag.Value.
func (t *Threshold) String() string {
	if t.Tokens > 0 {
		return strconv.FormatInt(t.Tokens, 10)
	}
	return strconv.FormatFloat(t.Fraction, 'g', -1, 64)
}

// Set implements flag.Value: a number in (0, 1] is a fraction of the
// context window, an integer above 1 is tokens.
func (t *Threshold) Set(s string) error {
	v, err := ParseThreshold(s)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// ParseThreshold reads "0.5" (a fraction of the context window) or "64000"
// (tokens).
func ParseThreshold(s string) (Threshold, error) {
	s = strings.TrimSpace(s)
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil:
		return Threshold{}, fmt.Errorf("threshold %q: not a number (a fraction like 0.5 or tokens like 64000)", s)
	case f > 0 && f <= 1:
		return Threshold{Fraction: f}, nil
	case f > 1 && f == float64(int64(f)):
		return Threshold{Tokens: int64(f)}, nil
	}
	return Threshold{}, fmt.Errorf("threshold %q: want a fraction in (0, 1] or a whole number of tokens above 1", s)
}

// Of is the threshold in tokens for a context window (0: unknown, then
// fallback applies to a fractional threshold).
func (t Threshold) Of(window, fallback int64) int64 {
	switch {
	case t.Tokens > 0:
		return t.Tokens
	case window > 0:
		return max(int64(t.Fraction*float64(window)), 1)
	}
	return fallback
}

func (t Threshold) valid() bool {
	return t.Tokens > 0 && t.Fraction == 0 || t.Tokens == 0 && t.Fraction > 0 && t.Fraction <= 1
}

// ProjectThresholds overrides the threshold per project ("acme/web=0.6,
// ops=100000"; a flag.Value). A project id may hold '=': the last one
// separates the threshold.
type ProjectThresholds map[string]Threshold

// String implements flag.Value.
func (p *ProjectThresholds) String() string {
	keys := make([]string, 0, len(*p))
	for k := range *p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		t := (*p)[k]
		parts[i] = k + "=" + t.String()
	}
	return strings.Join(parts, ",")
}

// Set implements flag.Value.
func (p *ProjectThresholds) Set(s string) error {
	m := ProjectThresholds{}
	var errs []error
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		i := strings.LastIndexByte(part, '=')
		if i <= 0 {
			errs = append(errs, fmt.Errorf("%q: want project=threshold", part))
			continue
		}
		t, err := ParseThreshold(part[i+1:])
		if err != nil {
			errs = append(errs, fmt.Errorf("%q: %w", part, err))
			continue
		}
		m[strings.TrimSpace(part[:i])] = t
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	*p = m
	return nil
}

// Config holds the compactor's constants. Defaults gives the values of
// issue 21; Validate reports every problem at once.
type Config struct {
	// Trigger.
	Threshold      Threshold         // default threshold (50% of the context window)
	FallbackTokens int64             // a fractional threshold when the report has no context window (64,000)
	Projects       ProjectThresholds // per-project thresholds
	KeepRecent     int               // messages never compacted (6)

	// Serialisation of the covered messages.
	ArgChars        int // tool-call arguments (1,200)
	MessageHead     int // long message content: head and tail kept (6,000 + 1,500)
	MessageTail     int
	ToolResultHead  int // long tool results (4,000 + 1,500)
	ToolResultTail  int
	OutputFraction  float64 // output budget: this fraction of the covered tokens (0.2) ...
	MinOutputTokens int     // ... between 2,000
	MaxOutputTokens int     // and 12,000
	Temperature     float64 // (0.3)
	CallTimeout     time.Duration

	// Failures: the delay before each retry (1, 5, 15 minutes; the last
	// repeats), and how many failed attempts before the report is
	// dead-lettered (the transcript stays; the next report tries again).
	Backoff     []time.Duration
	MaxFailures int // (4)

	// Coordination.
	LeaseTTL  time.Duration // per-session lease, renewed while the model works (30s)
	RecordTTL time.Duration // failure and publication records (30 days)
}

// Defaults returns the constants of issue 21.
func Defaults() Config {
	return Config{
		Threshold: Threshold{Fraction: 0.5}, FallbackTokens: 64000, KeepRecent: 6,
		ArgChars: 1200, MessageHead: 6000, MessageTail: 1500, ToolResultHead: 4000, ToolResultTail: 1500,
		OutputFraction: 0.2, MinOutputTokens: 2000, MaxOutputTokens: 12000, Temperature: 0.3,
		Backoff:     []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute},
		MaxFailures: 4,
		LeaseTTL:    30 * time.Second, RecordTTL: 30 * 24 * time.Hour,
	}
}

// ThresholdFor is the threshold of project in tokens for a context window
// (0: unknown).
func (c Config) ThresholdFor(project string, window int64) int64 {
	t, ok := c.Projects[project]
	if !ok {
		t = c.Threshold
	}
	return t.Of(window, c.FallbackTokens)
}

// Validate lists every problem of c.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("compact: "+format, a...)) }
	if !c.Threshold.valid() {
		bad("threshold %s: want a fraction in (0, 1] or tokens above 1", c.Threshold.String())
	}
	keys := make([]string, 0, len(c.Projects))
	for k := range c.Projects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if t := c.Projects[k]; k == "" || !t.valid() {
			bad("project threshold %q=%s: want a project id and a fraction in (0, 1] or tokens above 1", k, t.String())
		}
	}
	if c.FallbackTokens < 1 {
		bad("fallback tokens %d must be at least 1", c.FallbackTokens)
	}
	if c.KeepRecent < 0 {
		bad("keep recent %d is negative", c.KeepRecent)
	}
	for name, v := range map[string]int{"argument chars": c.ArgChars, "message head": c.MessageHead,
		"message tail": c.MessageTail, "tool result head": c.ToolResultHead, "tool result tail": c.ToolResultTail,
		"min output tokens": c.MinOutputTokens, "max failures": c.MaxFailures} {
		if v < 1 {
			bad("%s %d must be at least 1", name, v)
		}
	}
	if c.MaxOutputTokens < c.MinOutputTokens {
		bad("max output tokens %d is below min output tokens %d", c.MaxOutputTokens, c.MinOutputTokens)
	}
	if c.OutputFraction <= 0 || c.OutputFraction > 1 {
		bad("output fraction %v is outside (0, 1]", c.OutputFraction)
	}
	if c.Temperature < 0 || c.Temperature > 2 {
		bad("temperature %v is outside [0, 2]", c.Temperature)
	}
	if c.CallTimeout < 0 {
		bad("call timeout %v is negative", c.CallTimeout)
	}
	if len(c.Backoff) == 0 {
		bad("no retry backoff")
	}
	for i, d := range c.Backoff {
		if d <= 0 {
			bad("backoff %d (%v) must be positive", i+1, d)
		}
	}
	if c.LeaseTTL <= 0 {
		bad("lease TTL %v must be positive", c.LeaseTTL)
	}
	if c.RecordTTL <= 0 {
		bad("record TTL %v must be positive", c.RecordTTL)
	}
	return errors.Join(errs...)
}

// delay is the retry delay after the k-th failure (1-based).
func (c Config) delay(k int) time.Duration {
	return c.Backoff[min(max(k, 1), len(c.Backoff))-1]
}
