package app_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/fx"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/compact/compactfx"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/consolidate/consolidatefx"
	"github.com/engram-memory/engram/internal/extract/extractfx"
	"github.com/engram-memory/engram/internal/inject/injectfx"
	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/internal/natsembed"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

// accountsConf is the shipped NATS configuration of the role users.
var accountsConf = filepath.Join("..", "..", "deploy", "nats", "accounts.conf")

// externalNATS starts a server configured with deploy/nats/accounts.conf
// (the role passwords in the environment) and returns it with the
// passwords.
func externalNATS(t *testing.T) (*natsembed.Server, map[string]string) {
	t.Helper()
	pw := map[string]string{}
	for _, r := range natsauth.Roles() {
		pw[r] = "secret-" + r + "-1234"
		t.Setenv(natsauth.PasswordEnv(r), pw[r])
	}
	srv, err := natsembed.Start(natsembed.Options{ConfigFile: accountsConf, StoreDir: filepath.Join(t.TempDir(), "nats"), Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv, pw
}

// roleConfig is a worker process's configuration against url as role.
func roleConfig(t *testing.T, url, role, password string) config.Config {
	cfg := testConfig(t)
	cfg.NATS.URL = url
	cfg.NATS.User, cfg.NATS.Password = role, password
	cfg.HTTP.Addr = "127.0.0.1:0" // lag gauges and readiness run too
	cfg.HTTP.LagRefresh = 100 * time.Millisecond
	cfg.Idle.Enabled = false
	cfg.Work.Workers = []string{role}
	return cfg
}

var workerModules = map[string]fx.Option{
	events.ConsumerInjector:     injectfx.Module(),
	events.ConsumerExtractor:    extractfx.Module(),
	events.ConsumerConsolidator: consolidatefx.Module(),
	events.ConsumerCompactor:    compactfx.Module(),
}

// TestWorkersRunWithTheirRoleUsers runs engram setup's work as the setup
// user, each worker with its own user of deploy/nats/accounts.conf and the
// idle detector (serve -workers none) as idle, against one server; a
// platform user gets its injection and its context answered; no
// connection saw a permission violation.
func TestWorkersRunWithTheirRoleUsers(t *testing.T) {
	srv, pw := externalNATS(t)
	models := llmtest.New(t) // the model gates open: the workers pull
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	setupCfg := roleConfig(t, srv.ClientURL(), natsauth.RoleSetup, pw[natsauth.RoleSetup])
	setupCfg.Idle.Enabled = true // its consumer too
	auth, _, err := app.ConnectOptions(setupCfg, natsauth.RoleSetup)
	if err != nil {
		t.Fatal(err)
	}
	// The setup role receives its replies on its own inbox (as engram
	// setup connects).
	snc, err := nats.Connect(srv.ClientURL(), append(auth, nats.CustomInboxPrefix(natsauth.InboxPrefix(natsauth.RoleSetup)))...)
	if err != nil {
		t.Fatal(err)
	}
	defer snc.Close()
	sjs, _ := jetstream.New(snc)
	if _, err := app.EnsureTopology(ctx, sjs, setupCfg); err != nil {
		t.Fatalf("setup as the setup user: %v", err)
	}

	var procs []*app.Process
	defer func() {
		for _, p := range procs {
			_ = p.Stop(context.Background())
		}
	}()
	for role, mod := range workerModules {
		cfg := roleConfig(t, srv.ClientURL(), role, pw[role])
		cfg.LLM = models.Config()
		p, err := app.Start(ctx, cfg, false, "engram-"+role, mod)
		if err != nil {
			t.Fatalf("%s with its own user: %v", role, err)
		}
		procs = append(procs, p)
		if p.Bus.Role != role || p.Bus.Granted.User != role {
			t.Errorf("%s: bus role %q, server user %q", role, p.Bus.Role, p.Bus.Granted.User)
		}
	}
	idleCfg := roleConfig(t, srv.ClientURL(), natsauth.RoleIdle, pw[natsauth.RoleIdle])
	idleCfg.Work.Workers = []string{"none"}
	idleCfg.Idle.Enabled, idleCfg.Idle.Quiet, idleCfg.Idle.Sweep = true, time.Second, 200*time.Millisecond
	ip, err := app.Start(ctx, idleCfg, true, "engram-serve")
	if err != nil {
		t.Fatalf("idle detector with the idle user: %v", err)
	}
	procs = append(procs, ip)

	// A platform: its injection and context answered, its session goes
	// idle (the idle user publishes session_idle, the consolidator takes it).
	pnc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(natsauth.RolePlatform, pw[natsauth.RolePlatform]))
	if err != nil {
		t.Fatal(err)
	}
	defer pnc.Close()
	cl, err := events.NewClient(pnc)
	if err != nil {
		t.Fatal(err)
	}
	ref := events.Ref{ProjectID: "acme", SessionID: "s1", TurnID: "t1"}
	if _, err := cl.Inject(ctx, ref, events.TurnStarted{Text: "how do deploys run?"}); err != nil {
		t.Fatalf("platform: inject: %v", err)
	}
	if _, err := cl.Context(ctx, events.Ref{ProjectID: "acme", SessionID: "s1"}); err != nil {
		t.Fatalf("platform: context: %v", err)
	}
	if _, err := cl.PublishTurnEnded(ctx, ref, events.TurnEnded{Messages: []events.Message{{Role: "user", Content: "how do deploys run?"}, {Role: "assistant", Content: "with make deploy"}}}); err != nil {
		t.Fatalf("platform: turn_ended: %v", err)
	}
	waitIdle := time.Now().Add(time.Minute)
	for {
		ci, err := consumerInfo(ctx, sjs, events.ConsumerConsolidator)
		if err == nil && ci.Delivered.Consumer >= 1 {
			break
		}
		if time.Now().After(waitIdle) {
			t.Fatalf("no session_idle reached the consolidator: %v %+v", err, ci)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // a few lag refreshes
	for _, p := range procs {
		if err := p.Bus.Conn.LastError(); err != nil {
			t.Errorf("%s: %v", p.Bus.Role, err)
		}
	}
	if err := pnc.LastError(); err != nil {
		t.Errorf("platform: %v", err)
	}
}

func consumerInfo(ctx context.Context, js jetstream.JetStream, name string) (*jetstream.ConsumerInfo, error) {
	c, err := js.Consumer(ctx, events.StreamIn, name)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// TestWorkerDeniedFailsAtStart: the injector started with the extractor's
// user does not start; its error names what it may not do.
func TestWorkerDeniedFailsAtStart(t *testing.T) {
	srv, pw := externalNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := roleConfig(t, srv.ClientURL(), natsauth.RoleExtractor, pw[natsauth.RoleExtractor])
	cfg.Work.Workers = []string{events.ConsumerInjector}
	t0 := time.Now()
	p, err := app.Start(ctx, cfg, false, "engram-injector", injectfx.Module())
	if err == nil {
		_ = p.Stop(ctx)
		t.Fatal("the injector started with the extractor's user")
	}
	if !errors.Is(err, natsauth.ErrDenied) || !strings.Contains(err.Error(), "_INBOX_ENGRAM.injector") {
		t.Fatalf("err = %v, want ErrDenied naming the subject", err)
	}
	t.Logf("failed after %s: %v", time.Since(t0).Round(time.Millisecond), err)
	if strings.Contains(err.Error(), pw[natsauth.RoleExtractor]) {
		t.Fatal("the error shows the password")
	}
}

// TestWorkerWithoutTopologyFailsAtStart: a least-privilege worker does not
// create the streams; it says to run engram setup.
func TestWorkerWithoutTopologyFailsAtStart(t *testing.T) {
	srv, pw := externalNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := roleConfig(t, srv.ClientURL(), natsauth.RoleCompactor, pw[natsauth.RoleCompactor])
	p, err := app.Start(ctx, cfg, false, "engram-compactor", compactfx.Module())
	if err == nil {
		_ = p.Stop(ctx)
		t.Fatal("the compactor started without streams")
	}
	if !strings.Contains(err.Error(), "engram setup") {
		t.Fatalf("err = %v, want a hint to run engram setup", err)
	}
}
