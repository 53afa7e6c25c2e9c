package runner_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// The finding: a second turn_ended reusing an earlier event id
// (another turn, other content) without a Nats-Msg-Id header was treated as
// already processed: acknowledged, that turn never stored, no letter, no
// log line. Now the processed-event records carry the content's digest: the
// second event is dead-lettered with its reason, while a redelivery of the
// first (same content) is still a duplicate. Records are in a real SQLite
// store.
func TestReusedEventIDIsDeadLettered(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "engram.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var mu sync.Mutex
	var turns []string
	h.start(h.config(), func(_ context.Context, ev events.Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		turns = append(turns, ev.TurnID)
		return nil
	}, runner.WithProcessed(st))

	raw := func(turn, text string) []byte {
		ev := events.NewTurnEnded(events.Ref{ProjectID: "proj", SessionID: "sess", TurnID: turn},
			events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: text}}})
		ev.ID = "platform-id-7" // the platform's own ids, one reused
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	publish := func(b []byte) {
		// No Nats-Msg-Id: the stream cannot drop a copy.
		if _, err := h.js.PublishMsg(ctx, &nats.Msg{Subject: h.topo.Subjects().In(events.TypeTurnEnded, "", "proj", "sess"), Data: b}); err != nil {
			t.Fatal(err)
		}
	}
	first := raw("t1", "we deploy on Fridays")
	publish(first)
	eventually(t, "the first handled", func() bool { return h.obs.count(runner.ResultAcked) == 1 })
	publish(raw("t2", "no, we deploy on Thursdays")) // another turn, same id
	publish(first)                                   // the first again: a duplicate
	eventually(t, "both settled", func() bool { return len(h.obs.all()) == 3 })

	if h.obs.count(runner.ResultDuplicate) != 1 || h.obs.count(runner.ResultDeadLettered) != 1 {
		t.Fatalf("outcomes %+v", h.obs.all())
	}
	mu.Lock()
	if len(turns) != 1 || turns[0] != "t1" {
		t.Fatalf("handled turns %v", turns)
	}
	mu.Unlock()
	ls := h.letters()
	if len(ls) != 1 || ls[0].Sequence != 2 || !strings.Contains(ls[0].Reason, "event id reused with other content") ||
		!strings.Contains(string(ls[0].Data), "Thursdays") {
		t.Fatalf("letters %+v", ls)
	}
	t.Logf("letter: %s", ls[0].Reason)
	eventually(t, "all settled on the consumer", func() bool { return h.consumer().AckFloor.Stream == 3 })
}
