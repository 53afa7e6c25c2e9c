package idle_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/idle"
	"github.com/engram-memory/engram/internal/natsembed"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

// fakeClock is a controllable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

const quiet = 30 * time.Minute

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func setup(t *testing.T) (*nats.Conn, jetstream.JetStream, *events.Client) {
	t.Helper()
	_, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	for _, s := range []*events.StreamConfig{&topo.In, &topo.Out, &topo.DLQ} {
		s.MaxBytes = 8 << 20 // within the test server's memory limit
	}
	topo.Consumers = append(topo.Consumers, idle.ConsumerConfig())
	js := eventstest.Setup(t, nc, topo)
	cl, err := events.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js, cl
}

func newDetector(t *testing.T, js jetstream.JetStream, pub idle.Publisher, clk idle.Clock, owner string) *idle.Detector {
	t.Helper()
	d, err := idle.New(ctxT(t), js, pub, idle.Options{Quiet: quiet, Clock: clk, Owner: owner, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// idleEvents returns the session_idle events in ENGRAM_IN, in order.
func idleEvents(t *testing.T, js jetstream.JetStream) []events.Envelope {
	t.Helper()
	ctx := ctxT(t)
	cons, err := js.OrderedConsumer(ctx, events.StreamIn, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.Subjects{}.InType(events.TypeSessionIdle)},
	})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []events.Envelope
	for left := int(info.NumPending); left > 0; {
		batch, err := cons.Fetch(left, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			e, err := events.Decode(m.Data())
			if err != nil {
				t.Fatalf("published session_idle does not decode: %v", err)
			}
			if m.Headers().Get(jetstream.MsgIDHeader) != e.ID {
				t.Fatalf("Nats-Msg-Id %q != event id %q", m.Headers().Get(jetstream.MsgIDHeader), e.ID)
			}
			out = append(out, e)
			left--
		}
		if batch.Error() != nil {
			t.Fatal(batch.Error())
		}
	}
	return out
}

func countBySession(evs []events.Envelope) map[string]int {
	m := map[string]int{}
	for _, e := range evs {
		m[e.ProjectID+"/"+e.SessionID]++
	}
	return m
}

func TestTwoReplicasPublishExactlyOneIdlePerQuietSession(t *testing.T) {
	_, js, cl := setup(t)
	clk := &fakeClock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	a := newDetector(t, js, cl, clk, "replica-a")
	b := newDetector(t, js, cl, clk, "replica-b")
	ctx := ctxT(t)

	t0 := clk.Now()
	// Activity seen by either replica (the consumer is shared).
	must(t, a.Observe(ctx, "", "acme/web", "chat 1", t0))
	must(t, b.Observe(ctx, "", "acme/web", "chat 1", t0.Add(time.Minute)))
	must(t, b.Observe(ctx, "", "acme/web", "chat 2", t0))
	must(t, a.Observe(ctx, "", "acme/web", "chat 1", t0.Add(30*time.Second))) // older: ignored
	clk.Advance(25 * time.Minute)
	must(t, a.Observe(ctx, "", "other", "s", clk.Now())) // recent

	// Not quiet long enough yet for chat 1 (last at t0+1m, now t0+25m).
	if n, err := a.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("early sweep published %d, %v", n, err)
	}
	clk.Advance(6*time.Minute + time.Second) // t0+31m: chat 1 and chat 2 are quiet, "other" is not

	var wg sync.WaitGroup
	counts := make([]int, 6)
	for i := range counts {
		d := a
		if i%2 == 1 {
			d = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := d.Sweep(ctx)
			if err != nil {
				t.Error(err)
			}
			counts[i] = n
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range counts {
		total += n
	}
	if total != 2 {
		t.Errorf("replicas claimed %d publishes, want 2 (%v)", total, counts)
	}
	got := countBySession(idleEvents(t, js))
	if got["acme/web/chat 1"] != 1 || got["acme/web/chat 2"] != 1 || len(got) != 2 {
		t.Fatalf("idle events by session = %v, want one each for chat 1 and chat 2", got)
	}
	evs := idleEvents(t, js)
	for _, e := range evs {
		p, _ := events.PayloadAs[events.SessionIdle](e)
		want := t0
		if e.SessionID == "chat 1" {
			want = t0.Add(time.Minute)
		}
		if !p.LastActivity.Equal(want) {
			t.Errorf("%s: last activity %v, want %v", e.SessionID, p.LastActivity, want)
		}
	}

	// An hour later: "other" is quiet now; chat 1 and chat 2 had nothing new.
	clk.Advance(time.Hour)
	na, _ := a.Sweep(ctx)
	nb, _ := b.Sweep(ctx)
	if na+nb != 1 {
		t.Errorf("re-sweep published %d+%d, want 1 (other/s only)", na, nb)
	}
	got = countBySession(idleEvents(t, js))
	if got["acme/web/chat 1"] != 1 || got["acme/web/chat 2"] != 1 || got["other/s"] != 1 {
		t.Fatalf("idle events by session = %v", got)
	}
	// New activity in chat 1 -> one more after the quiet period.
	must(t, b.Observe(ctx, "", "acme/web", "chat 1", clk.Now()))
	clk.Advance(quiet)
	n1, _ := a.Sweep(ctx)
	n2, _ := b.Sweep(ctx)
	if n1+n2 != 1 {
		t.Errorf("after new activity: published %d+%d, want 1", n1, n2)
	}
	got = countBySession(idleEvents(t, js))
	if got["acme/web/chat 1"] != 2 || got["acme/web/chat 2"] != 1 || got["other/s"] != 1 {
		t.Fatalf("idle events by session = %v", got)
	}
}

// failingPublisher fails every publish.
type failingPublisher struct{}

func (failingPublisher) Publish(context.Context, events.Envelope) error {
	return errors.New("bus down")
}

func TestClaimOfAFailedReplicaExpires(t *testing.T) {
	_, js, cl := setup(t)
	clk := &fakeClock{now: time.Now()}
	broken := newDetector(t, js, failingPublisher{}, clk, "broken")
	healthy := newDetector(t, js, cl, clk, "healthy")
	ctx := ctxT(t)
	must(t, broken.Observe(ctx, "", "p", "s", clk.Now()))
	clk.Advance(quiet + time.Second)

	if n, err := broken.Sweep(ctx); n != 0 || err == nil {
		t.Fatalf("broken replica: %d, %v; want 0 and the publish error", n, err)
	}
	if n, err := healthy.Sweep(ctx); n != 0 || err != nil {
		t.Fatalf("healthy replica took a live claim: %d, %v", n, err)
	}
	clk.Advance(2 * time.Minute) // claim TTL (1m) passed
	if n, err := healthy.Sweep(ctx); n != 1 || err != nil {
		t.Fatalf("healthy replica after claim expiry: %d, %v", n, err)
	}
	if got := countBySession(idleEvents(t, js)); got["p/s"] != 1 {
		t.Fatalf("idle events %v", got)
	}
}

func TestRepublishAfterCrashIsDeduplicated(t *testing.T) {
	// The event id depends only on the session and its activity time.
	t0 := time.Now()
	if idle.EventID("", "p", "s", t0) != idle.EventID("", "p", "s", t0.In(time.FixedZone("x", 3600))) {
		t.Fatal("event id depends on the time zone")
	}
	if idle.EventID("", "p", "s", t0) == idle.EventID("", "p", "s", t0.Add(time.Nanosecond)) ||
		idle.EventID("", "p", "s", t0) == idle.EventID("", "p", "t", t0) || idle.EventID("", "a\x00b", "c", t0) == idle.EventID("", "a", "b\x00c", t0) {
		t.Fatal("event ids collide")
	}
	_, js, cl := setup(t)
	ctx := ctxT(t)
	e := events.NewSessionIdle(events.Ref{ProjectID: "p", SessionID: "s"}, events.SessionIdle{LastActivity: t0})
	e.ID = idle.EventID("", "p", "s", t0)
	must(t, cl.Publish(ctx, e))
	must(t, cl.Publish(ctx, e)) // a replica that crashed after publishing, before recording
	if n := len(idleEvents(t, js)); n != 1 {
		t.Fatalf("%d events stored, want 1", n)
	}
}

func TestStateSurvivesServerRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats")
	clk := &fakeClock{now: time.Now()}
	start := func() (*natsembed.Server, jetstream.JetStream, *events.Client) {
		srv, err := natsembed.Start(natsembed.Options{StoreDir: dir, Listen: "127.0.0.1:-1"})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close(); srv.Shutdown() })
		topo := events.DefaultTopology()
		js := eventstest.Setup(t, nc, topo)
		cl, err := events.NewClient(nc)
		if err != nil {
			t.Fatal(err)
		}
		return srv, js, cl
	}
	ctx := ctxT(t)
	srv, js, cl := start()
	d := newDetector(t, js, cl, clk, "before")
	must(t, d.Observe(ctx, "", "p", "quiet-before", clk.Now()))
	must(t, d.Observe(ctx, "", "p", "quiet-after", clk.Now().Add(20*time.Minute)))
	clk.Advance(quiet + time.Second)
	if n, err := d.Sweep(ctx); n != 1 || err != nil {
		t.Fatalf("before restart: %d, %v", n, err)
	}
	srv.Shutdown()

	_, js, cl = start()
	d = newDetector(t, js, cl, clk, "after")
	if n, err := d.Sweep(ctx); n != 0 || err != nil {
		t.Fatalf("after restart, nothing new is quiet: %d, %v", n, err)
	}
	clk.Advance(20 * time.Minute)
	if n, err := d.Sweep(ctx); n != 1 || err != nil {
		t.Fatalf("after restart, the remembered session: %d, %v", n, err)
	}
	got := countBySession(idleEvents(t, js))
	if got["p/quiet-before"] != 1 || got["p/quiet-after"] != 1 {
		t.Fatalf("idle events %v", got)
	}
}

func TestRunConsumesActivityFromTheStream(t *testing.T) {
	_, js, cl := setup(t)
	clk := &fakeClock{now: time.Now()}
	var mu sync.Mutex
	var bgErrs []error
	var published atomic.Int64
	d, err := idle.New(ctxT(t), js, cl, idle.Options{Quiet: quiet, Clock: clk, Sweep: 50 * time.Millisecond,
		OnError:     func(err error) { mu.Lock(); bgErrs = append(bgErrs, err); mu.Unlock() },
		OnPublished: func(string, string, time.Time) { published.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	cons, err := js.Consumer(ctx, events.StreamIn, idle.ConsumerName)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, cons, events.Subjects{}) }()

	ref := events.Ref{ProjectID: "acme/web", SessionID: "chat.42", TurnID: "t1"}
	if _, err := cl.PublishTurnStarted(ctx, ref, events.TurnStarted{Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.PublishTokensReported(ctx, events.Ref{ProjectID: "acme/web", SessionID: "other"}, events.TokensReported{InputTokens: 10}); err != nil {
		t.Fatal(err)
	}
	// Wait until the consumer has recorded both sessions, then make them quiet.
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Consumer >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer did not ack: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	clk.Advance(quiet + time.Minute)
	for len(idleEvents(t, js)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("Run's sweep did not publish: %v", countBySession(idleEvents(t, js)))
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := countBySession(idleEvents(t, js))
	if got["acme/web/chat.42"] != 1 || got["acme/web/other"] != 1 || len(got) != 2 {
		t.Fatalf("idle events %v", got)
	}
	if n := published.Load(); n != 2 {
		t.Errorf("OnPublished called %d times, want 2", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bgErrs) > 0 {
		t.Fatalf("background errors: %v", bgErrs)
	}
}

func TestOptionsAndInput(t *testing.T) {
	_, js, cl := setup(t)
	ctx := ctxT(t)
	if _, err := idle.New(ctx, js, cl, idle.Options{}); err == nil {
		t.Error("New without a quiet period succeeded")
	}
	if _, err := idle.New(ctx, js, nil, idle.Options{Quiet: time.Minute}); err == nil {
		t.Error("New without a publisher succeeded")
	}
	d := newDetector(t, js, cl, &fakeClock{now: time.Now()}, "x")
	if err := d.Observe(ctx, "", "", "s", time.Now()); !errors.Is(err, idle.ErrInvalidSession) {
		t.Errorf("Observe with no project: %v", err)
	}
	if n, err := d.Sweep(ctx); n != 0 || err != nil {
		t.Errorf("sweep of an empty bucket: %d, %v", n, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// failingPub fails its first publishes, then hands them to the client.
type failingPub struct {
	*events.Client
	fails atomic.Int32
}

func (p *failingPub) Publish(ctx context.Context, e events.Envelope) error {
	if p.fails.Add(-1) >= 0 {
		return errors.New("bus down")
	}
	return p.Client.Publish(ctx, e)
}

// TestClaimHoldsForItsOwner: a claim blocks the replica that made it as
// well (two sweeps of one replica must not both publish), and a claim
// whose publish failed is retried once it expires (ClaimTTL, default one
// minute), by any replica.
func TestClaimHoldsForItsOwner(t *testing.T) {
	_, js, cl := setup(t)
	clk := &fakeClock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	pub := &failingPub{Client: cl}
	pub.fails.Store(1)
	a := newDetector(t, js, pub, clk, "replica-a")
	ctx := ctxT(t)
	must(t, a.Observe(ctx, "", "acme/web", "chat 1", clk.Now()))
	clk.Advance(quiet + time.Second)

	if n, err := a.Sweep(ctx); n != 0 || err == nil {
		t.Fatalf("sweep with the bus down: %d published, err %v; want 0 and the error", n, err)
	}
	// The claim stands, for its owner too.
	if n, err := a.Sweep(ctx); n != 0 || err != nil {
		t.Fatalf("sweep under its own fresh claim: %d published, err %v; want 0", n, err)
	}
	clk.Advance(time.Minute + time.Second) // the claim expires
	if n, err := a.Sweep(ctx); n != 1 || err != nil {
		t.Fatalf("sweep after the claim expired: %d published, err %v; want 1", n, err)
	}
	if got := countBySession(idleEvents(t, js)); got["acme/web/chat 1"] != 1 || len(got) != 1 {
		t.Fatalf("idle events by session = %v, want one for chat 1", got)
	}
}

// TestTenantsAreSeparateSessions: the same project and session ids of two
// tenants are two sessions, each with its own idle event carrying its
// tenant; a default-tenant session keeps its key from before tenants.
func TestTenantsAreSeparateSessions(t *testing.T) {
	_, js, cl := setup(t)
	clk := &fakeClock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	d := newDetector(t, js, cl, clk, "replica-a")
	ctx := ctxT(t)
	must(t, d.Observe(ctx, "acme", "p", "s", clk.Now()))
	must(t, d.Observe(ctx, "globex", "p", "s", clk.Now()))
	must(t, d.Observe(ctx, "", "p", "s", clk.Now()))
	clk.Advance(31 * time.Minute)
	if n, err := d.Sweep(ctx); err != nil || n != 3 {
		t.Fatalf("sweep published %d (%v), want one per tenant's session", n, err)
	}
	byTenant := map[string]int{}
	for _, e := range idleEvents(t, js) {
		if e.ProjectID != "p" || e.SessionID != "s" {
			t.Fatalf("idle event for %s/%s", e.ProjectID, e.SessionID)
		}
		byTenant[e.TenantID]++
	}
	if byTenant["acme"] != 1 || byTenant["globex"] != 1 || byTenant[""] != 1 {
		t.Fatalf("idle events by tenant: %v", byTenant)
	}
	if idle.Key("", "p", "s") != "cA.cw" || idle.Key("acme", "p", "s") == idle.Key("globex", "p", "s") {
		t.Fatalf("keys: %q %q %q", idle.Key("", "p", "s"), idle.Key("acme", "p", "s"), idle.Key("globex", "p", "s"))
	}
	if idle.EventID("acme", "p", "s", clk.Now()) == idle.EventID("", "p", "s", clk.Now()) {
		t.Fatal("two tenants' sessions share an idle event id")
	}
}

// TestHandleReadsTheTenant: activity of an input event is its tenant's
// (the body's tenant_id); a body that does not decode is nobody's.
func TestHandleReadsTheTenant(t *testing.T) {
	_, js, cl := setup(t)
	clk := &fakeClock{now: time.Now()}
	d := newDetector(t, js, cl, clk, "replica-a")
	ctx := ctxT(t)
	ref := events.Ref{TenantID: "acme", ProjectID: "p", SessionID: "s", TurnID: "t1"}
	if _, err := cl.PublishTurnStarted(ctx, ref, events.TurnStarted{Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.OrderedConsumer(ctx, events.StreamIn, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	must(t, d.Handle(ctx, events.Subjects{}, m))
	kv, err := js.KeyValue(ctx, idle.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, idle.Key("acme", "p", "s")); err != nil {
		t.Fatalf("the tenant's session was not recorded: %v", err)
	}
	if _, err := kv.Get(ctx, idle.Key("", "p", "s")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the default tenant's session of the same ids was recorded: %v", err)
	}
}

// Issue 23: the detector reads the session from the body, and ignores an
// event whose subject names another project or session (or whose body does
// not decode): no activity is credited to either.
func TestActivityComesFromTheBody(t *testing.T) {
	_, js, cl := setup(t)
	clk := &fakeClock{now: time.Now()}
	d, err := idle.New(ctxT(t), js, cl, idle.Options{Quiet: quiet, Clock: clk, Sweep: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	cons, err := js.Consumer(ctx, events.StreamIn, idle.ConsumerName)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, cons, events.Subjects{}) }()

	forged, err := events.Encode(events.NewTurnStarted(events.Ref{ProjectID: "other", SessionID: "s1", TurnID: "t"}, events.TurnStarted{Text: "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		subj string
		data []byte
	}{
		{"engram.in.turn_started.%.victim.s1", forged},
		{"engram.in.turn_started.%.other.s2", forged},
		{"engram.in.turn_started.victim.other.s1", forged}, // another tenant's subject
		{"engram.in.turn_started.%.victim.s1", []byte("not json")},
	} {
		if _, err := js.Publish(ctx, m.subj, m.data); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.PublishTurnStarted(ctx, events.Ref{ProjectID: "acme/web", SessionID: "chat 1", TurnID: "t1"}, events.TurnStarted{Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Consumer >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer did not ack: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	clk.Advance(quiet + time.Minute)
	if _, err := d.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := countBySession(idleEvents(t, js))
	if len(got) != 1 || got["acme/web/chat 1"] != 1 {
		t.Fatalf("idle events %v, want only acme/web/chat 1 (none for the forged subjects)", got)
	}
}
