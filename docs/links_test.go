// Package docs holds Engram's reference documentation; its test checks that
// every relative link of the README and of these pages leads somewhere.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	fence   = regexp.MustCompile("(?ms)^```.*?^```")
)

// anchor is GitHub's anchor of a heading: lower case, punctuation dropped
// (letters, digits, spaces, '-' and '_' kept), spaces as '-'.
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// anchors are the anchors of a markdown file's headings (code blocks
// left out), with GitHub's -1, -2 suffixes for repeated headings.
func anchors(md string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(md, ""), -1) {
		a := anchor(m[1])
		if n := seen[a]; n > 0 {
			out[a+"-"+string(rune('0'+n))] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestLinks: every relative link of README.md and docs/*.md names a file of
// the repository, and every #anchor a heading of the file it names.
func TestLinks(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md")
	if len(files) < 10 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		md := codeSpan.ReplaceAllString(fence.ReplaceAllString(string(raw), ""), "")
		for _, m := range mdLink.FindAllStringSubmatch(md, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %q: %v", f, target, err)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s: link %q: an anchor into a file that is not markdown", f, target)
				continue
			}
			body, err := os.ReadFile(dest)
			if err != nil {
				t.Fatal(err)
			}
			if !anchors(string(body))[frag] {
				t.Errorf("%s: link %q: %s has no heading with the anchor #%s", f, target, dest, frag)
			}
		}
	}
}

func TestAnchor(t *testing.T) {
	for h, want := range map[string]string{
		"Measuring retrieval: `engram eval`": "measuring-retrieval-engram-eval",
		"The `memory` tool (MCP)":            "the-memory-tool-mcp",
		"Start-up with a big store":          "start-up-with-a-big-store",
		"Retrieval (`engram eval`)":          "retrieval-engram-eval",
	} {
		if got := anchor(h); got != want {
			t.Errorf("anchor(%q) = %q, want %q", h, got, want)
		}
	}
}

// codeSpan is inline code: a link written there is an example, not a link.
var codeSpan = regexp.MustCompile("`[^`\n]+`")
