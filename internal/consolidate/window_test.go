package consolidate_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/engram-memory/engram/internal/consolidate"
)

// TestWindowLimits: the first model request carries at most the last 20
// messages, each cut to 4,000 characters, 40,000 in all (the oldest
// dropped first).
func TestWindowLimits(t *testing.T) {
	cfg := consolidate.Defaults()
	if cfg.WindowMessages != 20 || cfg.MessageChars != 4000 || cfg.WindowChars != 40000 {
		t.Fatalf("defaults %d messages, %d chars each, %d in all", cfg.WindowMessages, cfg.MessageChars, cfg.WindowChars)
	}
	const header = "THE CONVERSATION (since the last pass)\n"
	window := func(f *fixture) []string {
		t.Helper()
		f.srv.Enqueue(done())
		f.run()
		c := f.srv.ChatRequests()[0].Messages[1].Content
		if !strings.HasPrefix(c, header) {
			t.Fatalf("the second message is not the transcript:\n%.200s", c)
		}
		return strings.Split(strings.TrimPrefix(c, header), "\n")
	}

	t.Run("last 20 messages", func(t *testing.T) {
		f := newFixture(t, sqliteStore(t))
		for i := 1; i <= 13; i++ { // 26 messages
			f.say(fmt.Sprintf("Q%02d question", i), fmt.Sprintf("A%02d answer", i))
		}
		lines := window(f)
		if len(lines) != 20 {
			t.Fatalf("%d lines, want 20:\n%s", len(lines), strings.Join(lines, "\n"))
		}
		if !strings.HasPrefix(lines[0], "USER (") || !strings.HasSuffix(lines[0], "): Q04 question") ||
			!strings.HasPrefix(lines[19], "ASSISTANT (") || !strings.HasSuffix(lines[19], "): A13 answer") {
			t.Errorf("first %q, last %q", lines[0], lines[19])
		}
	})

	t.Run("4,000 characters each, 40,000 in all", func(t *testing.T) {
		f := newFixture(t, sqliteStore(t))
		for i := 1; i <= 12; i++ { // 12 messages of 5,000 characters
			f.say(fmt.Sprintf("M%02d ", i)+strings.Repeat("word ", 998)+fmt.Sprintf("END%02d", i), "")
		}
		lines := window(f)
		total := 0
		for _, l := range lines {
			content := l[strings.Index(l, "): ")+3:]
			if n := utf8.RuneCountInString(content); n != 4000 || !strings.HasSuffix(content, "…") || strings.Contains(content, "END") {
				t.Errorf("a message of %d characters, not cut to 4,000: %.40s…%s", n, content, content[max(0, len(content)-20):])
			}
			total += utf8.RuneCountInString(l) + 1
		}
		// Each line is ~4,025 characters with its prefix: 9 fit in 40,000.
		if total > 40000+1 || len(lines) != 9 {
			t.Fatalf("%d lines, %d characters", len(lines), total)
		}
		if !strings.Contains(lines[0], "M04 ") || !strings.Contains(lines[8], "M12 ") {
			t.Errorf("kept %.30s .. %.30s: want m04..m12 (the oldest dropped first)", lines[0], lines[8])
		}
	})
}
