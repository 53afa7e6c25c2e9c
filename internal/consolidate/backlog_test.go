package consolidate_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// backlog appends a session of n messages: turns of 100 messages, user
// and assistant alternating, "M0001 ..." numbering each by its id, every
// 10th a tool message (never shown to a pass), every 97th 6,000 characters
// long (cut to 4,000 in a window, and a window of them holds few). It
// returns the user and assistant message ids, in order.
func backlog(t testing.TB, st memory.Store, r memory.SessionRef, n int) []int64 {
	t.Helper()
	var shown []int64
	id := int64(0)
	for turn := 0; id < int64(n); turn++ {
		var msgs []memory.Message
		for k := 0; k < 100 && id < int64(n); k++ {
			id++
			m := memory.Message{Role: memory.RoleUser}
			if id%2 == 0 {
				m.Role = memory.RoleAssistant
			}
			m.Content = fmt.Sprintf("M%04d I mentioned detail %d of my week.", id, id)
			switch {
			case id%10 == 0:
				m.Role, m.ToolName, m.Content = memory.RoleTool, "search", fmt.Sprintf("M%04d tool output", id)
			case id%97 == 0:
				m.Content += strings.Repeat(" and more words", 400)
			}
			if m.Role != memory.RoleTool {
				shown = append(shown, id)
			}
			msgs = append(msgs, m)
		}
		if _, _, err := st.AppendTranscript(t.Context(), r, fmt.Sprintf("turn-%d", turn), msgs); err != nil {
			t.Fatal(err)
		}
	}
	return shown
}

// windowIDs are the message ids a request's window shows, in order.
func windowIDs(t testing.TB, req api.ChatRequest) []int64 {
	t.Helper()
	var out []int64
	for _, l := range windowLines(t, req) {
		m := msgMark.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("a window line without its number: %.80s", l)
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		out = append(out, n)
	}
	return out
}

// TestBacklogEveryMessageReadOnce: one session_idle over a 5,000-message
// session, through the handler and the scripted model: the passes read
// every user and assistant message exactly once, oldest first, window by
// window; each pass's cursor is the newest message it read (the model
// sees, at each pass's first step, the cursor its last pass left); every
// pass publishes consolidation_done with its range; and no request
// exceeds its num_ctx. A second idle finds nothing.
func TestBacklogEveryMessageReadOnce(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	shown := backlog(t, f.st, ref(), 5000)

	var mu sync.Mutex
	var cursorAtPass []int64 // the cursor when each pass began
	steps := 0
	f.srv.OnChatAlways(llmtest.Any(), llmtest.Func(func(req api.ChatRequest) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		steps++
		if strings.Contains(req.Messages[len(req.Messages)-1].Content, "Steps used: 0 of ") {
			c, err := f.st.Cursor(t.Context(), ref())
			if err != nil {
				t.Error(err)
			}
			cursorAtPass = append(cursorAtPass, c)
			if len(cursorAtPass)%25 == 0 { // some passes store a fact first
				ids := windowIDs(t, req)
				return remember(fmt.Sprintf("The user mentioned detail %d.", ids[0]), "observation")
			}
		}
		return done()
	}))
	h := consolidate.NewHandler(f.c, nil)
	idle := events.NewSessionIdle(events.Ref{ProjectID: project, SessionID: session}, events.SessionIdle{LastActivity: time.Now()})
	if err := h.Handle(f.ctx, idle); err != nil {
		t.Fatal(err)
	}

	passes := firstSteps(f.srv.ChatRequests())
	var read []int64
	newest := int64(0)
	for i, p := range passes {
		ids := windowIDs(t, p)
		if len(ids) == 0 {
			t.Fatalf("pass %d read nothing", i)
		}
		if cursorAtPass[i] != newest {
			t.Fatalf("pass %d began at cursor %d; the pass before read up to %d", i, cursorAtPass[i], newest)
		}
		read = append(read, ids...)
		newest = ids[len(ids)-1]
	}
	if len(read) != len(shown) {
		t.Fatalf("%d messages read, %d in the session", len(read), len(shown))
	}
	for i := range shown {
		if read[i] != shown[i] {
			t.Fatalf("message %d read as the %d-th; want %d (every message once, in order)", read[i], i, shown[i])
		}
	}
	if c := f.cursor(); c != 5000 {
		t.Fatalf("cursor %d after the backlog, want 5000", c)
	}
	ds := f.pub.done(t)
	if len(ds) != len(passes) {
		t.Fatalf("%d consolidation_done for %d passes", len(ds), len(passes))
	}
	for i, d := range ds {
		ids := windowIDs(t, passes[i])
		if d.Reason != "done" || d.From != ids[0] || d.UpTo != ids[len(ids)-1] {
			t.Fatalf("consolidation_done %d: %+v; the pass read %d-%d", i, d, ids[0], ids[len(ids)-1])
		}
	}
	assertWithinContext(t, f.srv)
	if s := len(f.liveTexts()); s != len(passes)/25 {
		t.Errorf("%d facts stored, want %d", s, len(passes)/25)
	}
	t.Logf("%d messages (%d shown) in %d passes, %d model calls", 5000, len(shown), len(passes), steps)

	n := len(f.srv.ChatRequests())
	if err := h.Handle(f.ctx, idle); err != nil || len(f.srv.ChatRequests()) != n {
		t.Fatalf("a second idle: %v, %d model calls", err, len(f.srv.ChatRequests())-n)
	}
	// The journal shows each pass's range.
	hist, err := f.st.Passes(f.ctx, memory.PassQuery{Project: project, Session: session, Limit: 1000})
	if err != nil || len(hist) != len(passes) {
		t.Fatalf("history: %d passes, %v", len(hist), err)
	}
	var out strings.Builder
	consolidate.WriteJournal(&out, hist[len(hist)-1]) // the oldest
	if ids := windowIDs(t, passes[0]); !strings.Contains(out.String(), fmt.Sprintf("read messages %d-%d", ids[0], ids[len(ids)-1])) {
		t.Errorf("history of the first pass:\n%s", out.String())
	}
}
