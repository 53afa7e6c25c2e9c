package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/internal/natsembed"
	"github.com/engram-memory/engram/pkg/events"
)

// TestTenantCommandAndGeneratedConfig: `engram tenant add` prints a
// tenant's credentials once and keeps only a hash; `engram nats-config
// -tenants` is a configuration an external nats-server runs with; with it
// the tenant's user publishes its own events (engram publish, which picks
// the tenant's inbox) and nothing in another tenant's name.
func TestTenantCommandAndGeneratedConfig(t *testing.T) {
	data := t.TempDir()
	cli := func(args ...string) (string, int) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(append(args[:1:1], append([]string{"-data", data}, args[1:]...)...), &stdout, &stderr)
		return stdout.String() + stderr.String(), code
	}
	out, code := cli("tenant", "add", "acme")
	if code != 0 {
		t.Fatalf("tenant add: exit %d\n%s", code, out)
	}
	m := regexp.MustCompile(`ENGRAM_NATS_PASSWORD=(\S+)`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "ENGRAM_NATS_USER=tenant-acme") || !strings.Contains(out, "_INBOX_TENANT.acme") {
		t.Fatalf("tenant add printed:\n%s", out)
	}
	pw := m[1]
	if out, code := cli("tenant", "add", "acme"); code == 0 || !strings.Contains(out, "already") {
		t.Fatalf("a second add: exit %d\n%s", code, out)
	}
	for _, bad := range []string{"", "a\x00b"} {
		if out, code := cli("tenant", "add", bad); code == 0 {
			t.Fatalf("tenant add %q: exit 0\n%s", bad, out)
		}
	}
	stored, err := os.ReadFile(natsauth.TenantsPath(data))
	if err != nil || strings.Contains(string(stored), pw) {
		t.Fatalf("the tenants file holds the password (or is missing): %v", err)
	}
	if out, _ := cli("tenant", "list"); !strings.Contains(out, `"acme"`) {
		t.Fatalf("tenant list:\n%s", out)
	}
	conf, code := cli("nats-config", "-tenants")
	if code != 0 || !strings.Contains(conf, `user: "tenant-acme"`) || strings.Contains(conf, pw) ||
		!strings.Contains(conf, `"engram.in.*.acme.>"`) || !strings.Contains(conf, `"_INBOX_TENANT.acme.>"`) {
		t.Fatalf("nats-config -tenants: exit %d\n%s", code, conf)
	}

	// An external server with the generated configuration.
	confFile := filepath.Join(t.TempDir(), "accounts.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, r := range natsauth.Roles() {
		t.Setenv(natsauth.PasswordEnv(r), "pw-"+r)
	}
	srv, err := natsembed.Start(natsembed.Options{ConfigFile: confFile, StoreDir: filepath.Join(t.TempDir(), "nats"), Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	anc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("admin", "pw-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer anc.Close()
	js, _ := jetstream.New(anc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := events.EnsureTopology(ctx, js, events.DefaultTopology()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ENGRAM_NATS_URL", srv.ClientURL())
	t.Setenv("ENGRAM_NATS_USER", natsauth.TenantUser("acme"))
	t.Setenv("ENGRAM_NATS_PASSWORD", pw)
	publish := func(tenant string) (string, int) {
		ev := `{"type":"tokens_reported","tenant_id":"` + tenant + `","project_id":"p","session_id":"s","payload":{"input_tokens":5}}`
		f := filepath.Join(t.TempDir(), "ev.json")
		if err := os.WriteFile(f, []byte(ev), 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		code := run([]string{"publish", "-f", f, "-nats-connect-timeout", "2s"}, &stdout, &stderr)
		return stdout.String() + stderr.String(), code
	}
	if out, code := publish("acme"); code != 0 || !strings.Contains(out, "on engram.in.tokens_reported.acme.p.s") {
		t.Fatalf("publish as acme: exit %d\n%s", code, out)
	}
	if out, code := publish("other"); code == 0 {
		t.Fatalf("acme's user published in tenant other's name:\n%s", out)
	}
	st, _ := js.Stream(ctx, events.StreamIn)
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("ENGRAM_IN holds %d events (%v), want acme's one", info.State.Msgs, err)
	}
	// Removed, the tenant is gone from the next configuration.
	if out, code := cli("tenant", "remove", "acme"); code != 0 {
		t.Fatalf("tenant remove: exit %d\n%s", code, out)
	}
	if conf, _ := cli("nats-config", "-tenants"); strings.Contains(conf, "tenant-acme") {
		t.Fatal("a removed tenant is still in the configuration")
	}
}
