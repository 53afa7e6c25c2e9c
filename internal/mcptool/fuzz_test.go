package mcptool

import (
	"strings"
	"testing"
)

// FuzzParseTokens: a tokens file of any bytes is accepted or refused with
// an error, never a panic; an accepted one has a principal and projects
// for every entry, and its tokens are found.
func FuzzParseTokens(f *testing.F) {
	f.Add("shop-token-0123456789abcdef agent shop\n")
	f.Add("# c\nsha256:" + strings.Repeat("ab", 32) + " ci a,b\nops-token-0123456789abcdef-x ops *\n")
	f.Add("short a b\n\n x y\n")
	f.Fuzz(func(t *testing.T, text string) {
		ts, err := ParseTokens(strings.NewReader(text))
		if err != nil {
			if ts != nil {
				t.Fatal("tokens with an error")
			}
			return
		}
		if len(ts.entries) == 0 {
			t.Fatal("accepted without a token")
		}
		for _, e := range ts.entries {
			if e.principal == "" || (!e.all && len(e.projects) == 0) {
				t.Fatalf("entry %+v", e)
			}
		}
		for line := range strings.SplitSeq(text, "\n") {
			if fs := strings.Fields(line); len(fs) == 3 && !strings.HasPrefix(fs[0], "#") && !strings.HasPrefix(fs[0], "sha256:") {
				if _, ok := ts.lookup(fs[0]); !ok {
					t.Fatalf("token %q not found", fs[0])
				}
			}
		}
	})
}
