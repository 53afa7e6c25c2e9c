package events_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

func setup(t *testing.T, opts ...events.ClientOption) (jetstream.JetStream, *events.Client) {
	t.Helper()
	_, nc := eventstest.RunServer(t)
	js := eventstest.Setup(t, nc, eventstest.Topology())
	c, err := events.NewClient(nc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return js, c
}

func streamMsgs(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	st, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestPublishSetsHeadersAndDedupes(t *testing.T) {
	js, c := setup(t)
	ctx := context.Background()
	e := events.NewTurnEnded(ref, events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: "hi"}}})
	for range 3 { // a platform retrying its publish
		if err := c.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if n := streamMsgs(t, js, events.StreamIn); n != 1 {
		t.Fatalf("ENGRAM_IN holds %d messages, want 1 (Nats-Msg-Id dedupe)", n)
	}
	st, _ := js.Stream(ctx, events.StreamIn)
	m, err := st.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "engram.in.turn_ended.%.acme%2Fweb.chat%2042" {
		t.Fatalf("subject %q", m.Subject)
	}
	if m.Header.Get(events.HeaderMsgID) != e.ID || m.Header.Get(events.HeaderType) != "turn_ended" || m.Header.Get(events.HeaderVersion) != "1" {
		t.Fatalf("headers %v", m.Header)
	}
	got, err := events.Decode(m.Data)
	if err != nil || got.ID != e.ID {
		t.Fatalf("stored event %v %v", got, err)
	}
	// A new event with the same content is a new event.
	if _, err := c.PublishTurnEnded(ctx, ref, events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, js, events.StreamIn); n != 2 {
		t.Fatalf("ENGRAM_IN holds %d messages, want 2", n)
	}
	// Output events go to ENGRAM_OUT.
	if err := c.Publish(ctx, samples()[5]); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, js, events.StreamOut); n != 1 {
		t.Fatalf("ENGRAM_OUT holds %d messages, want 1", n)
	}
}

func TestPublishRejectsInvalid(t *testing.T) {
	js, c := setup(t)
	_, err := c.PublishTokensReported(context.Background(), events.Ref{ProjectID: "p", SessionID: "s"}, events.TokensReported{InputTokens: -1})
	if !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("err %v", err)
	}
	if n := streamMsgs(t, js, events.StreamIn); n != 0 {
		t.Fatalf("invalid event stored: %d", n)
	}
}

func TestNewClientOptions(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	if _, err := events.NewClient(nil); err == nil {
		t.Fatal("nil conn accepted")
	}
	if _, err := events.NewClient(nc, events.WithPrefix("a b")); err == nil {
		t.Fatal("bad prefix accepted")
	}
	if _, err := events.NewClient(nc, events.WithInjectTimeout(0)); err == nil {
		t.Fatal("zero timeout accepted")
	}
}

func TestInjectTimesOut(t *testing.T) {
	js, c := setup(t, events.WithInjectTimeout(300*time.Millisecond))
	start := time.Now()
	_, err := c.Inject(context.Background(), ref, events.TurnStarted{Text: "anyone there?"})
	if !errors.Is(err, events.ErrInjectTimeout) {
		t.Fatalf("err %v, want ErrInjectTimeout", err)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Fatalf("Inject blocked %v", el)
	}
	// The turn_started was stored for the injector, with its reply subject
	// and deadline.
	st, _ := js.Stream(context.Background(), events.StreamIn)
	m, err := st.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	e, err := events.Decode(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := events.PayloadAs[events.TurnStarted](e)
	if p.ReplyTo == "" || p.ReplyBy.IsZero() || p.Text != "anyone there?" {
		t.Fatalf("turn_started payload %+v", p)
	}
}

func TestInjectHonoursCallerContext(t *testing.T) {
	_, c := setup(t, events.WithInjectTimeout(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	_, err := c.Inject(ctx, ref, events.TurnStarted{Text: "x"})
	if !errors.Is(err, context.Canceled) || errors.Is(err, events.ErrInjectTimeout) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

// startInjector answers turn_started events like the real injector: first a
// stray reply (another turn's), then the right one.
func startInjector(t testing.TB, js jetstream.JetStream, c *events.Client, blockFor func(events.TurnStarted) string) {
	t.Helper()
	ctx := context.Background()
	cons, err := js.Consumer(ctx, events.StreamIn, events.ConsumerInjector)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		e, err := events.Decode(m.Data())
		if err != nil {
			_ = m.Term()
			return
		}
		p, _ := events.PayloadAs[events.TurnStarted](e)
		stray := events.New(e.Ref(), events.InjectionReady{InReplyTo: "someone-else", Block: "wrong"})
		_ = c.Respond(p.ReplyTo, stray)
		_ = c.Respond(p.ReplyTo, events.New(e.Ref(), events.InjectionReady{InReplyTo: e.ID, Block: blockFor(p), NodeIDs: []string{"n1"}, Scores: []float64{0.5}}))
		_ = m.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Stop(); <-cc.Closed() })
}

func TestInjectGetsTheBlock(t *testing.T) {
	js, c := setup(t, events.WithInjectTimeout(20*time.Second))
	startInjector(t, js, c, func(events.TurnStarted) string { return "<memory>deploy with make deploy</memory>" })
	inj, err := c.Inject(context.Background(), ref, events.TurnStarted{Text: "how do we deploy?"})
	if err != nil {
		t.Fatal(err)
	}
	if inj.Block != "<memory>deploy with make deploy</memory>" || len(inj.NodeIDs) != 1 || len(inj.Scores) != 1 || inj.Scores[0] != 0.5 || inj.EventID == "" {
		t.Fatalf("injection %+v", inj)
	}
}

// TestConcurrentInjectsGetTheirOwnBlocks: the client's one reply
// subscription hands every answer to the turn that asked, also after Close.
func TestConcurrentInjectsGetTheirOwnBlocks(t *testing.T) {
	js, c := setup(t, events.WithInjectTimeout(20*time.Second))
	startInjector(t, js, c, func(p events.TurnStarted) string { return "block for " + p.Text })
	for round := range 2 {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := range 16 {
			wg.Go(func() {
				text := fmt.Sprintf("question %d of round %d", i, round)
				r := events.Ref{ProjectID: "p1", SessionID: fmt.Sprintf("s%d", i), TurnID: fmt.Sprintf("t%d-%d", round, i)}
				inj, err := c.Inject(context.Background(), r, events.TurnStarted{Text: text})
				if err != nil {
					errs <- err
				} else if inj.Block != "block for "+text {
					errs <- fmt.Errorf("%q got the block %q", text, inj.Block)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRespondValidates(t *testing.T) {
	_, c := setup(t)
	if err := c.Respond("bad subject", samples()[4]); !errors.Is(err, events.ErrInvalidSubject) {
		t.Fatalf("err %v", err)
	}
	bad := samples()[4]
	bad.TurnID = ""
	if err := c.Respond("_INBOX.x", bad); !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("err %v", err)
	}
}

// TestInjectEndsWithItsSubscription: an Inject waiting for its answer
// returns at once, not at its deadline, when the client is closed or the
// connection is lost.
func TestInjectEndsWithItsSubscription(t *testing.T) {
	for _, end := range []string{"client closed", "connection closed"} {
		t.Run(end, func(t *testing.T) {
			_, nc := eventstest.RunServer(t)
			eventstest.Setup(t, nc, eventstest.Topology())
			c, err := events.NewClient(nc, events.WithInjectTimeout(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() {
				_, err := c.Inject(context.Background(), ref, events.TurnStarted{Text: "anyone there?"})
				errc <- err
			}()
			time.Sleep(300 * time.Millisecond) // let it publish and wait
			if end == "client closed" {
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				nc.Close()
			}
			select {
			case err := <-errc:
				if err == nil || errors.Is(err, events.ErrInjectTimeout) {
					t.Fatalf("err %v, want the end of the subscription", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Inject kept waiting after its subscription ended")
			}
		})
	}
}
