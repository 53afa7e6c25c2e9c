package events_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

// body is a valid turn_started with its head fields replaced by head (raw
// JSON members, "" for none) and its payload by payload.
func body(head, payload string) []byte {
	if payload == "" {
		payload = `{"text":"hi"}`
	}
	return []byte(`{"id":"01JD3Z8Q4W6V2K9T0M5R7XBC1A","type":"turn_started","version":1,` +
		`"occurred_at":"2026-11-29T19:30:00Z","project_id":"p","session_id":"s","turn_id":"t"` + head +
		`,"payload":` + payload + `}`)
}

// TestDecodeRefusesDuplicateKeys: a key twice in one object, at any level,
// or a key that encoding/json would take for a field of another spelling,
// is refused: a first-wins gateway would see another event than the
// workers (another tenant, another reply_to).
func TestDecodeRefusesDuplicateKeys(t *testing.T) {
	if _, err := events.Decode(body(`,"tenant_id":"a"`, "")); err != nil {
		t.Fatalf("the plain event: %v", err)
	}
	for name, data := range map[string][]byte{
		"tenant twice":             body(`,"tenant_id":"a","tenant_id":"b"`, ""),
		"project twice":            body(`,"project_id":"other"`, ""),
		"tenant escaped":           body(`,"tenant_id":"a","tenant\u005fid":"b"`, ""),
		"tenant in capitals":       body(`,"TENANT_ID":"b"`, ""),
		"tenant in mixed case":     body(`,"tenant_id":"a","Tenant_Id":"b"`, ""),
		"payload key twice":        body("", `{"text":"hi","reply_to":"_INBOX.a","reply_to":"_INBOX.b"}`),
		"payload key in capitals":  body("", `{"text":"hi","REPLY_TO":"_INBOX.b"}`),
		"payload kelvin-sign fold": body("", `{"text":"hi","\u212aind":"x"}`), // folds like "kind", a field name
		"nested key twice": []byte(`{"id":"x","type":"turn_ended","version":1,"occurred_at":"2026-11-29T19:30:00Z",` +
			`"project_id":"p","session_id":"s","turn_id":"t","payload":{"messages":[{"role":"user","content":"a","content":"b"}]}}`),
		"project_names key twice": body("", `{"text":"hi","project_names":{"a":"x","a":"y"}}`),
		"payload twice":           body("", `{"text":"hi"},"payload":{"text":"other"}`),
	} {
		_, err := events.Decode(data)
		if !errors.Is(err, events.ErrInvalidEvent) {
			t.Errorf("%s: Decode = %v, want refused", name, err)
		}
	}
	// The error names the key's path.
	_, err := events.Decode([]byte(`{"id":"x","type":"turn_ended","version":1,"occurred_at":"2026-11-29T19:30:00Z",` +
		`"project_id":"p","session_id":"s","turn_id":"t","payload":{"messages":[{"role":"user","content":"a"},{"role":"user","content":"a","CONTENT":"b"}]}}`))
	var fe *events.FieldError
	if !errors.As(err, &fe) || fe.Field != "payload.messages[1].CONTENT" {
		t.Errorf("the path of a case-variant key: %v", err)
	}
	many := `{"text":"hi","project_names":{`
	for i := range 100 {
		many += fmt.Sprintf(`"p%d":"x",`, i)
	}
	if _, err := events.Decode(body("", many+`"p7":"y"}}`)); !errors.Is(err, events.ErrInvalidEvent) {
		t.Errorf("a duplicate among 100 project names: %v", err)
	}
	if _, err := events.Decode(body("", many+`"p100":"y"}}`)); err != nil {
		t.Errorf("100 distinct project names: %v", err)
	}
	// Keys of a map are data: case variants are two projects.
	if _, err := events.Decode(body("", `{"text":"hi","project_names":{"Acme":"x","acme":"y","ID":"z"}}`)); err != nil {
		t.Errorf("project names differing in case: %v", err)
	}
	// Strings that look like keys are values.
	if _, err := events.Decode(body("", `{"text":"\"text\":\"x\", {\"text\":1}","paths":["text","text"]}`)); err != nil {
		t.Errorf("values that look like keys: %v", err)
	}
}

// TestDecodeRefusesControlCharactersInIDs: NUL, newline, DEL and C1
// controls in the tenant, project, session, turn and event ids.
func TestDecodeRefusesControlCharactersInIDs(t *testing.T) {
	for _, field := range []string{"tenant_id", "project_id", "session_id", "turn_id", "id"} {
		for _, c := range []string{`\u0000`, `\n`, `\t`, `\u007f`, `\u0085`, "\u009b"} {
			data := strings.Replace(string(body(`,"tenant_id":"acme"`, "")), `"`+field+`":"`, `"`+field+`":"x`+c, 1)
			_, err := events.Decode([]byte(data))
			var fe *events.FieldError
			if !errors.As(err, &fe) || fe.Field != field || !strings.Contains(fe.Reason, "control") {
				t.Errorf("%s with %s: %v", field, c, err)
			}
		}
	}
	// Encode refuses what Decode would.
	e := events.NewTurnStarted(events.Ref{TenantID: "a\x00b", ProjectID: "p", SessionID: "s", TurnID: "t"}, events.TurnStarted{Text: "x"})
	if _, err := events.Encode(e); !errors.Is(err, events.ErrInvalidEvent) {
		t.Errorf("Encode with a NUL in the tenant: %v", err)
	}
	// Other characters stay allowed.
	ok := events.NewTurnStarted(events.Ref{TenantID: "ténant 1/é", ProjectID: "acme/web 🙂", SessionID: "chat 42", TurnID: "t"}, events.TurnStarted{Text: "x"})
	if _, err := events.Encode(ok); err != nil {
		t.Errorf("printable ids: %v", err)
	}
}

// TestDecodeRefusesTimestampsOutOfRange: years 0001 and 9999, before 2000,
// or more than a day ahead, in occurred_at, reply_by and last_activity.
func TestDecodeRefusesTimestampsOutOfRange(t *testing.T) {
	ahead := time.Now().Add(events.MaxClockAhead + time.Hour).UTC().Format(time.RFC3339)
	soon := time.Now().Add(events.MaxClockAhead - time.Hour).UTC().Format(time.RFC3339)
	for _, ts := range []string{"0001-01-01T00:00:01Z", "9999-12-31T23:59:59Z", "1999-12-31T23:59:59Z", ahead} {
		for field, data := range map[string][]byte{
			"occurred_at":      []byte(strings.Replace(string(body("", "")), "2026-11-29T19:30:00Z", ts, 1)),
			"payload.reply_by": body("", `{"text":"hi","reply_by":"`+ts+`"}`),
			"payload.last_activity": []byte(`{"id":"x","type":"session_idle","version":1,"occurred_at":"2026-11-29T19:30:00Z",` +
				`"project_id":"p","session_id":"s","payload":{"last_activity":"` + ts + `"}}`),
		} {
			_, err := events.Decode(data)
			var fe *events.FieldError
			if !errors.As(err, &fe) || fe.Field != field {
				t.Errorf("%s %s: %v", field, ts, err)
			}
		}
	}
	for _, ts := range []string{"2000-01-01T00:00:00Z", soon} {
		if _, err := events.Decode([]byte(strings.Replace(string(body("", "")), "2026-11-29T19:30:00Z", ts, 1))); err != nil {
			t.Errorf("occurred_at %s: %v", ts, err)
		}
	}
}

// TestInputStreamAcceptsOnlyInputTypes: a publish to ENGRAM_IN's subject
// space that is not an input subject of the current form (an unknown type,
// an output type, too few or too many tokens, the form before tenants)
// gets an error and no sequence; nothing is stored to be dropped.
func TestInputStreamAcceptsOnlyInputTypes(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	js := eventstest.Setup(t, nc, eventstest.Topology())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	good := events.NewTurnStarted(events.Ref{ProjectID: "p", SessionID: "s", TurnID: "t"}, events.TurnStarted{Text: "x"})
	data, _ := events.Encode(good)
	for _, subj := range []string{
		"engram.in.bogus.%.p.s",
		"engram.in.injection_ready.%.p.s",
		"engram.in.memory_changed.%.p.s",
		"engram.in.turn_started.%.p",
		"engram.in.turn_started.%.p.s.x",
		"engram.in.turn_started.p.s", // the form before tenants
		"engram.in.x",
	} {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		ack, err := js.Publish(pctx, subj, data)
		pcancel()
		if err == nil {
			t.Errorf("publish to %s stored as sequence %d", subj, ack.Sequence)
		}
	}
	inMsgs(t, js, 0)
	if _, err := js.Publish(ctx, "engram.in.turn_started.%.p.s", data); err != nil {
		t.Fatalf("an input subject: %v", err)
	}
	inMsgs(t, js, 1)
}

// TestMigrateSubjectsLosesNothing: an ENGRAM_IN of a version before tenants
// (subjects <prefix>.in.>) holding events of the older form, partly
// consumed, is migrated at the next start: its subjects become the input
// types' with a tenant token, every event a consumer had not acked is still
// delivered to it (old and new form), what every consumer acked is gone,
// and an old-form event is taken as the default tenant's only when its
// body names no tenant.
func TestMigrateSubjectsLosesNothing(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topo := eventstest.Topology()
	// The layout before: interest retention already, subjects <prefix>.in.>.
	for _, sc := range topo.StreamConfigs() {
		if sc.Name == topo.In.Name {
			sc.Subjects = []string{"engram.in.>"}
		}
		if _, err := js.CreateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range topo.Consumers {
		if _, err := js.CreateConsumer(ctx, topo.In.Name, topo.JetStreamConsumerConfig(c)); err != nil {
			t.Fatal(err)
		}
	}
	// Six turn_ended of the older form: four of the default tenant, two
	// whose body names tenant acme (which the old subject cannot vouch for).
	var ids []string
	for i := range 6 {
		ref := events.Ref{ProjectID: "p", SessionID: "s", TurnID: string(rune('a' + i))}
		if i >= 4 {
			ref.TenantID = "acme"
		}
		e := events.NewTurnEnded(ref, events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: "hi"}}})
		data, _ := events.Encode(e)
		m := nats.NewMsg("engram.in.turn_ended.p.s")
		m.Data = data
		m.Header.Set(events.HeaderMsgID, e.ID)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	// The extractor and the transcript consumer consumed the first two;
	// the idle detector's consumer is not in this topology, so those two
	// alone hold them.
	drain := func(name string, n int) {
		t.Helper()
		c, err := js.Consumer(ctx, events.StreamIn, name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Fetch(n, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	drain(events.ConsumerTranscript, 2)
	cons, _ := js.Consumer(ctx, events.StreamIn, events.ConsumerExtractor)
	b, err := cons.Fetch(2, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range b.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	inMsgs(t, js, 4)

	if err := events.EnsureTopology(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	st, _ := js.Stream(ctx, events.StreamIn)
	info, _ := st.Info(ctx)
	if strings.Join(info.Config.Subjects, " ") != strings.Join(topo.Subjects().InStreams(), " ") {
		t.Fatalf("subjects not migrated: %v", info.Config.Subjects)
	}
	inMsgs(t, js, 4) // nothing lost by the migration
	// A new-form event after the migration.
	c, _ := events.NewClient(nc)
	if _, err := c.PublishTurnEnded(ctx, events.Ref{TenantID: "acme", ProjectID: "p", SessionID: "s", TurnID: "n"},
		events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: "new"}}}); err != nil {
		t.Fatal(err)
	}
	b, err = cons.Fetch(10, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	subjects := topo.Subjects()
	var got []string
	accepted, refused := 0, 0
	for m := range b.Messages() {
		e, err := events.Decode(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.ID)
		if err := subjects.Check(m.Subject(), e); err != nil {
			refused++
			if e.TenantID != "acme" || !strings.Contains(err.Error(), "tenant") {
				t.Errorf("event %s of tenant %q on %s refused: %v", e.ID, e.TenantID, m.Subject(), err)
			}
		} else {
			accepted++
		}
		_ = m.DoubleAck(ctx)
	}
	if len(got) != 5 || got[0] != ids[2] || got[3] != ids[5] {
		t.Fatalf("after migration the extractor got %v, want %v and the new event", got, ids[2:])
	}
	if accepted != 3 || refused != 2 {
		t.Fatalf("accepted %d (want 2 old of the default tenant + 1 new), refused %d (want the 2 old-form bodies of acme)", accepted, refused)
	}
	drain(events.ConsumerTranscript, 10)
	inMsgs(t, js, 0)
	// Idempotent.
	if err := events.EnsureTopology(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
}

// TestEnsureTopologyLeavesFrozenStreams: a frozen stream is created when
// missing, never updated (no request is made: the setup role may not),
// and the difference is reported.
func TestEnsureTopologyLeavesFrozenStreams(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	js := eventstest.Setup(t, nc, eventstest.Topology())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topo := eventstest.Topology()
	topo.DLQ.MaxBytes = 8 << 20
	done, err := events.EnsureTopologyWith(ctx, js, topo, events.EnsureOptions{Frozen: []string{events.StreamDLQ}})
	if err != nil {
		t.Fatal(err)
	}
	if len(done.NotApplied) != 1 || !strings.Contains(done.NotApplied[0], "max bytes 16777216 -> 8388608") {
		t.Fatalf("not applied: %q", done.NotApplied)
	}
	st, _ := js.Stream(ctx, events.StreamDLQ)
	if got := st.CachedInfo().Config.MaxBytes; got != 16<<20 {
		t.Fatalf("frozen DLQ updated to max bytes %d", got)
	}
	if _, err := events.EnsureTopologyWith(ctx, js, topo, events.EnsureOptions{}); err != nil {
		t.Fatal(err)
	}
	st, _ = js.Stream(ctx, events.StreamDLQ)
	if got := st.CachedInfo().Config.MaxBytes; got != 8<<20 {
		t.Fatalf("DLQ max bytes %d after an unfrozen ensure", got)
	}
}

// TestContextRefusesControlCharacters: a context request for ids no event
// may have (a NUL, a newline) is answered with an error, not looked up.
func TestContextRefusesControlCharacters(t *testing.T) {
	_, nc := eventstest.RunServer(t)
	eventstest.Setup(t, nc, eventstest.Topology())
	c, _ := events.NewClient(nc, events.WithContextTimeout(5*time.Second))
	var called atomic.Int32
	svc, err := c.ServeContext(func(context.Context, events.Ref, events.ContextRequest) (events.ContextReply, error) {
		called.Add(1)
		return events.ContextReply{Summary: "s"}, nil
	}, 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Stop() }()
	for _, ref := range []events.Ref{{ProjectID: "p\x00x", SessionID: "s"}, {ProjectID: "p", SessionID: "s\nforged"}, {TenantID: "t\x7f", ProjectID: "p", SessionID: "s"}} {
		if _, err := c.Context(context.Background(), ref); !errors.Is(err, events.ErrContextUnavailable) || !strings.Contains(err.Error(), "control") {
			t.Errorf("context of %+v: %v", ref, err)
		}
	}
	if _, err := c.Context(context.Background(), events.Ref{ProjectID: "p", SessionID: "s"}); err != nil || called.Load() != 1 {
		t.Fatalf("a plain request: %v (fn called %d times)", err, called.Load())
	}
}
