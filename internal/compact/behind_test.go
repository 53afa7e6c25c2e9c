package compact_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestWaitsForTheTranscript: a report without a token count is judged by
// the stored transcript, which the extractor writes. Found by the chaos
// suite: after a model outage the compactor answered the sessions' last
// reports ("under the threshold") before the extractor had stored their
// turns, and those sessions were never compacted (20 of 77). While a
// turn_ended of the session waits for the extractor, the report is now
// retried (ErrTranscriptBehind) instead.
func TestWaitsForTheTranscript(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	js := eventstest.Setup(t, nc, topo)
	bus, err := events.NewClient(nc, events.WithJetStream(js))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(t testing.TB) memory.Store { return storetest.OpenSQLite(t) }, func(c *compact.Config) { c.Threshold = compact.Threshold{Tokens: 1000} })
	c, err := compact.New(f.st, f.client, f.pub, f.cfg, compact.WithExtractorLag(events.NewExtractorLag(js, topo)))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		f.turn("Deploy the web app to staging and check the logs.")
	}
	// A fourth turn ended; the extractor has not stored it yet.
	evRef := events.Ref{ProjectID: project, SessionID: session, TurnID: "t4"}
	if _, err := bus.PublishTurnEnded(f.ctx, evRef, events.TurnEnded{Messages: []events.Message{
		{Role: events.RoleUser, Content: "Now deploy it to production, with the same checks, and tell me what changed."}}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Compact(f.ctx, f.report(0, 0))
	if !errors.Is(err, compact.ErrTranscriptBehind) {
		t.Fatalf("report with the transcript behind: %v, want ErrTranscriptBehind", err)
	}
	if cl := compact.Classify(err); runner.IsPermanent(cl) || runner.IsUnavailable(cl) {
		t.Fatalf("classified as %v", cl)
	}

	// The extractor stores the turn and acknowledges it: the retry compacts.
	for range 6 {
		f.turn("Now deploy it to production, with the same checks, and tell me what changed.")
	}
	cons, err := js.Consumer(f.ctx, topo.In.Name, events.ConsumerExtractor)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(10, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(f.ctx); err != nil {
			t.Fatal(err)
		}
	}
	f.srv.Enqueue(llmtest.Text("## Active task\nDeploy the web app to production.\n"))
	res, err := c.Compact(f.ctx, f.report(0, 0))
	if err != nil || res.Outcome != compact.Compacted {
		t.Fatalf("retry: %+v, %v", res, err)
	}
}
