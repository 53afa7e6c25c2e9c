package app_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/fx"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/internal/natsembed"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// startServe starts what `engram serve` starts (embedded NATS, store,
// topology, idle detector) with a compactor that acks everything.
func startServe(t *testing.T, cfg config.Config) *app.Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	worker := app.ProvideWorker(func() app.Worker {
		return app.Worker{Role: events.ConsumerCompactor, Handler: func(context.Context, events.Envelope) error { return nil }}
	})
	p, err := app.Start(ctx, cfg, true, "engram-serve", worker, fx.Invoke(func(memory.Store) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	return p
}

// TestServeRefusesAnonymousAndLimitsPlatforms is the attacker on
// the same machine against serve's embedded NATS: an anonymous client
// cannot connect; a platform's user cannot delete ENGRAM_DLQ or a
// consumer, nor read ENGRAM_OUT (other projects' memory blocks) or the
// workers' traffic.
func TestServeRefusesAnonymousAndLimitsPlatforms(t *testing.T) {
	cfg := testConfig(t)
	p := startServe(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if nc, err := nats.Connect(p.Bus.URL); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected to serve's NATS")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("anonymous: %v, want an authorization violation", err)
	}

	creds, err := natsauth.LoadCredentials(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	// Something in ENGRAM_OUT for another project, published by serve.
	if err := p.Bus.Conn.Publish("engram.out.memory_changed.victim", []byte(`{"secret":"victim's block"}`)); err != nil {
		t.Fatal(err)
	}
	pnc, err := nats.Connect(p.Bus.URL, nats.UserInfo(natsauth.RolePlatform, creds.Users[natsauth.RolePlatform]),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatalf("platform: %v", err)
	}
	defer pnc.Close()
	js, _ := jetstream.New(pnc)
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 2*time.Second) }

	c1, done := short()
	err = js.DeleteStream(c1, events.StreamDLQ)
	done()
	if err == nil {
		t.Error("platform deleted ENGRAM_DLQ")
	}
	c2, done := short()
	err = js.DeleteConsumer(c2, events.StreamIn, events.ConsumerExtractor)
	done()
	if err == nil {
		t.Error("platform deleted the extractor's consumer")
	}
	c3, done := short()
	_, err = js.OrderedConsumer(c3, events.StreamOut, jetstream.OrderedConsumerConfig{})
	done()
	if err == nil {
		t.Error("platform made a consumer on ENGRAM_OUT")
	}
	// Direct reads of ENGRAM_OUT: the request is refused, no answer comes.
	if m, err := pnc.Request("$JS.API.DIRECT.GET."+events.StreamOut, []byte(`{"last_by_subj":"engram.out.memory_changed.victim"}`), time.Second); err == nil {
		t.Errorf("platform read ENGRAM_OUT directly: %s", m.Data)
	}
	for _, subj := range []string{"engram.out.>", "engram.in.>", natsauth.InboxPrefix("serve") + ".>", "$JS.EVENT.>"} {
		nc, err := nats.Connect(p.Bus.URL, nats.UserInfo(natsauth.RolePlatform, creds.Users[natsauth.RolePlatform]),
			nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = nc.SubscribeSync(subj)
		_ = nc.Flush()
		if err := nc.LastError(); !errors.Is(err, nats.ErrPermissionViolation) {
			t.Errorf("platform subscribed to %s (last error %v)", subj, err)
		}
		nc.Close()
	}

	// Still there, as the admin sees.
	ajs := p.Bus.JS
	if _, err := ajs.Stream(ctx, events.StreamDLQ); err != nil {
		t.Errorf("ENGRAM_DLQ after the platform's attempt: %v", err)
	}
	if _, err := ajs.Consumer(ctx, events.StreamIn, events.ConsumerExtractor); err != nil {
		t.Errorf("extractor consumer after the platform's attempt: %v", err)
	}
	// What a platform may do, it can: publish an event.
	cl, err := events.NewClient(pnc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.PublishTokensReported(ctx, events.Ref{ProjectID: "acme", SessionID: "s"}, events.TokensReported{InputTokens: 1}); err != nil {
		t.Fatalf("platform publish: %v", err)
	}
}

// TestServeInsecureAcceptsAnonymous: -insecure turns authentication off.
func TestServeInsecureAcceptsAnonymous(t *testing.T) {
	cfg := testConfig(t)
	cfg.NATS.Insecure = true
	p := startServe(t, cfg)
	nc, err := nats.Connect(p.Bus.URL)
	if err != nil {
		t.Fatalf("insecure serve refused an anonymous client: %v", err)
	}
	nc.Close()
	if _, err := os.Stat(natsauth.CredentialsPath(cfg.DataDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("insecure serve wrote credentials: %v", err)
	}
}

// TestDataDirIsPrivate: the data dir 0700, its files 0600 (credentials,
// store key, SQLite database and its companions), also when an older
// serve left them open.
func TestDataDirIsPrivate(t *testing.T) {
	cfg := testConfig(t)
	// An existing data dir and database of an older version, world-readable.
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfg.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, cfg)
	_ = p.Stop(context.Background())
	check := func() {
		t.Helper()
		st, err := os.Stat(cfg.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o700 {
			t.Errorf("data dir mode %o, want 700", st.Mode().Perm())
		}
		entries, err := os.ReadDir(cfg.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			seen[e.Name()] = true
			if e.IsDir() {
				if info.Mode().Perm()&0o077 != 0 {
					t.Errorf("%s/ mode %o, want no group or other access", e.Name(), info.Mode().Perm())
				}
				continue
			}
			if info.Mode().Perm() != 0o600 {
				t.Errorf("%s mode %o, want 600", e.Name(), info.Mode().Perm())
			}
		}
		for _, want := range []string{natsauth.CredentialsFile, "engram.db"} {
			if !seen[want] {
				t.Errorf("no %s in the data dir (%v)", want, seen)
			}
		}
		// The store key is not beside the store it encrypts.
		if seen[natsauth.StoreKeyFile] {
			t.Errorf("the NATS store key is in the data dir")
		}
	}
	check()
	// Loosened by hand, tightened at the next start.
	for _, f := range []string{"engram.db", natsauth.CredentialsFile} {
		if err := os.Chmod(filepath.Join(cfg.DataDir, f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(cfg.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	p = startServe(t, cfg)
	_ = p.Stop(context.Background())
	check()
}

// TestStoreIsEncrypted: a secret published to serve's NATS is not in the
// raw files of the data dir's JetStream store; it still reads back after a
// restart (the key is in the key dir, outside the data dir). A plaintext store of an older
// version is converted at the first start with a key, its messages kept.
func TestStoreIsEncrypted(t *testing.T) {
	const secret = "sk-live-THIS-IS-A-SECRET-4242424242"
	cfg := testConfig(t)

	// An older serve's plaintext store, with a secret in ENGRAM_IN.
	old, err := natsembed.Start(natsembed.Options{StoreDir: cfg.NATSStoreDir(), Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	onc, err := nats.Connect(old.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ojs, _ := jetstream.New(onc)
	topo := cfg.Topology()
	if err := events.EnsureTopology(ctx, ojs, topo); err != nil {
		t.Fatal(err)
	}
	if _, err := ojs.Publish(ctx, "engram.out.memory_changed.old", []byte("old "+secret)); err != nil {
		t.Fatal(err)
	}
	onc.Close()
	old.Shutdown()
	if !storeContains(t, cfg.NATSStoreDir(), secret) {
		t.Fatal("the plaintext store does not hold the secret: the test proves nothing")
	}

	p := startServe(t, cfg)
	if _, err := p.Bus.JS.Publish(ctx, "engram.out.memory_changed.new", []byte("new "+secret)); err != nil {
		t.Fatal(err)
	}
	readBack := func(js jetstream.JetStream) {
		t.Helper()
		st, err := js.Stream(ctx, events.StreamOut)
		if err != nil {
			t.Fatal(err)
		}
		for _, subj := range []string{"engram.out.memory_changed.old", "engram.out.memory_changed.new"} {
			m, err := st.GetLastMsgForSubject(ctx, subj)
			if err != nil || !bytes.Contains(m.Data, []byte(secret)) {
				t.Errorf("%s after encryption: %v", subj, err)
			}
		}
	}
	readBack(p.Bus.JS)
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if storeContains(t, cfg.NATSStoreDir(), secret) {
		t.Error("the secret is in the raw store files")
	}
	p = startServe(t, cfg)
	readBack(p.Bus.JS)
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Another key: refused at start, naming the fix; the store is untouched.
	other := filepath.Join(t.TempDir(), "other.key")
	if err := os.WriteFile(other, []byte("another-key-0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrong := cfg
	wrong.NATS.StoreKeyFile = other
	if p, err := app.Start(ctx, wrong, true, "engram-serve"); err == nil {
		_ = p.Stop(context.Background())
		t.Fatal("serve started with another store key")
	} else if !errors.Is(err, natsauth.ErrWrongStoreKey) || !strings.Contains(err.Error(), "ENGRAM_NATS_STORE_KEY_FILE") {
		t.Fatalf("another key: %v", err)
	}
	p = startServe(t, cfg)
	readBack(p.Bus.JS)
}

func storeContains(t *testing.T, dir, s string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(s)) {
			t.Logf("secret in %s", path)
			found = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestWorkerPicksUpServeCredentials: a worker process pointed at a local
// serve, with no credentials given, connects as its own role with the
// password serve generated into the shared data dir; with -insecure it
// does not read them and is refused.
func TestWorkerPicksUpServeCredentials(t *testing.T) {
	cfg := testConfig(t)
	serve := startServe(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wcfg := cfg
	wcfg.NATS.URL = serve.Bus.URL
	wcfg.HTTP.Addr = ""
	wcfg.Idle.Enabled = false
	wcfg.Work.Workers = []string{events.ConsumerCompactor}
	worker := app.ProvideWorker(func() app.Worker {
		return app.Worker{Role: events.ConsumerCompactor, Handler: func(context.Context, events.Envelope) error { return nil }}
	})
	p, err := app.Start(ctx, wcfg, false, "engram-compactor", worker)
	if err != nil {
		t.Fatalf("worker against serve with the data dir's credentials: %v", err)
	}
	defer p.Stop(context.Background())
	if p.Bus.Granted.User != natsauth.RoleCompactor {
		t.Fatalf("connected as %q, want the compactor's user", p.Bus.Granted.User)
	}
	wcfg.NATS.Insecure = true
	if p, err := app.Start(ctx, wcfg, false, "engram-compactor", worker); err == nil {
		_ = p.Stop(context.Background())
		t.Fatal("an insecure worker connected to serve")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("insecure worker: %v, want an authorization violation", err)
	}
}

// TestStoreKeyMovedOutOfTheDataDir: the data dir of a version that kept the
// NATS store key beside the store (<data>/nats-store.key) starts with its
// events readable; the key is then in the key dir, outside the data dir,
// and a copy of the data dir alone no longer opens the store.
func TestStoreKeyMovedOutOfTheDataDir(t *testing.T) {
	cfg := testConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const key = "0123456789abcdef0123456789abcdef0123456789abcdef"
	if err := natsauth.EnsurePrivateDir(cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	legacy := filepath.Join(cfg.DataDir, natsauth.StoreKeyFile)
	if err := os.WriteFile(legacy, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := natsauth.CheckStoreKey(cfg.NATSStoreDir(), key); err != nil {
		t.Fatal(err)
	}
	old, err := natsembed.Start(natsembed.Options{StoreDir: cfg.NATSStoreDir(), Listen: "127.0.0.1:-1", StoreKey: key})
	if err != nil {
		t.Fatal(err)
	}
	onc, err := nats.Connect(old.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	ojs, _ := jetstream.New(onc)
	if err := events.EnsureTopology(ctx, ojs, cfg.Topology()); err != nil {
		t.Fatal(err)
	}
	if _, err := ojs.Publish(ctx, "engram.out.memory_changed.%.old", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	onc.Close()
	old.Shutdown()

	p := startServe(t, cfg)
	st, err := p.Bus.JS.Stream(ctx, events.StreamOut)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.GetLastMsgForSubject(ctx, "engram.out.memory_changed.%.old"); err != nil || string(m.Data) != "kept" {
		t.Fatalf("the older store after the move: %v", err)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(legacy); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the key is still beside the store: %v", err)
	}
	moved := filepath.Join(cfg.NATS.StoreKeyDir, natsauth.StoreKeyID(key)+".key")
	if got, err := natsauth.ReadKeyFile(moved); err != nil || got != key {
		t.Fatalf("the key in the key dir: %q %v", got, err)
	}
	// The data dir alone (a backup, a copied volume) does not open it.
	elsewhere := cfg
	elsewhere.NATS.StoreKeyDir = filepath.Join(t.TempDir(), "other-keys")
	if p, err := app.Start(ctx, elsewhere, true, "engram-serve"); err == nil {
		_ = p.Stop(context.Background())
		t.Fatal("serve opened the store without its key")
	} else if !errors.Is(err, natsauth.ErrStoreKeyMissing) {
		t.Fatalf("without the key: %v", err)
	}
}
