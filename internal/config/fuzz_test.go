package config_test

import (
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/config"
)

// FuzzParseDuration: the duration decoder never panics and what it accepts
// is not negative for inputs without a sign.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"30s", "7d", "1d12h", "", "d", "-5m", "9999999999d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := config.ParseDuration(s)
		if err == nil && !strings.Contains(s, "-") && d < 0 {
			t.Fatalf("ParseDuration(%q) = %s: negative without a sign", s, d)
		}
	})
}
