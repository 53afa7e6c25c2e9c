package extract

import (
	"strings"
	"unicode/utf8"

	"github.com/engram-memory/engram/pkg/memory"
)

// omitted starts a transcript whose head was cut to keep it under the cap.
const omitted = "[... earlier messages omitted ...]\n"

// cutMark ends a message cut to its cap.
const cutMark = " [...]"

// Render turns a span's messages into the transcript the model reads:
//
//	USER: <text>
//	ASSISTANT: <text, at most cfg.AssistantChars>
//	ASSISTANT called tools: name, name
//	TOOL name: ok
//	TOOL name FAILED: <result, at most cfg.FailedToolChars>
//
// Tool calls appear by name only and successful tool results without their
// content. Secrets are redacted (memory.Redact) before anything else. When the
// whole is longer than cfg.TranscriptChars the tail is kept, cut at a line
// start, after an "earlier messages omitted" line; the result never exceeds
// cfg.TranscriptChars characters.
func Render(msgs []memory.Message, cfg Config) string {
	return keepTail(strings.TrimRight(render(msgs, cfg), "\n"), cfg.TranscriptChars)
}

// render is Render's lines, each ending in a newline, before the cut.
func render(msgs []memory.Message, cfg Config) string {
	var b strings.Builder
	for _, m := range msgs {
		switch m.Role {
		case memory.RoleUser:
			writeLine(&b, "USER: ", memory.NeutraliseText(memory.Redact(strings.TrimSpace(m.Content))))
		case memory.RoleAssistant:
			if text := strings.TrimSpace(m.Content); text != "" {
				writeLine(&b, "ASSISTANT: ", capChars(memory.NeutraliseText(memory.Redact(text)), cfg.AssistantChars))
			}
			if len(m.ToolCalls) > 0 {
				names := make([]string, 0, len(m.ToolCalls))
				for _, c := range m.ToolCalls {
					if n := memory.Neutralise(memory.Redact(c.Name)); n != "" {
						names = append(names, capChars(n, 80))
					}
				}
				writeLine(&b, "ASSISTANT called tools: ", strings.Join(names, ", "))
			}
		case memory.RoleTool:
			name := capChars(memory.Neutralise(memory.Redact(m.ToolName)), 80)
			if name == "" {
				name = "(unnamed)"
			}
			if m.ToolStatus == memory.ToolFailed {
				writeLine(&b, "TOOL "+name+" FAILED: ", capChars(memory.NeutraliseText(memory.Redact(strings.TrimSpace(m.Content))), cfg.FailedToolChars))
			} else {
				writeLine(&b, "TOOL "+name+": ", "ok")
			}
		}
	}
	return b.String()
}

func writeLine(b *strings.Builder, prefix, text string) {
	b.WriteString(prefix)
	b.WriteString(text)
	b.WriteByte('\n')
}

// capChars cuts s to at most n characters (runes), marking a cut.
func capChars(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	keep := n - utf8.RuneCountInString(cutMark)
	if keep < 0 {
		keep = 0
	}
	return string([]rune(s)[:keep]) + cutMark
}

// keepTail returns s when it has at most n characters; otherwise its last
// part, starting at a line start where possible, after the omitted marker,
// in at most n characters.
func keepTail(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	room := n - utf8.RuneCountInString(omitted)
	if room <= 0 {
		r := []rune(s)
		return string(r[len(r)-n:])
	}
	r := []rune(s)
	tail := string(r[len(r)-room:])
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < len(tail)-1 {
		tail = tail[i+1:]
	}
	return omitted + tail
}

// lastChars returns the last n characters of s.
func lastChars(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[len(r)-n:])
}

// firstLine returns the first non-empty line of s, trimmed.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
