package memory

import (
	"strings"
	"unicode"
)

// ruleWords are the words of a rule's phrasing that say nothing about its
// subject ("always answer in X": only X tells whether the user said it).
var ruleWords = map[string]bool{
	"always": true, "never": true, "every": true, "should": true, "must": true, "dont": true, "don": true,
	"answer": true, "answers": true, "reply": true, "respond": true, "write": true, "with": true, "from": true,
	"this": true, "that": true, "these": true, "those": true, "project": true, "user": true, "users": true,
	"prefer": true, "prefers": true, "preferred": true, "please": true, "instead": true, "only": true,
	"when": true, "into": true, "them": true, "they": true, "their": true, "here": true, "there": true,
	"work": true, "code": true, "make": true, "sure": true, "avoid": true, "wants": true, "want": true,
	"have": true, "does": true, "doing": true, "will": true, "would": true, "about": true, "other": true,
	"uses": true, "using": true, "used": true, "like": true, "likes": true, "rule": true, "rules": true,
}

// Grounded reports whether a memory a model says the user stated shares a
// content word with what the user said (said: the user's own messages, not
// the assistant's replies or tool output, which an injection can fill): a
// word of at least 4 letters or digits that is not rule phrasing, matched
// on its first 5 characters so that inflections and near forms count
// ("Indonesian" / "Indonesia"). A text without content words is taken as
// grounded. The extractor and the consolidator both keep a memory that is
// not grounded as inferred (never a standing instruction in the user's
// name): a small model copying the prompt's example, inventing a rule or
// obeying text in a tool result is the usual cause.
func Grounded(text, said string) bool {
	said = strings.ToLower(said)
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	content := 0
	for _, w := range words {
		if len([]rune(w)) < 4 || ruleWords[w] {
			continue
		}
		content++
		if r := []rune(w); len(r) > 5 {
			w = string(r[:5])
		}
		if strings.Contains(said, w) {
			return true
		}
	}
	return content == 0
}

// UngroundedConfidence is the most confidence a memory keeps when the model
// said the user stated it but Grounded found no word of it in what the user
// said: it is stored as inferred and recalled, never standing.
const UngroundedConfidence = 0.4

// UserSaid is the text of the user's messages among msgs, one a line: what
// a memory the model says the user stated must be grounded in (Grounded),
// and what a summary may quote; not the assistant's replies or tool
// output, which an injection can fill.
func UserSaid(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		if m.Role == RoleUser {
			b.WriteString(m.Content)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
