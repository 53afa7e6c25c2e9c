package memory

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTerms is the most terms a lexical query keeps.
const MaxTerms = 32

// Terms turns a free-text query into the terms of the lexical channel: split
// on anything that is not a letter or a digit, drop 1-character terms,
// lower-case, de-duplicate, keep at most MaxTerms terms, longest first (ties
// keep the order of first appearance). Backends OR the terms and, where they
// can, match them as prefixes.
func Terms(query string) []string {
	fields := strings.FieldsFunc(query, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	seen := make(map[string]struct{}, len(fields))
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		if utf8.RuneCountInString(f) < 2 {
			continue
		}
		t := strings.ToLower(f)
		if _, ok := seen[t]; ok {
			continue
		}
		seen[t] = struct{}{}
		out = append(out, t)
	}
	sort.SliceStable(out, func(i, j int) bool {
		return utf8.RuneCountInString(out[i]) > utf8.RuneCountInString(out[j])
	})
	if len(out) > MaxTerms {
		out = out[:MaxTerms]
	}
	return out
}
