package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/compact"
)

func TestCompactSettings(t *testing.T) {
	c, _, err := load(t, map[string]string{
		"ENGRAM_COMPACT_THRESHOLD":          "100000",
		"ENGRAM_COMPACT_PROJECT_THRESHOLDS": "acme/web=0.6, ops=20000",
		"ENGRAM_COMPACT_KEEP_RECENT":        "10",
		"ENGRAM_COMPACT_BACKOFF":            "30s, 2m",
		"ENGRAM_SUMMARIZE_CONTEXT_LENGTH":   "16384",
	}, "-compact-fallback-tokens", "32000", "-compact-max-failures", "2")
	if err != nil {
		t.Fatal(err)
	}
	if c.LLM.Summarize.ContextLength != 16384 || c.LLM.Extract.ContextLength != 0 {
		t.Fatalf("summarize context length %d, extract %d", c.LLM.Summarize.ContextLength, c.LLM.Extract.ContextLength)
	}
	cc := c.Compact
	if cc.Threshold != (compact.Threshold{Tokens: 100000}) || cc.FallbackTokens != 32000 || cc.KeepRecent != 10 || cc.MaxFailures != 2 ||
		cc.Projects["acme/web"] != (compact.Threshold{Fraction: 0.6}) || cc.Projects["ops"] != (compact.Threshold{Tokens: 20000}) ||
		len(cc.Backoff) != 2 || cc.Backoff[0] != 30*time.Second || cc.Backoff[1] != 2*time.Minute {
		t.Fatalf("compact config %+v", cc)
	}
	if cc.ThresholdFor("acme/web", 100000) != 60000 || cc.ThresholdFor("other", 100000) != 100000 {
		t.Fatal("thresholds by project")
	}
	d := compact.Defaults()
	if d.ThresholdFor("p", 0) != 64000 || d.ThresholdFor("p", 200000) != 100000 {
		t.Fatal("default thresholds")
	}
	_, _, err = load(t, map[string]string{
		"ENGRAM_COMPACT_THRESHOLD":          "1.5",
		"ENGRAM_COMPACT_PROJECT_THRESHOLDS": "x",
		"ENGRAM_COMPACT_KEEP_RECENT":        "-2",
		"ENGRAM_COMPACT_BACKOFF":            "soon",
		"ENGRAM_SUMMARIZE_CONTEXT_LENGTH":   "100",
	})
	for _, want := range []string{"ENGRAM_COMPACT_THRESHOLD", "ENGRAM_COMPACT_PROJECT_THRESHOLDS", "keep recent", "ENGRAM_COMPACT_BACKOFF",
		"summarize model: context length 100"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
