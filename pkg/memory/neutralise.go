package memory

import (
	"regexp"
	"strings"
	"unicode"
)

// Memory text is derived from tool output, repositories and conversations, and
// it is replayed into a privileged position (the engine prompt). Neutralise
// makes it inert before it goes into any prompt:
//   - '<' and '>' (and their look-alikes) become spaces, so text cannot open or
//     close a tag such as </engram-memory>;
//   - "ignore/disregard/forget (all) previous/prior/above instruction(s)" and
//     close variants become "[...]";
//   - role prefixes ("system:", "assistant:", "user:", "human:") are removed
//     wherever they start a line, a sentence or a joined part: after . ! ? : ;
//     | a closing bracket or a dash (a label joined to its body, "Build
//     notes: system: ...", must not keep the body's role prefix);
//   - invisible format characters are dropped and whitespace collapses to one
//     space, so the text is one line.
//
// Neutralise is idempotent.
func Neutralise(s string) string {
	s = strings.Map(func(r rune) rune {
		switch r {
		case '<', '>', '\uFF1C', '\uFF1E', '\u2039', '\u203A', '\u00AB', '\u00BB',
			'\u3008', '\u3009', '\u27E8', '\u27E9', '\u2329', '\u232A', '\uFE64', '\uFE65':
			return ' '
		}
		if unicode.Is(unicode.Cf, r) { // zero-width and other format characters
			return -1
		}
		return r
	}, s)
	for mayMatch(s) {
		next := rolePrefix.ReplaceAllString(s, "$1")
		next = overrideAttempt.ReplaceAllString(next, "[...]")
		if next == s {
			break
		}
		s = next
	}
	return strings.Join(strings.Fields(s), " ")
}

// overrideVerbs are the words every override attempt starts with.
var overrideVerbs = []string{"ignore", "disregard", "forget", "override", "skip"}

// mayMatch is a cheap test that spares the regular expressions on ordinary
// text (Neutralise runs on every injected line): a role prefix needs a
// colon and a role word, an override attempt one of its verbs. Text with any non-ASCII
// character always takes the slow path, since case folding maps some
// non-ASCII letters (ſ, K) onto the verbs' letters.
func mayMatch(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return true
		}
	}
	lower := strings.ToLower(s)
	for _, v := range overrideVerbs {
		if strings.Contains(lower, v) {
			return true
		}
	}
	if strings.IndexByte(s, ':') >= 0 {
		for _, r := range roleWords {
			if strings.Contains(lower, r) {
				return true
			}
		}
	}
	return false
}

// roleWords are the prefixes rolePrefix removes.
var roleWords = []string{"system", "assistant", "user", "human"}

var (
	rolePrefix = regexp.MustCompile(`(?im)(^|[.!?:;|)\]}]\s+|\s[-\x{2013}\x{2014}]\s+)[\s\-*#>"'\x60]*(system|assistant|user|human)\s*:`)

	overrideAttempt = regexp.MustCompile(`(?i)\b(ignore|disregard|forget|override|skip)\s+` +
		`(?:(?:all|any|every|of|the|your|my|these|those|everything)\s+)*` +
		`(previous|prior|above|earlier|preceding|former|foregoing|system)\s+` +
		`(instructions?|prompts?|rules|directions|directives|guidelines|messages?|context|commands?)\b`)
)
