package chaos

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"regexp"
	"sort"
	"strings"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

// FactsPerSession is how many facts a session's turns talk about (turn t
// mentions fact t mod FactsPerSession), under the extractor's 5 memories
// per reply, so that every span's facts fit one reply.
const FactsPerSession = 3

// Ref is the marker a turn's user message carries for fact f of session
// sid; the scripted model finds it in the transcript it is shown.
func Ref(sid string, f int) string { return fmt.Sprintf("chaosref:%s:%d", sid, f) }

var refRE = regexp.MustCompile(`chaosref:([a-z0-9]+):([0-9])`)

// word is a deterministic pseudo-word of six letters for (key, i): the
// facts of different sessions share no content word, so neither the
// extractor's near-duplicate rule nor the consolidator's takes one for
// another.
func word(key string, i int) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", key, i)
	v := h.Sum64()
	const cons, vows = "bdfgklmnprstvz", "aeiou"
	var b strings.Builder
	for j := 0; j < 3; j++ {
		b.WriteByte(cons[v%uint64(len(cons))])
		v /= uint64(len(cons))
		b.WriteByte(vows[v%uint64(len(vows))])
		v /= uint64(len(vows))
	}
	return b.String()
}

// FactWords are the four content words of fact f of session sid.
func FactWords(sid string, f int) [4]string {
	k := fmt.Sprintf("%s/%d", sid, f)
	return [4]string{word(k, 0), word(k, 1), word(k, 2), word(k, 3)}
}

// FactLabel is the memory the scripted extraction model returns for fact f
// of session sid: the expected memory, one per (session, fact). Labels
// share one word ("Decision"), so that no two are near-duplicates by
// cosine or by shared words.
func FactLabel(sid string, f int) string {
	w := FactWords(sid, f)
	return fmt.Sprintf("Decision: %s %s %s %s.", w[0], w[1], w[2], w[3])
}

// ReviewLabel is the fact the scripted consolidation pass remembers for a
// session: one per consolidated session.
func ReviewLabel(sid string) string {
	k := sid + "/review"
	return fmt.Sprintf("Review: %s %s %s %s.", sid, word(k, 0), word(k, 1), word(k, 2))
}

// SummaryMarker starts every summary the scripted compaction model writes
// for session sid.
func SummaryMarker(sid string) string { return "chaos summary of " + sid }

// UserText is the user's message of turn t of session sid.
func UserText(sid string, t int) string {
	f := t % FactsPerSession
	w := FactWords(sid, f)
	return fmt.Sprintf("Turn %d: is it still %s %s %s %s? (%s)", t, w[0], w[1], w[2], w[3], Ref(sid, f))
}

// AssistantText is the assistant's answer of turn t of session sid, about
// 400 characters (about 100 tokens), so that a session's transcript passes
// the suite's compaction threshold every dozen turns or so.
func AssistantText(sid string, t int) string {
	w := FactWords(sid, t%FactsPerSession)
	return fmt.Sprintf("Yes, %s %s %s %s still holds for turn %d of %s. ", w[0], w[1], w[2], w[3], t, sid) +
		strings.Repeat("I checked the notes again and nothing has changed since we settled it. ", 5)
}

// refs lists the (session, fact) markers of text, in order of appearance,
// without repeats.
func refs(text string) [][2]string {
	var out [][2]string
	seen := map[string]bool{}
	for _, m := range refRE.FindAllStringSubmatch(text, -1) {
		k := m[1] + ":" + m[2]
		if !seen[k] {
			seen[k] = true
			out = append(out, [2]string{m[1], m[2]})
		}
	}
	return out
}

var injectedRE = regexp.MustCompile(`(?m)^\[([^\]]+)\] \(`)

// ExtractReply is the scripted extraction model: "used" for every memory
// listed under INJECTED MEMORIES, and one decision per fact marker in the
// transcript.
func ExtractReply(req api.ChatRequest) llmtest.Reply {
	user := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			user = m.Content
		}
	}
	var r extract.Reply
	r.Verdicts, r.Memories = []extract.ReplyVerdict{}, []extract.ReplyMemory{}
	inj, rest, _ := strings.Cut(user, "RELATED MEMORIES")
	for _, m := range injectedRE.FindAllStringSubmatch(inj, -1) {
		r.Verdicts = append(r.Verdicts, extract.ReplyVerdict{ID: m[1], Verdict: "used"})
	}
	_, transcript, _ := strings.Cut(rest, "TRANSCRIPT:")
	for _, ref := range refs(transcript) {
		var f int
		fmt.Sscan(ref[1], &f)
		w := FactWords(ref[0], f)
		r.Memories = append(r.Memories, extract.ReplyMemory{
			Subkind: "decision", Scope: "project", Reach: "here", AssertedBy: "assistant",
			Label: FactLabel(ref[0], f), Body: "", Confidence: 0.7,
			Paths: []string{}, Entities: []string{w[0]}, Relations: []extract.ReplyRelation{},
		})
		if len(r.Memories) == extract.MaxReplyMemories {
			break
		}
	}
	return llmtest.JSON(r)
}

// ConsolidateReply is the scripted consolidation pass: on the first step of
// a pass, unless the stored memories shown already hold it, remember the
// session's review fact; then memory_done.
func ConsolidateReply(req api.ChatRequest) llmtest.Reply {
	var all strings.Builder
	for _, m := range req.Messages {
		all.WriteString(m.Content)
		all.WriteByte('\n')
	}
	last := ""
	if n := len(req.Messages); n > 0 {
		last = req.Messages[n-1].Content
	}
	rs := refs(all.String())
	if len(rs) > 0 && strings.Contains(last, "Steps used: 0 of") && !strings.Contains(last, ReviewLabel(rs[0][0])) {
		return llmtest.ToolCall(consolidate.ToolRemember, consolidate.RememberArgs{
			Text: ReviewLabel(rs[0][0]), Kind: "observation", Reason: "the session was reviewed",
		})
	}
	return llmtest.ToolCall(consolidate.ToolDone, consolidate.DoneArgs{Summary: "reviewed"})
}

// SummaryReply is the scripted compaction model: a summary in the
// template's first section naming the session and the facts it covers.
func SummaryReply(req api.ChatRequest) llmtest.Reply {
	var all strings.Builder
	for _, m := range req.Messages {
		all.WriteString(m.Content)
	}
	rs := refs(all.String())
	sid := "unknown"
	var facts []string
	for _, r := range rs {
		sid = r[0]
		facts = append(facts, r[0]+":"+r[1])
	}
	sort.Strings(facts)
	return llmtest.Text(fmt.Sprintf("## Active task\n%s: confirm where each service keeps its records (%s).\n\n## Completed actions\nNone\n",
		SummaryMarker(sid), strings.Join(facts, ", ")))
}

// Install scripts srv with the three replies, forever.
func Install(srv *llmtest.Server) {
	srv.OnChatAlways(llmtest.And(llmtest.HasFormat(), llmtest.SystemContains("You maintain the long-term memory")), llmtest.Func(ExtractReply))
	srv.OnChatAlways(llmtest.HasTool(consolidate.ToolDone), llmtest.Func(ConsolidateReply))
	srv.OnChatAlways(llmtest.SystemContains("handoff summaries"), llmtest.Func(SummaryReply))
}

// MustJSON marshals v (for the control endpoint's answers).
func MustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
