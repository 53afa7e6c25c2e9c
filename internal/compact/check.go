package compact

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/engram-memory/engram/pkg/llm"
)

// Refusal is why a summary was refused (the label of the refusals metric).
type Refusal string

// The refusals, in the order Check tests them.
const (
	// RefusedCutOff: the reply ran into the output limit or the end of
	// the window (done_reason "length"): its end is missing.
	RefusedCutOff Refusal = "cut_off"
	// RefusedEmpty: nothing is left once the reply is cleaned.
	RefusedEmpty Refusal = "empty"
	// RefusedMissingSection: a required section of the template
	// (RequiredSections) is missing or empty: "ok", "Sure! Here is...",
	// an answer to the user; or a section of the template holds a chat
	// reply instead of its content ("## Active task\nSure! Here is the
	// summary...": see chatReply).
	RefusedMissingSection Refusal = "missing_section"
	// RefusedNotSmaller: the summary's block (Block: the summary in its
	// frame, what the context holds) is not smaller than what it replaces
	// (the covered messages plus the previous summary's block).
	RefusedNotSmaller Refusal = "not_smaller"
)

// Refusals lists every Refusal.
var Refusals = []Refusal{RefusedCutOff, RefusedEmpty, RefusedMissingSection, RefusedNotSmaller}

// RequiredSections are the template's sections a summary must have, with
// content ("None" counts): the active task is what the next context window
// resumes from.
var RequiredSections = []string{"Active task"}

// ErrRefused: a model reply was refused as a summary. Found with errors.As
// as *RefusedError.
var ErrRefused = errors.New("compact: summary refused")

// RefusedError says why a reply was refused. A refusal is a failed attempt
// (FailedError): retried with Config.Backoff, dead-lettered with this
// reason after Config.MaxFailures; the previous summary and the context
// stay as they were.
type RefusedError struct {
	Reason Refusal
	Detail string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("compact: summary refused (%s): %s; the previous summary stays", e.Reason, e.Detail)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Check checks a model reply before it replaces anything and returns the
// summary (Clean) or a *RefusedError: a reply cut off by the output limit
// (cutOff, llm.Response.CutOff), an empty one, one without a required
// section with content (RequiredSections), or one whose block is not
// smaller (in characters / 4) than the covered messages plus the previous
// summary's block (coveredTokens; prevTokens, BlockTokens of the previous
// summary: 0 without one). The summary is measured as its block, the
// summary in its ~110-token frame, because that is what replaces the
// messages in the context: counting the summary alone let a compaction of
// a short conversation grow the context (347 -> 431 tokens).
func Check(reply string, cutOff bool, coveredTokens, prevTokens int64) (string, error) {
	return CheckSaid(reply, cutOff, coveredTokens, prevTokens, "")
}

// CheckSaid is Check that also refuses a section of the template whose
// content opens as a chat assistant's reply does rather than as a summary
// (chatReply): "Sure! Here is the summary", "I'd be happy to help",
// "Certainly! Run make deploy." under a right heading. said is what the
// user said in the messages the summary covers (and the previous summary):
// a section may open with "Sure," when the user's words did (the active
// task quotes the user), never with a summariser's preamble.
func CheckSaid(reply string, cutOff bool, coveredTokens, prevTokens int64, said string) (string, error) {
	if cutOff {
		return "", &RefusedError{Reason: RefusedCutOff, Detail: fmt.Sprintf(
			"the reply was cut off by the output limit (done_reason %q) after %d characters", llm.DoneLength, len([]rune(reply)))}
	}
	s := Clean(reply)
	if s == "" {
		return "", &RefusedError{Reason: RefusedEmpty, Detail: "the reply is empty"}
	}
	secs := sections(s)
	for _, want := range RequiredSections {
		body, ok := secs[strings.ToLower(want)]
		switch {
		case !ok:
			return "", &RefusedError{Reason: RefusedMissingSection, Detail: fmt.Sprintf(
				"the reply has no %q section (it begins %q)", want, head(s, 60))}
		case strings.TrimSpace(body) == "":
			return "", &RefusedError{Reason: RefusedMissingSection, Detail: fmt.Sprintf("the reply's %q section is empty", want)}
		}
	}
	for _, name := range templateOrder {
		if body, ok := secs[name]; ok {
			if opening, chat := chatReply(body, said); chat {
				return "", &RefusedError{Reason: RefusedMissingSection, Detail: fmt.Sprintf(
					"the reply's %q section is a chat reply, not a summary (it begins %q)", sectionTitle(name), head(opening, 60))}
			}
		}
	}
	if n, limit := BlockTokens(s), coveredTokens+prevTokens; n >= limit {
		return "", &RefusedError{Reason: RefusedNotSmaller, Detail: fmt.Sprintf(
			"the summary's block (%d tokens, %d of them the summary) is not smaller than what it replaces (%d tokens of messages and %d of the previous summary's block)",
			n, llm.EstimateTokens(s), coveredTokens, prevTokens)}
	}
	return s, nil
}

func head(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// templateSections are the section names of Template, lower-cased;
// templateOrder the same in the template's order, templateTitles their
// headings as written.
var templateSections, templateOrder, templateTitles = func() (map[string]bool, []string, map[string]string) {
	m, titles := map[string]bool{}, map[string]string{}
	var order []string
	for _, line := range strings.Split(Template, "\n") {
		if name, ok := strings.CutPrefix(line, "## "); ok {
			key := strings.ToLower(strings.TrimSpace(name))
			m[key], titles[key] = true, strings.TrimSpace(name)
			order = append(order, key)
		}
	}
	return m, order, titles
}()

func sectionTitle(key string) string {
	if t, ok := templateTitles[key]; ok {
		return t
	}
	return key
}

// chatOpeners are the interjections a chat assistant opens a reply with
// ("Sure!", "Certainly,", "¡Claro!", "Natürlich.", "好的，"), in the
// languages summaries are written in; followed by punctuation or the end
// of the line. A summary's section never opens so unless it quotes the
// user, who may have said "Sure, go ahead" (see chatReply).
var chatOpeners = regexp.MustCompile(`^(sure|certainly|of course|absolutely|no problem|gladly|happy to help|alright|all right|` +
	`claro|por supuesto|desde luego|con gusto|bien sûr|bien sur|certainement|avec plaisir|natürlich|gerne|selbstverständlich|klar|` +
	`com certeza|certamente|certo|ovviamente|volentieri|конечно|разумеется|好的|当然|没问题|もちろん|かしこまりました|承知しました)` +
	`\s*([!,.:;…！，。：]|$)`)

// chatMeta are the openings of a reply about the summary rather than of a
// summary: "Here is the summary", "I'd be happy to", "I'll summarise",
// "Let me recap", "As an AI", and their forms in other languages.
var chatMeta = regexp.MustCompile(`^(` +
	`(here(['’]s| is| are)|below (is|are)|the following (is|are))\b[^\n]{0,40}\b(summary|summaries|recap|handoff|hand-off|overview)\b|` +
	`(i['’]d|i would|i['’]m|i am) (be )?(happy|glad|delighted) to\b|` +
	`(i['’]ll|i will|let me)\b[^\n]{0,20}\b(summari[sz]e|recap|help you)\b|` +
	`(i['’]ll|i will|let me) (now )?(provide|write|give|create|draft) (you )?(a|an|the|your) (summary|recap|overview|handoff)\b|` +
	`as an? (ai|language model|assistant)\b|` +
	`(voici|voilà)\b[^\n]{0,30}(résumé|synthèse)|(aquí|aqui) (está|tienes|tiene|va)\b[^\n]{0,30}(resumen|síntesis)|` +
	`hier (ist|sind)\b[^\n]{0,30}zusammenfassung|ecco\b[^\n]{0,30}(riepilogo|riassunto|sintesi)|` +
	`вот\b[^\n]{0,30}(резюме|сводка|краткое)|以下是|这是[^\n]{0,10}(摘要|总结)|以下は[^\n]{0,10}(要約|まとめ)` +
	`)`)

// chatReply reports whether a section's content opens as a chat
// assistant's reply: a meta sentence about the summary (chatMeta), or an
// interjection (chatOpeners) the user did not say (said holds no such
// word: a quote of the user's "Sure, go ahead" is a summary's content). A
// quoted opening (the active task in the user's own words) is content.
// It returns the opening line.
func chatReply(body, said string) (string, bool) {
	line := ""
	for _, l := range strings.Split(body, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			line = l
			break
		}
	}
	open := strings.TrimLeft(line, "-*+>#_ \t")
	if i := strings.IndexFunc(open, func(r rune) bool { return r < '0' || r > '9' }); i > 0 && strings.HasPrefix(open[i:], ".") {
		open = strings.TrimSpace(open[i+1:]) // "1. Sure! ..."
	}
	if open == "" || strings.ContainsRune("\"'“”„«»‘’「『", []rune(open)[0]) {
		return line, false
	}
	lower := strings.ToLower(strings.TrimLeft(open, "¡¿"))
	if chatMeta.MatchString(lower) {
		return line, true
	}
	m := chatOpeners.FindStringSubmatch(lower)
	if m == nil {
		return line, false
	}
	return line, !saidWord(strings.ToLower(said), m[1])
}

// saidWord reports whether the (lower-cased) text said holds w as a word
// (not "sure" in "ensure"; CJK has no spaces: anywhere).
func saidWord(said, w string) bool {
	for i := 0; ; {
		j := strings.Index(said[i:], w)
		if j < 0 {
			return false
		}
		j += i
		before, _ := utf8.DecodeLastRuneInString(said[:j])
		after, _ := utf8.DecodeRuneInString(said[j+len(w):])
		first, _ := utf8.DecodeRuneInString(w)
		if first >= 0x2E80 || ((j == 0 || !unicode.IsLetter(before)) && (j+len(w) == len(said) || !unicode.IsLetter(after))) {
			return true
		}
		i = j + len(w)
	}
}

// heading reads a line as a section heading: "## Name", "**Name**",
// "Name:" (optionally followed by the content on the same line), in any
// case. It returns the lower-cased name, the content after it on the line,
// and whether the line is a heading: a markdown heading of any name, or a
// bold or colon heading of a template section.
func heading(line string) (name, rest string, ok bool) {
	t := strings.TrimSpace(line)
	hashed := strings.HasPrefix(t, "#")
	t = strings.TrimLeft(t, "# ")
	bold := strings.HasPrefix(t, "**") || strings.HasPrefix(t, "__")
	t = strings.Trim(t, "*_ ")
	if hashed {
		t = strings.TrimSuffix(strings.TrimSpace(t), ":")
		return strings.ToLower(strings.TrimSpace(t)), "", t != ""
	}
	if i := strings.Index(t, ":"); i > 0 {
		if n := strings.ToLower(strings.Trim(t[:i], "*_ ")); templateSections[n] {
			return n, strings.Trim(t[i+1:], "*_ "), true
		}
	}
	if n := strings.ToLower(t); bold && templateSections[n] {
		return n, "", true
	}
	return "", "", false
}

// sections splits a summary into its sections: lower-cased name -> content.
func sections(s string) map[string]string {
	out := map[string]string{}
	cur, in := "", false
	var b strings.Builder
	flush := func() {
		if in {
			if _, dup := out[cur]; !dup {
				out[cur] = strings.TrimSpace(b.String())
			}
		}
		b.Reset()
	}
	for _, line := range strings.Split(s, "\n") {
		if name, rest, ok := heading(line); ok {
			flush()
			cur, in = name, true
			b.WriteString(rest)
			continue
		}
		b.WriteString(line)
		b.WriteString("\n")
	}
	flush()
	return out
}

// firstSection is the byte offset of the first line that heads a template
// section, -1 when there is none.
func firstSection(s string) int {
	off := 0
	for _, line := range strings.SplitAfter(s, "\n") {
		if name, _, ok := heading(line); ok && templateSections[name] {
			return off
		}
		off += len(line)
	}
	return -1
}
