// Package demo is the model of `engram serve -model demo`: the scripted
// Ollama-compatible server the tests use (pkg/llm/llmtest), run in-process
// with replies made by simple rules, so that a newcomer without a GPU or
// Ollama sees the whole loop work (extraction at turn end, a consolidation
// pass when a session goes quiet, a compaction when the context grows)
// through the real workers, the real model client and real HTTP.
//
// It is not a language model and says so: serve logs a DEMO warning at
// start and names the model "engram-demo" in its logs and metrics. The
// rules, all deterministic:
//
//   - extraction: every user sentence that states a rule ("always ...",
//     "never ...", "don't ...", "use X, not Y", "I prefer ...", "from now
//     on ...") becomes a user-asserted preference (a standing instruction);
//     "we decided ...", "let's go with ...", "we'll use ..." a decision; a
//     sentence about something that failed ("failed", "error", "broke",
//     "doesn't work") a failure. At most five a reply; every injected
//     memory is judged "used".
//   - consolidation: on a pass's first step, every user sentence
//     "remember that X" is remembered (said by the user); then the pass is
//     done.
//   - compaction: a summary in the template's sections that it has
//     something for: the active task is the user's latest message
//     (quoted), the constraints are the user's rules, the completed actions
//     the user's earlier requests.
//
// Embeddings stay what the configuration says (the built-in hashing
// embedder by default): the demo answers chat calls only.
package demo

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

// Model is the name of the demo model in the configuration, logs and
// metrics.
const Model = "engram-demo"

// Server is a running demo model.
type Server struct {
	srv *llmtest.Server
}

// Start starts the demo model on a random port of 127.0.0.1.
func Start() (*Server, error) {
	srv, err := llmtest.Start(llmtest.WithoutRecording())
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	srv.AddModel(Model)
	Install(srv)
	return &Server{srv: srv}, nil
}

// URL is the server's base URL.
func (s *Server) URL() string { return s.srv.URL() }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Configure points cfg's chat roles at the demo model; the embedding model
// stays cfg's own (empty: the built-in hashing embedder).
func (s *Server) Configure(cfg *llm.Config) {
	cfg.Host = s.URL()
	for _, m := range []*llm.ModelConfig{&cfg.Extract, &cfg.Consolidate, &cfg.Summarize} {
		m.Name = Model
	}
	if cfg.Embed.Name != "" {
		// An embedding model of the configuration would be asked of the
		// demo server, which answers with the hashing embedder's vectors
		// under that name: keep it honest by using the built-in one.
		cfg.Embed.Name = ""
	}
}

// Install scripts srv with the demo's replies, forever.
func Install(srv *llmtest.Server) {
	srv.OnChatAlways(llmtest.And(llmtest.HasFormat(), llmtest.SystemContains("You maintain the long-term memory")), llmtest.Func(ExtractReply))
	srv.OnChatAlways(llmtest.HasTool(consolidate.ToolDone), llmtest.Func(ConsolidateReply))
	srv.OnChatAlways(llmtest.SystemContains("handoff summaries"), llmtest.Func(SummaryReply))
	srv.SetDefault(llmtest.Text("The demo model answers only Engram's extraction, consolidation and compaction calls."))
}

var (
	sentenceEnd = regexp.MustCompile(`[.!?\n]+\s*`)
	ruleRE      = regexp.MustCompile(`(?i)^(please\s+)?(always|never|don'?t|do not|from now on|i prefer|i'd rather|prefer|use\s+\S+.*\bnot\b|stop\s+using)\b`)
	decisionRE  = regexp.MustCompile(`(?i)\b(we decided|we've decided|let'?s go with|we'?ll use|we will use|we chose|decided to)\b`)
	failureRE   = regexp.MustCompile(`(?i)\b(failed|fails|failing|error|broke|broken|doesn'?t work|crash(ed|es)?)\b`)
	rememberRE  = regexp.MustCompile(`(?i)\bremember that\s+(.+)`)
	globalRE    = regexp.MustCompile(`(?i)\b(answer in|reply in|every project|all projects|everywhere|in general)\b`)
	injectedRE  = regexp.MustCompile(`(?m)^\[([^\]]+)\] \(`)
)

// sentences splits text into trimmed sentences.
func sentences(text string) []string {
	var out []string
	for _, s := range sentenceEnd.Split(text, -1) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// label makes a sentence a memory label: capitalised, ending with a full
// stop, at most 140 characters.
func label(s string) string {
	s = strings.TrimSpace(s)
	r, n := utf8.DecodeRuneInString(s)
	s = strings.ToUpper(string(r)) + s[n:]
	if utf8.RuneCountInString(s) > 139 {
		s = string([]rune(s)[:139])
	}
	return strings.TrimRight(s, ",;: ") + "."
}

// lastUser is the content of the request's last user message.
func lastUser(req api.ChatRequest) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			return req.Messages[i].Content
		}
	}
	return ""
}

// linesOf returns the texts of the transcript lines that start with
// prefix ("USER: "), in order.
func linesOf(transcript, prefix string) []string {
	var out []string
	for _, l := range strings.Split(transcript, "\n") {
		if t, ok := strings.CutPrefix(l, prefix); ok {
			out = append(out, strings.TrimSpace(t))
		}
	}
	return out
}

// ExtractReply answers an extraction call: "used" for every injected
// memory, and the user's rules, decisions and failures of the transcript.
func ExtractReply(req api.ChatRequest) llmtest.Reply {
	user := lastUser(req)
	r := extract.Reply{Verdicts: []extract.ReplyVerdict{}, Memories: []extract.ReplyMemory{}}
	inj, rest, _ := strings.Cut(user, "RELATED MEMORIES")
	for _, m := range injectedRE.FindAllStringSubmatch(inj, -1) {
		r.Verdicts = append(r.Verdicts, extract.ReplyVerdict{ID: m[1], Verdict: "used"})
	}
	_, transcript, _ := strings.Cut(rest, "TRANSCRIPT:")
	seen := map[string]bool{}
	add := func(m extract.ReplyMemory) {
		if len(r.Memories) < extract.MaxReplyMemories && !seen[m.Label] {
			seen[m.Label] = true
			r.Memories = append(r.Memories, m)
		}
	}
	mem := func(subkind, by, text string, conf float64) extract.ReplyMemory {
		scope, reach := "project", "here"
		if subkind == "preference" && globalRE.MatchString(text) {
			scope, reach = "global", "anywhere"
		}
		return extract.ReplyMemory{Subkind: subkind, Scope: scope, Reach: reach, AssertedBy: by, Label: label(text),
			Body: "", Confidence: conf, Paths: []string{}, Entities: []string{}, Relations: []extract.ReplyRelation{}}
	}
	for _, line := range linesOf(transcript, "USER: ") {
		for _, s := range sentences(line) {
			switch {
			case rememberRE.MatchString(s):
				// left to the consolidation pass
			case ruleRE.MatchString(s):
				add(mem("preference", "user", s, 0.95))
			case decisionRE.MatchString(s):
				add(mem("decision", "user", s, 0.95))
			case failureRE.MatchString(s):
				add(mem("failure", "user", s, 0.7))
			}
		}
	}
	for _, line := range linesOf(transcript, "ASSISTANT: ") {
		for _, s := range sentences(line) {
			if failureRE.MatchString(s) {
				add(mem("failure", "assistant", s, 0.7))
			}
		}
	}
	return llmtest.JSON(r)
}

// ConsolidateReply answers a consolidation step: on the pass's first step
// it remembers the first "remember that ..." of the conversation that the
// stored memories do not hold yet (one a step); otherwise the pass is done.
func ConsolidateReply(req api.ChatRequest) llmtest.Reply {
	var conversation, state string
	for _, m := range req.Messages {
		if m.Role != "user" {
			continue
		}
		if strings.HasPrefix(m.Content, "THE CONVERSATION") {
			conversation = m.Content
		} else {
			state = m.Content
		}
	}
	for _, line := range strings.Split(conversation, "\n") {
		if !strings.HasPrefix(line, "USER") {
			continue
		}
		_, text, _ := strings.Cut(line, ": ")
		for _, s := range sentences(text) {
			m := rememberRE.FindStringSubmatch(s)
			if m == nil {
				continue
			}
			fact := label(m[1])
			// Stored already, or the subject of the last call's result.
			if strings.Contains(state, strings.TrimSuffix(fact, ".")) {
				continue
			}
			return llmtest.ToolCall(consolidate.ToolRemember, consolidate.RememberArgs{
				Text: fact, Kind: "observation", SaidByUser: true, Reason: "the user asked to remember it (demo model)",
			})
		}
	}
	return llmtest.ToolCall(consolidate.ToolDone, consolidate.DoneArgs{Summary: "demo model: the user's \"remember that\" facts are stored"})
}

var userBlock = regexp.MustCompile(`(?s)\[USER\]\n(.*?)(?:\n\n\[|\z)`)

// SummaryReply answers a compaction call with a summary in the template.
func SummaryReply(req api.ChatRequest) llmtest.Reply {
	var users []string
	for _, m := range userBlock.FindAllStringSubmatch(lastUser(req), -1) {
		if t := strings.TrimSpace(m[1]); t != "" {
			users = append(users, t)
		}
	}
	active := "None"
	if n := len(users); n > 0 {
		active = fmt.Sprintf("%q", capChars(users[n-1], 200))
	}
	var rules, done []string
	for i, u := range users {
		for _, s := range sentences(u) {
			if ruleRE.MatchString(s) {
				rules = append(rules, "- "+label(s))
			}
		}
		if i < len(users)-1 {
			// Short: a summary must be smaller than what it replaces (the
			// compactor refuses one that is not), also of a short chat.
			done = append(done, fmt.Sprintf("%d. Answered %q", len(done)+1, capChars(oneLine(u), 40)))
		}
	}
	// Only the sections the demo has something for (a language model
	// fills in all of them).
	var b strings.Builder
	fmt.Fprintf(&b, "## Active task\n%s\n", active)
	if len(rules) > 0 {
		fmt.Fprintf(&b, "\n## Constraints and preferences\n%s\n", strings.Join(rules, "\n"))
	}
	if len(done) > 0 {
		fmt.Fprintf(&b, "\n## Completed actions\n%s\n", strings.Join(done, "\n"))
	}
	b.WriteString("\n## Critical context\nBy the demo model, not a language model.\n")
	return llmtest.Text(b.String())
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func capChars(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
