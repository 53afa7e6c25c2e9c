package events_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

// inMsgs polls ENGRAM_IN's message count until it is want (the server
// removes acked messages of an interest stream asynchronously).
func inMsgs(t *testing.T, js jetstream.JetStream, want uint64) {
	t.Helper()
	st, err := js.Stream(context.Background(), events.StreamIn)
	if err != nil {
		t.Fatal(err)
	}
	var got uint64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := st.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got = info.State.Msgs; got == want || time.Now().After(deadline) {
			break
		}
	}
	if got != want {
		t.Fatalf("ENGRAM_IN holds %d messages, want %d", got, want)
	}
}

// drain fetches and acks everything consumer has pending; it returns the
// stream sequences it got.
func drain(t *testing.T, js jetstream.JetStream, consumer string) []uint64 {
	t.Helper()
	cons, err := js.Consumer(context.Background(), events.StreamIn, consumer)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for {
		b, err := cons.Fetch(100, jetstream.FetchMaxWait(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range b.Messages() {
			n++
			meta, _ := m.Metadata()
			seqs = append(seqs, meta.Sequence.Stream)
			if err := m.DoubleAck(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if n == 0 {
			return seqs
		}
	}
}

func publishAll(t *testing.T, c *events.Client, perType int) {
	t.Helper()
	ctx := context.Background()
	for i := range perType {
		ref := events.Ref{ProjectID: "p", SessionID: fmt.Sprintf("s%d", i%3), TurnID: fmt.Sprintf("t%d", i)}
		for _, err := range []error{
			pub(c.PublishTurnStarted(ctx, ref, events.TurnStarted{Text: "hi"})),
			pub(c.PublishTurnEnded(ctx, ref, events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: "hi"}}})),
			pub(c.PublishSessionIdle(ctx, ref, events.SessionIdle{LastActivity: time.Now()})),
			pub(c.PublishTokensReported(ctx, ref, events.TokensReported{InputTokens: 10})),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func pub(_ events.Envelope, err error) error { return err }

// Interest retention: an event stays until every consumer that receives its
// type has acked it, then goes; every input type has a consumer.
func TestInterestRetentionRemovesWhatEveryConsumerAcked(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	js := eventstest.Setup(t, nc, eventstest.Topology())
	c, err := events.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	publishAll(t, c, 5)
	inMsgs(t, js, 20)
	if got := len(drain(t, js, events.ConsumerExtractor)); got != 5 {
		t.Fatalf("extractor got %d", got)
	}
	inMsgs(t, js, 20) // the transcript consumer has not acked the turn_ended yet
	if got := len(drain(t, js, events.ConsumerTranscript)); got != 5 {
		t.Fatalf("transcript got %d", got)
	}
	inMsgs(t, js, 15) // the turn_ended went: the extractor and the transcript consumer were their only consumers
	for _, name := range []string{events.ConsumerInjector, events.ConsumerConsolidator, events.ConsumerCompactor} {
		if got := len(drain(t, js, name)); got != 5 {
			t.Fatalf("%s got %d", name, got)
		}
	}
	inMsgs(t, js, 0)

	// A second consumer on turn_started (the idle detector's, say): an
	// event goes only once both acked it.
	topo := eventstest.Topology()
	topo.Consumers = append(topo.Consumers, events.ConsumerConfig{Name: "idle", Types: []events.Type{events.TypeTurnStarted},
		AckWait: 5 * time.Second, MaxDeliver: -1, MaxAckPending: 10})
	if err := events.EnsureTopology(context.Background(), js, topo); err != nil {
		t.Fatal(err)
	}
	publishAll(t, c, 1)
	drain(t, js, events.ConsumerInjector)
	drain(t, js, events.ConsumerExtractor)
	drain(t, js, events.ConsumerTranscript)
	drain(t, js, events.ConsumerConsolidator)
	drain(t, js, events.ConsumerCompactor)
	inMsgs(t, js, 1)
	drain(t, js, "idle")
	inMsgs(t, js, 0)
}

// One session over the per-subject limit is refused; the others are not.
func TestPerSubjectLimitRefusesOneSessionOnly(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	topo.In.MaxMsgsPerSubject = 3
	js := eventstest.Setup(t, nc, topo)
	c, _ := events.NewClient(nc)
	ctx := context.Background()
	ended := func(session string, i int) error {
		_, err := c.PublishTurnEnded(ctx, events.Ref{ProjectID: "p", SessionID: session, TurnID: fmt.Sprint(i)},
			events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: "x"}}})
		return err
	}
	for i := range 3 {
		if err := ended("busy", i); err != nil {
			t.Fatal(err)
		}
	}
	err := ended("busy", 3)
	if err == nil || !strings.Contains(err.Error(), "maximum messages per subject exceeded") {
		t.Fatalf("4th event of one session: %v", err)
	}
	if err := ended("quiet", 0); err != nil {
		t.Fatalf("another session refused: %v", err)
	}
	// Consumed events free the subject (interest retention).
	drain(t, js, events.ConsumerExtractor)
	drain(t, js, events.ConsumerTranscript)
	inMsgs(t, js, 0)
	if err := ended("busy", 4); err != nil {
		t.Fatalf("after the extractor caught up: %v", err)
	}
}

// The documented maximum event size: the client refuses a bigger event
// before sending, and ENGRAM_IN refuses it from a raw publisher.
func TestMaxEventSizeEnforcedAtPublish(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	js := eventstest.Setup(t, nc, eventstest.Topology())
	c, _ := events.NewClient(nc)
	ctx := context.Background()
	big := strings.Repeat("a", events.DefaultMaxEventBytes)
	_, err := c.PublishTurnEnded(ctx, events.Ref{ProjectID: "p", SessionID: "s", TurnID: "t"},
		events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: big}}})
	if !errors.Is(err, events.ErrEventTooLarge) || !strings.Contains(err.Error(), "the maximum is 524288") {
		t.Fatalf("oversize event: %v", err)
	}
	raw := nats.NewMsg("engram.in.turn_ended.%.p.s")
	raw.Data = []byte(big + strings.Repeat("b", events.MaxHeaderBytes+1))
	if _, err := js.PublishMsg(ctx, raw); err == nil || !strings.Contains(err.Error(), "message size exceeds maximum") {
		t.Fatalf("raw oversize publish: %v", err)
	}
	inMsgs(t, js, 0)
	// Just under the limit goes through.
	ok := strings.Repeat("a", events.DefaultMaxEventBytes-1024)
	if _, err := c.PublishTurnEnded(ctx, events.Ref{ProjectID: "p", SessionID: "s", TurnID: "t"},
		events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: ok}}}); err != nil {
		t.Fatal(err)
	}
	// A client configured without a limit leaves it to the server.
	if _, err := events.NewClient(nc, events.WithMaxEventBytes(0)); err == nil {
		t.Fatal("max event bytes 0 accepted")
	}
}

// oldTopology creates what an Engram before interest retention made:
// ENGRAM_IN with limits retention, all of <prefix>.in.> as its subjects and
// no per-subject or size limit, consumers with a server-side MaxDeliver.
func oldTopology(t *testing.T, js jetstream.JetStream, topo events.Topology) {
	t.Helper()
	ctx := context.Background()
	for _, sc := range topo.StreamConfigs() {
		if sc.Name == topo.In.Name {
			sc.Subjects = []string{topo.Subjects().InAll()}
		}
		sc.Retention = jetstream.LimitsPolicy
		sc.MaxMsgsPerSubject, sc.DiscardNewPerSubject, sc.MaxMsgSize = -1, false, -1
		if _, err := js.CreateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range topo.Consumers {
		cc := topo.JetStreamConsumerConfig(c)
		cc.MaxDeliver = 10
		if _, err := js.CreateConsumer(ctx, topo.In.Name, cc); err != nil {
			t.Fatal(err)
		}
	}
}

// The automatic migration: an ENGRAM_IN of limits retention holding
// events, some consumed by some workers, becomes an interest stream at the
// next start; every event a consumer had not acked is still delivered to
// it, what everyone acked is gone, and the per-subject limit waits until no
// subject is over it.
func TestMigrateLimitsRetentionLosesNothing(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	topo := eventstest.Topology()
	topo.In.MaxMsgsPerSubject = 3
	oldTopology(t, js, topo)
	c, _ := events.NewClient(nc)
	publishAll(t, c, 12) // 4 events per subject (3 sessions), over the new limit
	st, _ := js.Stream(ctx, events.StreamIn)
	// The extractor (and its transcript consumer) had consumed half its
	// events, the injector all.
	acked := map[uint64]bool{}
	for _, name := range []string{events.ConsumerExtractor, events.ConsumerTranscript} {
		cons, _ := js.Consumer(ctx, events.StreamIn, name)
		b, err := cons.Fetch(6, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			meta, _ := m.Metadata()
			acked[meta.Sequence.Stream] = true
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(acked) != 6 {
		t.Fatalf("extractor and transcript acked %d", len(acked))
	}
	drain(t, js, events.ConsumerInjector)
	// Not an input type: no consumer ever received it.
	if _, err := js.Publish(ctx, "engram.in.bogus.p.s", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	inMsgs(t, js, 49) // limits retention: everything still there

	if err := events.EnsureTopology(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Retention != jetstream.InterestPolicy || info.Config.MaxMsgSize <= 0 {
		t.Fatalf("not migrated: %+v", info.Config)
	}
	if info.Config.MaxMsgsPerSubject != -1 {
		t.Fatalf("per-subject limit applied while subjects hold 4 > 3: %d (would delete unconsumed events)", info.Config.MaxMsgsPerSubject)
	}
	// Gone: the 12 turn_started (injector done) and the 6 acked turn_ended.
	// The message no consumer receives stays (until max age).
	inMsgs(t, js, 48-12-6+1)
	for _, cc := range topo.Consumers {
		cons, _ := js.Consumer(ctx, events.StreamIn, cc.Name)
		ci, _ := cons.Info(ctx)
		if ci.Config.MaxDeliver != -1 {
			t.Fatalf("%s: server max deliver %d", cc.Name, ci.Config.MaxDeliver)
		}
	}
	got := map[string][]uint64{}
	for _, name := range []string{events.ConsumerInjector, events.ConsumerExtractor, events.ConsumerTranscript, events.ConsumerConsolidator, events.ConsumerCompactor} {
		got[name] = drain(t, js, name)
	}
	if len(got[events.ConsumerInjector]) != 0 || len(got[events.ConsumerExtractor]) != 6 || len(got[events.ConsumerTranscript]) != 6 ||
		len(got[events.ConsumerConsolidator]) != 12 || len(got[events.ConsumerCompactor]) != 12 {
		t.Fatalf("after migration: injector %d extractor %d consolidator %d compactor %d",
			len(got[events.ConsumerInjector]), len(got[events.ConsumerExtractor]),
			len(got[events.ConsumerConsolidator]), len(got[events.ConsumerCompactor]))
	}
	for _, seq := range got[events.ConsumerExtractor] {
		if acked[seq] {
			t.Fatalf("extractor got acked seq %d again", seq)
		}
	}
	inMsgs(t, js, 1)
	// Published now, a message of no input type is refused.
	if _, err := js.Publish(ctx, "engram.in.bogus.p.s2", []byte("{}")); err == nil {
		t.Fatal("a subject of no input type was stored")
	}
	inMsgs(t, js, 1)
	// Now no subject is over the limit: the next start applies it.
	if err := events.EnsureTopology(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	info, _ = st.Info(ctx)
	if info.Config.MaxMsgsPerSubject != 3 || !info.Config.DiscardNewPerSubject {
		t.Fatalf("per-subject limit not applied: %+v", info.Config)
	}
	// Idempotent.
	if err := events.EnsureTopology(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
}

// A stream created fresh is created with its consumers before it turns to
// interest retention: an event published right after setup is kept.
func TestFreshSetupKeepsFirstEvent(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	js := eventstest.Setup(t, nc, eventstest.Topology())
	c, _ := events.NewClient(nc)
	publishAll(t, c, 1)
	inMsgs(t, js, 4)
	st, _ := js.Stream(context.Background(), events.StreamIn)
	if st.CachedInfo().Config.Retention != jetstream.InterestPolicy {
		t.Fatal("not interest")
	}
}
