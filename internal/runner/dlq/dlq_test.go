package dlq_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/engram-memory/engram/internal/runner/dlq"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func setup(t *testing.T, edit func(*events.Topology)) (*nats.Conn, jetstream.JetStream, events.Topology) {
	t.Helper()
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	if edit != nil {
		edit(&topo)
	}
	return nc, eventstest.Setup(t, nc, topo), topo
}

func letter(seq uint64) dlq.Letter {
	h := nats.Header{}
	h.Set(events.HeaderType, "turn_ended")
	h.Set(jetstream.MsgIDHeader, "ev-1") // must not become the letter's own id
	return dlq.Letter{Consumer: "extractor", Reason: "bad\nthing", Subject: "engram.in.turn_ended.%.p.s",
		Stream: events.StreamIn, Sequence: seq, Deliveries: 3, MsgID: "ev-1", Header: h, Data: []byte(`{"x":1}`)}
}

func TestPutDedupesAndReadsBack(t *testing.T) {
	_, js, topo := setup(t, nil)
	ctx := context.Background()
	w := dlq.NewWriter(js, topo.Subjects())
	for range 3 { // the runner, the watcher, another replica (its own writer)
		if err := dlq.NewWriter(js, topo.Subjects()).Put(ctx, letter(7)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Put(ctx, letter(8)); err != nil {
		t.Fatal(err)
	}
	s := dlq.NewStore(js, events.StreamDLQ)
	ls, err := s.List(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 {
		t.Fatalf("%d letters, want 2 (same message deduplicated)", len(ls))
	}
	l := ls[0]
	if l.Consumer != "extractor" || l.Reason != "bad thing" || l.Subject != "engram.in.turn_ended.%.p.s" || l.Stream != events.StreamIn ||
		l.Sequence != 7 || l.Deliveries != 3 || l.MsgID != "ev-1" || string(l.Data) != `{"x":1}` || l.Time.IsZero() ||
		l.DLQSequence != 1 || l.Header.Get(events.HeaderType) != "turn_ended" || l.Header.Get(jetstream.MsgIDHeader) != "" {
		t.Fatalf("letter %+v", l)
	}
	// Paging.
	if ls, _ := s.List(ctx, 2, 0); len(ls) != 1 || ls[0].Sequence != 8 {
		t.Fatalf("from 2: %+v", ls)
	}
	if ls, _ := s.List(ctx, 0, 1); len(ls) != 1 {
		t.Fatalf("limit 1: %d", len(ls))
	}
	got, err := s.Get(ctx, 2)
	if err != nil || got.Sequence != 8 {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := s.Get(ctx, 99); !errors.Is(err, dlq.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	// The subject is <prefix>.dlq.<consumer>.
	st, _ := js.Stream(ctx, events.StreamDLQ)
	m, _ := st.GetMsg(ctx, 1)
	if m.Subject != "engram.dlq.extractor" {
		t.Fatalf("subject %q", m.Subject)
	}
}

func TestLongReasonClipped(t *testing.T) {
	_, js, topo := setup(t, nil)
	ctx := context.Background()
	l := letter(1)
	l.Reason = strings.Repeat("é", 2000)
	if err := dlq.NewWriter(js, topo.Subjects()).Put(ctx, l); err != nil {
		t.Fatal(err)
	}
	got, err := dlq.NewStore(js, events.StreamDLQ).Get(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Reason) > 1100 || !strings.HasSuffix(got.Reason, "...") || !strings.HasPrefix(got.Reason, "éé") {
		t.Fatalf("reason of %d bytes", len(got.Reason))
	}
}

func TestReplayRepublishesAndDeletes(t *testing.T) {
	nc, js, topo := setup(t, nil)
	ctx := context.Background()
	c, _ := events.NewClient(nc)
	ev, err := c.PublishSessionIdle(ctx, events.Ref{ProjectID: "p", SessionID: "s"}, events.SessionIdle{LastActivity: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	// Dead-letter the stored message as the runner would.
	in, _ := js.Stream(ctx, events.StreamIn)
	m, _ := in.GetMsg(ctx, 1)
	w := dlq.NewWriter(js, topo.Subjects())
	if err := w.Put(ctx, dlq.Letter{Consumer: events.ConsumerConsolidator, Reason: "store refused", Subject: m.Subject,
		Stream: events.StreamIn, Sequence: 1, Deliveries: 1, MsgID: ev.ID, Header: m.Header, Data: m.Data}); err != nil {
		t.Fatal(err)
	}
	s := dlq.NewStore(js, events.StreamDLQ)
	// Within the duplicate window: a replay must still be stored.
	if err := s.Replay(ctx, 1); err != nil {
		t.Fatal(err)
	}
	info, _ := in.Info(ctx)
	if info.State.Msgs != 2 {
		t.Fatalf("ENGRAM_IN holds %d, want the replayed copy too", info.State.Msgs)
	}
	r, _ := in.GetMsg(ctx, 2)
	got, err := events.Decode(r.Data)
	if err != nil || got.ID != ev.ID || r.Subject != m.Subject || r.Header.Get(events.HeaderType) != "session_idle" {
		t.Fatalf("replayed %v %v %v", got, err, r.Header)
	}
	if _, err := s.Get(ctx, 1); !errors.Is(err, dlq.ErrNotFound) {
		t.Fatalf("letter still there: %v", err)
	}
	if err := s.Delete(ctx, 1); !errors.Is(err, dlq.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if err := s.Replay(ctx, 1); !errors.Is(err, dlq.ErrNotFound) {
		t.Fatalf("replay twice: %v", err)
	}
}

func TestWatcherCapturesAndStops(t *testing.T) {
	nc, js, topo := setup(t, func(tp *events.Topology) {
		for i := range tp.Consumers {
			tp.Consumers[i].AckWait = time.Second
		}
	})
	ctx := context.Background()
	// The advisory comes from a server-side limit, which the topology's
	// consumers do not set: set one.
	cc, _ := topo.Consumer(events.ConsumerCompactor)
	jcc := topo.JetStreamConsumerConfig(cc)
	jcc.MaxDeliver = 1
	if _, err := js.CreateOrUpdateConsumer(ctx, events.StreamIn, jcc); err != nil {
		t.Fatal(err)
	}
	w := dlq.NewWriter(js, topo.Subjects())
	captured := make(chan dlq.Letter, 4)
	errs := make(chan error, 4)
	wt, err := dlq.Watch(nc, js, w, events.StreamIn, events.ConsumerCompactor,
		func(l dlq.Letter) { captured <- l }, func(err error) { errs <- err })
	if err != nil {
		t.Fatal(err)
	}
	defer wt.Stop()
	c, _ := events.NewClient(nc)
	ev, err := c.PublishTokensReported(ctx, events.Ref{ProjectID: "p", SessionID: "s"}, events.TokensReported{InputTokens: 5})
	if err != nil {
		t.Fatal(err)
	}
	// The same message dead-lettered earlier by a runner: the capture must
	// not add a second letter.
	if err := w.Put(ctx, dlq.Letter{Consumer: events.ConsumerCompactor, Reason: "runner", Stream: events.StreamIn,
		Sequence: 1, Subject: "x"}); err != nil {
		t.Fatal(err)
	}
	cons, _ := js.Consumer(ctx, events.StreamIn, events.ConsumerCompactor)
	deadline := time.Now().Add(30 * time.Second)
	var got dlq.Letter
wait:
	for {
		if time.Now().After(deadline) {
			t.Fatal("no capture")
		}
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(1500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for range b.Messages() { // taken and never acked
		}
		select {
		case got = <-captured:
			break wait
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	}
	if got.MsgID != ev.ID || got.Reason != dlq.ReasonMaxDeliveries || got.Sequence != 1 || got.Deliveries != 1 {
		t.Fatalf("captured %+v", got)
	}
	ls, _ := dlq.NewStore(js, events.StreamDLQ).List(ctx, 0, 0)
	if len(ls) != 1 || ls[0].Reason != "runner" {
		t.Fatalf("letters %+v: want only the runner's", ls)
	}
	wt.Stop()
	wt.Stop() // idempotent
}

func TestWatcherReportsGoneMessages(t *testing.T) {
	nc, js, topo := setup(t, nil)
	errs := make(chan error, 1)
	wt, err := dlq.Watch(nc, js, dlq.NewWriter(js, topo.Subjects()), events.StreamIn, events.ConsumerExtractor,
		nil, func(err error) { errs <- err })
	if err != nil {
		t.Fatal(err)
	}
	defer wt.Stop()
	// A forged advisory for a sequence that does not exist.
	if err := nc.Publish(dlq.AdvisorySubject(events.StreamIn, events.ConsumerExtractor),
		[]byte(`{"type":"io.nats.jetstream.advisory.v1.max_deliver","stream":"ENGRAM_IN","consumer":"extractor","stream_seq":42,"deliveries":10}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Fatalf("err %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no error reported")
	}
}

func TestWriterRemembersPastTheDuplicateWindow(t *testing.T) {
	_, js, topo := setup(t, func(tp *events.Topology) { tp.DLQ.Duplicates = 100 * time.Millisecond })
	ctx := context.Background()
	w := dlq.NewWriter(js, topo.Subjects())
	if err := w.Put(ctx, letter(1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond) // the stream's window has passed
	if err := w.Put(ctx, letter(1)); err != nil {
		t.Fatal(err)
	}
	s := dlq.NewStore(js, events.StreamDLQ)
	if ls, _ := s.List(ctx, 0, 0); len(ls) != 1 {
		t.Fatalf("%d letters, want 1", len(ls))
	}
	// A writer that never saw it relies on the stream alone: past the
	// window it stores a second copy (the bound of the guarantee).
	if err := dlq.NewWriter(js, topo.Subjects()).Put(ctx, letter(1)); err != nil {
		t.Fatal(err)
	}
	if ls, _ := s.List(ctx, 0, 0); len(ls) != 2 {
		t.Fatalf("%d letters, want 2", len(ls))
	}
}

// A letter over the server's maximum payload keeps its first bytes, says so
// and cannot be replayed (the body is not the event any more).
func TestOversizeLetterTruncatedAndNotReplayed(t *testing.T) {
	nc, js, topo := setup(t, nil)
	ctx := context.Background()
	w := dlq.NewWriter(js, topo.Subjects())
	l := letter(7)
	l.Data = bytes.Repeat([]byte("a"), int(nc.MaxPayload())) // the body alone fills it
	l.Header.Set("X-Big", strings.Repeat("h", 2000))
	if err := w.Put(ctx, l); err != nil {
		t.Fatal(err)
	}
	s := dlq.NewStore(js, events.StreamDLQ)
	got, err := s.Get(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Truncated != len(l.Data) || len(got.Data) == 0 || len(got.Data) >= len(l.Data) ||
		got.Stream != events.StreamIn || got.Sequence != 7 || got.MsgID != "ev-1" || got.Header.Get("X-Big") == "" {
		t.Fatalf("letter: truncated %d kept %d %+v", got.Truncated, len(got.Data), got.Header)
	}
	if err := s.Replay(ctx, 1); err == nil || !strings.Contains(err.Error(), "cannot be replayed") {
		t.Fatalf("replay of a truncated letter: %v", err)
	}
	if _, err := s.Get(ctx, 1); err != nil {
		t.Fatalf("refused replay deleted the letter: %v", err)
	}
	// A small letter is whole.
	if err := w.Put(ctx, letter(8)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, 2); got.Truncated != 0 || string(got.Data) != `{"x":1}` {
		t.Fatalf("small letter %+v", got)
	}
}
