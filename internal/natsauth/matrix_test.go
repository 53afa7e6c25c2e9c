package natsauth_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/internal/natsembed"
	"github.com/engram-memory/engram/pkg/events"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// StartConfigured starts an embedded server configured with
// deploy/nats/accounts.conf, every role's password set in the environment
// as the file expects; it returns the server and the passwords.
func startConfigured(t *testing.T) (*natsembed.Server, map[string]string) {
	t.Helper()
	pw := map[string]string{}
	for _, r := range natsauth.Roles() {
		pw[r] = "pw-of-" + r
		t.Setenv(natsauth.PasswordEnv(r), pw[r])
	}
	srv, err := natsembed.Start(natsembed.Options{ConfigFile: accountsConf, StoreDir: filepath.Join(t.TempDir(), "nats"), Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv, pw
}

func connectAs(t *testing.T, url, role, password string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.UserInfo(role, password), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}, opts...)...)
	if err != nil {
		t.Fatalf("connect as %s: %v", role, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

type probe struct {
	op      string // pub | sub
	subject string
	allowed []string // roles allowed besides admin
}

// workers is every role that runs as a worker process (each reads the
// stream infos for readiness and lag).
var workers = []string{"injector", "extractor", "consolidator", "compactor", "idle"}

// matrix is the intended permission set, written out independently of
// natsauth.For: the test checks the server configured with the shipped
// file against it.
var matrix = []probe{
	{"pub", "engram.in.turn_started.%.p.s", []string{"platform"}},
	{"pub", "engram.in.turn_ended.%.p.s", []string{"platform"}},
	{"pub", "engram.in.session_idle.%.p.s", []string{"platform", "idle"}},
	{"pub", "engram.in.session_idle.acme.p.s", []string{"idle"}}, // another tenant's: not the default platform
	{"pub", "engram.in.turn_started.acme.p.s", nil},
	{"pub", "engram.in.turn_started.p.s", nil}, // the form before tenants
	{"pub", "engram.api.context.%.p.s", []string{"platform"}},
	{"pub", "engram.api.context.acme.p.s", nil},
	{"pub", "engram.out.injection_ready.%.p.s", []string{"injector"}},
	{"pub", "engram.out.memory_changed.%.p", []string{"extractor", "consolidator"}},
	{"pub", "engram.out.consolidation_done.%.p.s", []string{"consolidator"}},
	{"pub", "engram.out.compaction_done.%.p.s", []string{"compactor"}},
	{"pub", "engram.dlq.injector", []string{"injector"}},
	{"pub", "engram.dlq.extractor", []string{"extractor"}},
	{"pub", "engram.dlq.transcript", []string{"extractor"}},
	{"pub", "_INBOX.someone", []string{"injector"}},
	{"pub", "_INBOX_TENANT.acme.someone", []string{"injector"}},
	{"pub", "_INBOX_ENGRAM.extractor.x", nil},
	{"pub", "$KV.ENGRAM_ACTIVITY.p.s", []string{"idle"}},
	{"sub", "_INBOX.>", []string{"platform"}},
	{"sub", "_INBOX_TENANT.>", nil},
	{"sub", "_INBOX_TENANT.acme.>", nil},
	{"sub", "_INBOX_ENGRAM.setup.>", []string{"setup"}},
	{"sub", "_INBOX_ENGRAM.injector.>", []string{"injector"}},
	{"sub", "_INBOX_ENGRAM.extractor.>", []string{"extractor"}},
	{"sub", "engram.in.>", nil},
	// The outputs reader: every output as it is published, nothing else.
	{"sub", "engram.out.>", []string{"outputs"}},
	{"sub", "engram.out.injection_ready.victim.*", []string{"outputs"}},
	{"sub", "_INBOX_ENGRAM.outputs.>", []string{"outputs"}},
	{"sub", "_INBOX_ENGRAM.outputs", nil},
	{"sub", "engram.dlq.>", nil},
	{"sub", "engram.api.context.*.*.*", []string{"compactor"}},
	{"sub", "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ENGRAM_IN.extractor", nil},
	{"sub", "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ENGRAM_IN.transcript", nil},
	{"sub", "$KV.ENGRAM_ACTIVITY.>", nil},
	{"pub", "$SYS.REQ.USER.INFO", append([]string{"setup", "outputs"}, workers...)},
	{"pub", "$JS.API.INFO", append([]string{"setup"}, workers...)},
	{"pub", "$JS.API.STREAM.INFO.ENGRAM_IN", append([]string{"setup"}, workers...)},
	{"pub", "$JS.API.STREAM.CREATE.ENGRAM_IN", []string{"setup"}},
	{"pub", "$JS.API.STREAM.UPDATE.ENGRAM_IN", []string{"setup"}},
	{"pub", "$JS.API.STREAM.CREATE.ENGRAM_DLQ", []string{"setup"}},
	// Shrinking the DLQ's limits would delete its letters: admin only.
	{"pub", "$JS.API.STREAM.UPDATE.ENGRAM_DLQ", nil},
	{"pub", "$JS.API.CONSUMER.CREATE.ENGRAM_IN.injector.engram.in.turn_started.>", []string{"setup"}},
	{"pub", "$JS.API.CONSUMER.CREATE.ENGRAM_IN.spy.engram.in.>", nil},
	{"pub", "$JS.API.CONSUMER.DURABLE.CREATE.ENGRAM_IN.spy", nil},
	{"pub", "$JS.API.CONSUMER.INFO.ENGRAM_IN.injector", []string{"setup", "injector"}},
	{"pub", "$JS.API.CONSUMER.MSG.NEXT.ENGRAM_IN.injector", []string{"injector"}},
	{"pub", "$JS.API.CONSUMER.MSG.NEXT.ENGRAM_IN.extractor", []string{"extractor"}},
	// The transcript consumer: the extractor role runs it too.
	{"pub", "$JS.API.CONSUMER.MSG.NEXT.ENGRAM_IN.transcript", []string{"extractor"}},
	{"pub", "$JS.ACK.ENGRAM_IN.transcript.1.5.5.1700000000000000000.0", []string{"extractor"}},
	{"pub", "$JS.API.CONSUMER.MSG.NEXT.ENGRAM_IN.idle", []string{"idle"}},
	{"pub", "$JS.ACK.ENGRAM_IN.consolidator.1.5.5.1700000000000000000.0", []string{"consolidator"}},
	{"pub", "$JS.ACK.ENGRAM_IN.compactor.1.5.5.1700000000000000000.0", []string{"compactor"}},
	// No worker reads ENGRAM_IN by sequence: only through its consumer,
	// and the consolidator and compactor the last event of a subject.
	{"pub", "$JS.API.STREAM.MSG.GET.ENGRAM_IN", nil},
	{"pub", "$JS.API.DIRECT.GET.ENGRAM_IN", nil},
	{"pub", "$JS.API.DIRECT.GET.ENGRAM_IN.engram.in.turn_started.%.p.s", []string{"consolidator"}},
	{"pub", "$JS.API.DIRECT.GET.ENGRAM_IN.engram.in.turn_ended.%.p.s", []string{"consolidator", "compactor"}},
	{"pub", "$JS.API.DIRECT.GET.ENGRAM_IN.engram.in.tokens_reported.%.p.s", nil},
	// Who waits for what (events.ExtractorLag): the consolidator for the
	// extraction, the compactor for the stored transcript.
	{"pub", "$JS.API.CONSUMER.INFO.ENGRAM_IN.extractor", []string{"setup", "extractor", "consolidator"}},
	{"pub", "$JS.API.CONSUMER.INFO.ENGRAM_IN.transcript", []string{"setup", "extractor", "compactor"}},
	{"pub", "$JS.API.STREAM.CREATE.KV_ENGRAM_ACTIVITY", []string{"setup", "idle"}},
	// The legacy ephemeral create: nats.go re-creates a KV watcher's
	// ordered consumer there after a reconnect (the chaos suite's NATS
	// restart found it denied).
	{"pub", "$JS.API.CONSUMER.CREATE.KV_ENGRAM_ACTIVITY", []string{"idle"}},
	{"pub", "$JS.API.CONSUMER.CREATE.ENGRAM_IN", nil},
	{"pub", "$JS.API.STREAM.MSG.GET.ENGRAM_OUT", nil},
	{"pub", "$JS.API.DIRECT.GET.ENGRAM_OUT.engram.out.injection_ready.victim.s", nil},
	{"pub", "$JS.API.CONSUMER.CREATE.ENGRAM_OUT.spy", nil},
	// No JetStream request for the outputs reader either: a consumer it
	// made could deliver anywhere (nats-server#8274).
	{"pub", "$JS.API.STREAM.INFO.ENGRAM_OUT", append([]string{"setup"}, workers...)},
	{"pub", "$JS.API.CONSUMER.CREATE.ENGRAM_OUT.r_1.engram.out.>", nil},
	{"pub", "$JS.API.CONSUMER.MSG.NEXT.ENGRAM_OUT.r_1", nil},
	{"pub", "$JS.API.DIRECT.GET.ENGRAM_OUT", nil},
	{"pub", "$JS.API.STREAM.MSG.GET.ENGRAM_DLQ", nil},
	{"pub", "$JS.API.STREAM.PURGE.ENGRAM_IN", nil},
	{"pub", "$JS.API.CONSUMER.DELETE.ENGRAM_IN.extractor", nil},
	{"pub", "$JS.API.STREAM.DELETE.ENGRAM_DLQ", nil},
	// Erasure (internal/erase): the request subject and the secure
	// delete of a message are the admin's only.
	{"pub", "engram.admin.erase", nil},
	{"sub", "engram.admin.erase", nil},
	{"sub", "engram.admin.>", nil},
	{"pub", "$JS.API.STREAM.MSG.DELETE.ENGRAM_IN", nil},
	{"pub", "$JS.API.STREAM.MSG.DELETE.ENGRAM_DLQ", nil},
}

// TestPermissionMatrix connects as each role of deploy/nats/accounts.conf
// and tries each subject: a publish or subscribe is allowed when the
// server answers it without a permissions violation. Run with -v for the
// matrix.
func TestPermissionMatrix(t *testing.T) {
	srv, pw := startConfigured(t)
	roles := natsauth.Roles()
	// Admin last: some probes (delete the DLQ) really do what they say.
	roles = append(slices.DeleteFunc(slices.Clone(roles), func(r string) bool { return r == "admin" }), "admin")
	got := map[string]map[string]bool{}
	for _, role := range roles {
		got[role] = map[string]bool{}
		for _, p := range matrix {
			ok := try(t, srv.ClientURL(), role, pw[role], p)
			got[role][p.op+" "+p.subject] = ok
			want := role == "admin" || slices.Contains(p.allowed, role)
			if ok != want {
				t.Errorf("%s: %s %s: allowed=%v, want %v", role, p.op, p.subject, ok, want)
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| %s |", "subject")
	for _, r := range roles {
		fmt.Fprintf(&b, " %s |", r)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(roles)) + "\n")
	for _, p := range matrix {
		fmt.Fprintf(&b, "| %s `%s` |", p.op, p.subject)
		for _, r := range roles {
			if got[r][p.op+" "+p.subject] {
				b.WriteString(" allowed |")
			} else {
				b.WriteString(" denied |")
			}
		}
		b.WriteString("\n")
	}
	t.Logf("permission matrix (deploy/nats/accounts.conf, as tested):\n%s", b.String())
}

// try reports whether role may do p: a fresh connection, the operation,
// a flush (the server answers a violation before the PONG) and the
// connection's last error.
func try(t *testing.T, url, role, password string, p probe) bool {
	t.Helper()
	nc, err := nats.Connect(url, nats.UserInfo(role, password), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatalf("connect as %s: %v", role, err)
	}
	defer nc.Close()
	switch p.op {
	case "pub":
		err = nc.PublishMsg(&nats.Msg{Subject: p.subject, Reply: "_INBOX.probe", Data: []byte("{}")})
	case "sub":
		_, err = nc.SubscribeSync(p.subject)
	}
	if err != nil {
		t.Fatalf("%s %s %s: %v", role, p.op, p.subject, err)
	}
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		t.Fatalf("%s flush: %v", role, err)
	}
	err = nc.LastError()
	if err != nil && !errors.Is(err, nats.ErrPermissionViolation) {
		t.Fatalf("%s %s %s: %v", role, p.op, p.subject, err)
	}
	return err == nil
}

// TestAnonymousRefused: the file's server takes no anonymous client.
func TestAnonymousRefused(t *testing.T) {
	srv, _ := startConfigured(t)
	if nc, err := nats.Connect(srv.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected")
	}
	if nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("platform", "wrong")); err == nil {
		nc.Close()
		t.Fatal("a wrong password connected")
	}
}

// TestSetupRoleCreatesTopology: engram setup's work (streams, consumers)
// with the setup user's permissions, then Verify of each worker role with
// its own user passes, and with another role's user fails naming what it
// lacks.
func TestSetupRoleCreatesTopologyAndVerify(t *testing.T) {
	srv, pw := startConfigured(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	setup := connectAs(t, srv.ClientURL(), "setup", pw["setup"], nats.CustomInboxPrefix(natsauth.InboxPrefix("setup")))
	js, err := jetstream.New(setup)
	if err != nil {
		t.Fatal(err)
	}
	topo := events.DefaultTopology()
	if err := events.EnsureTopology(ctx, js, topo); err != nil {
		t.Fatalf("setup role: %v", err)
	}
	if err := events.EnsureTopology(ctx, js, topo); err != nil { // and again: update
		t.Fatalf("setup role, second run: %v", err)
	}
	for _, role := range workers {
		nc := connectAs(t, srv.ClientURL(), role, pw[role], nats.CustomInboxPrefix(natsauth.InboxPrefix(role)))
		need := natsauth.Need{Roles: []string{role}, Inbox: natsauth.InboxPrefix(role)}
		g, err := natsauth.Verify(ctx, nc, need)
		if err != nil {
			t.Errorf("%s: %v", role, err)
		}
		if g.User != role {
			t.Errorf("%s: server says user %q", role, g.User)
		}
	}
	// The extractor's user running the injector.
	// The extractor's user running the injector: first its inbox, then,
	// with the extractor's inbox, everything else it lacks.
	nc := connectAs(t, srv.ClientURL(), "extractor", pw["extractor"], nats.CustomInboxPrefix(natsauth.InboxPrefix("injector")))
	t0 := time.Now()
	_, err = natsauth.Verify(ctx, nc, natsauth.Need{Roles: []string{"injector"}, Inbox: natsauth.InboxPrefix("injector")})
	if !errors.Is(err, natsauth.ErrDenied) || !strings.Contains(err.Error(), "subscribe _INBOX_ENGRAM.injector.>") {
		t.Fatalf("extractor user with the injector's inbox: err = %v, want ErrDenied naming the inbox", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("took %s to fail", d)
	}
	t.Logf("a worker whose user may not use its inbox fails at once with:\n%v", err)
	nc = connectAs(t, srv.ClientURL(), "extractor", pw["extractor"], nats.CustomInboxPrefix(natsauth.InboxPrefix("extractor")))
	_, err = natsauth.Verify(ctx, nc, natsauth.Need{Roles: []string{"injector"}, Inbox: natsauth.InboxPrefix("extractor")})
	if !errors.Is(err, natsauth.ErrDenied) {
		t.Fatalf("extractor user as injector: err = %v, want ErrDenied", err)
	}
	for _, want := range []string{"$JS.API.CONSUMER.MSG.NEXT.ENGRAM_IN.injector", "engram.out.injection_ready.>", "_INBOX_TENANT.>"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s:\n%v", want, err)
		}
	}
	t.Logf("a worker started with the wrong user fails with:\n%v", err)
}

// TestSetupRoleCannotShrinkTheDLQ: the setup role may create ENGRAM_DLQ
// but not update it: new limits (one message, one second) would make the
// server delete the dead letters. An admin applies a change of the DLQ's
// limits; engram setup as setup reports it as not applied.
func TestSetupRoleCannotShrinkTheDLQ(t *testing.T) {
	srv, pw := startConfigured(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	setup := connectAs(t, srv.ClientURL(), "setup", pw["setup"], nats.CustomInboxPrefix(natsauth.InboxPrefix("setup")))
	js, err := jetstream.New(setup)
	if err != nil {
		t.Fatal(err)
	}
	topo := events.DefaultTopology()
	if err := events.EnsureTopology(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	admin := connectAs(t, srv.ClientURL(), "admin", pw["admin"])
	ajs, _ := jetstream.New(admin)
	for i := range 5 {
		if _, err := ajs.Publish(ctx, "engram.dlq.extractor", []byte(fmt.Sprintf("letter %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := ajs.Stream(ctx, events.StreamDLQ)
	cfg := st.CachedInfo().Config
	for name, shrink := range map[string]func(c *jetstream.StreamConfig){
		"max messages 1": func(c *jetstream.StreamConfig) { c.MaxMsgs = 1 },
		"max age 1s":     func(c *jetstream.StreamConfig) { c.MaxAge = time.Second; c.Duplicates = time.Second },
		"max bytes 1":    func(c *jetstream.StreamConfig) { c.MaxBytes = 1; c.Discard = jetstream.DiscardOld },
	} {
		c := cfg
		shrink(&c)
		uctx, ucancel := context.WithTimeout(ctx, time.Second)
		_, err := js.UpdateStream(uctx, c)
		ucancel()
		if err == nil {
			t.Errorf("the setup role updated ENGRAM_DLQ to %s", name)
		}
	}
	info, err := st.Info(ctx)
	if err != nil || info.State.Msgs != 5 || info.Config.MaxMsgs != -1 {
		t.Fatalf("ENGRAM_DLQ after the attempts: %d letters, max messages %d (%v); want 5 and unlimited", info.State.Msgs, info.Config.MaxMsgs, err)
	}
	// A real change of the DLQ's limits waits for an admin.
	bigger := topo
	bigger.DLQ.MaxBytes *= 2
	done, err := events.EnsureTopologyWith(ctx, js, bigger, events.EnsureOptions{Frozen: []string{events.StreamDLQ}})
	if err != nil || len(done.NotApplied) != 1 {
		t.Fatalf("setup with new DLQ limits: %v %q", err, done.NotApplied)
	}
	if _, err := events.EnsureTopologyWith(ctx, ajs, bigger, events.EnsureOptions{}); err != nil {
		t.Fatalf("admin: %v", err)
	}
}
