package compact

import (
	"errors"
	"fmt"
	"strings"

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
	// an answer to the user.
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

// templateSections are the section names of Template, lower-cased.
var templateSections = func() map[string]bool {
	m := map[string]bool{}
	for _, line := range strings.Split(Template, "\n") {
		if name, ok := strings.CutPrefix(line, "## "); ok {
			m[strings.ToLower(strings.TrimSpace(name))] = true
		}
	}
	return m
}()

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
