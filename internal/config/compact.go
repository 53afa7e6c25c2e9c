package config

import (
	"errors"
	"strings"
	"time"
)

// compactSettings are the compactor's settings (ENGRAM_COMPACT_*); its
// model is ENGRAM_SUMMARIZE_MODEL, the model's window
// ENGRAM_SUMMARIZE_CONTEXT_LENGTH.
func (c *Config) compactSettings() []Setting {
	return []Setting{
		{Flag: "summarize-context-length", Env: "ENGRAM_SUMMARIZE_CONTEXT_LENGTH", Group: Runtime, value: (*intV)(&c.LLM.Summarize.ContextLength),
			Usage: "compactor: the summarize model's context window in tokens, sent as num_ctx on every call; larger compactions are done in steps that fit it (0: the model's own from Ollama, at most 32768)"},
		{Flag: "compact-threshold", Env: "ENGRAM_COMPACT_THRESHOLD", Group: Runtime, value: &c.Compact.Threshold,
			Usage: "compactor: compact when the context reaches this: a fraction of the model's context window (0.5) or tokens (64000)"},
		{Flag: "compact-fallback-tokens", Env: "ENGRAM_COMPACT_FALLBACK_TOKENS", Group: Runtime, value: (*int64V)(&c.Compact.FallbackTokens),
			Usage: "compactor: the threshold in tokens when it is a fraction and the report carries no context window"},
		{Flag: "compact-project-thresholds", Env: "ENGRAM_COMPACT_PROJECT_THRESHOLDS", Group: Runtime, value: &c.Compact.Projects,
			Usage: "compactor: per-project thresholds, e.g. acme/web=0.6,ops=100000"},
		{Flag: "compact-keep-recent", Env: "ENGRAM_COMPACT_KEEP_RECENT", Group: Runtime, value: (*intV)(&c.Compact.KeepRecent),
			Usage: "compactor: the most recent messages are never compacted"},
		{Flag: "compact-backoff", Env: "ENGRAM_COMPACT_BACKOFF", Group: Runtime, value: (*durListV)(&c.Compact.Backoff),
			Usage: "compactor: delays before the retries of a failed compaction (the last repeats)"},
		{Flag: "compact-max-failures", Env: "ENGRAM_COMPACT_MAX_FAILURES", Group: Runtime, value: (*intV)(&c.Compact.MaxFailures),
			Usage: "compactor: failed attempts before a report is dead-lettered (the transcript stays; the next report retries)"},
	}
}

// durListV is a comma-separated list of durations.
type durListV []time.Duration

func (v *durListV) String() string {
	parts := make([]string, len(*v))
	for i, d := range *v {
		parts[i] = formatDuration(d)
	}
	return strings.Join(parts, ",")
}

func (v *durListV) Set(s string) error {
	var out []time.Duration
	var errs []error
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		d, err := ParseDuration(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, d)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	*v = out
	return nil
}
