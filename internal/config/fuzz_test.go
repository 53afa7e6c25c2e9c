package config_test

import (
	"flag"
	"io"
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

// FuzzSettingValues: every setting's decoder (durations, byte sizes, lists,
// role=n maps, booleans, numbers) never panics, and a value it accepts
// prints back to text it accepts again with the same result.
func FuzzSettingValues(f *testing.F) {
	for _, s := range []string{"512M", "1G", "7d", "injector=8,extractor=2", "a,b,,c", "on", "-3", "", "=", "1KiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		d := config.Default()
		for _, s := range d.Settings() {
			c := config.Default()
			fs := flag.NewFlagSet("fuzz", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			if err := c.Load(fs, nil, func(k string) (string, bool) { return in, k == s.Env }, config.All); err != nil {
				continue // invalid text or an invalid value: reported, fine
			}
			printed := fs.Lookup(s.Flag).Value.String()
			c2 := config.Default()
			fs2 := flag.NewFlagSet("fuzz", flag.ContinueOnError)
			fs2.SetOutput(io.Discard)
			if err := c2.Load(fs2, nil, func(k string) (string, bool) { return printed, k == s.Env }, config.All); err != nil {
				t.Fatalf("%s: %q accepted, printed as %q, which is refused: %v", s.Env, in, printed, err)
			}
			if again := fs2.Lookup(s.Flag).Value.String(); again != printed {
				t.Fatalf("%s: %q -> %q -> %q", s.Env, in, printed, again)
			}
		}
	})
}
