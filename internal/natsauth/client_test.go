package natsauth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/engram-memory/engram/internal/natsauth"
)

func TestClientValidateListsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	seed := filepath.Join(dir, "user.nk")
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	s, _ := kp.Seed()
	if err := os.WriteFile(seed, s, 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	const secret = "hunter2-very-secret"
	for _, tc := range []struct {
		name string
		c    natsauth.Client
		want []string // substrings, one problem each
	}{
		{"nothing", natsauth.Client{}, nil},
		{"user and password", natsauth.Client{User: "injector", Password: secret}, nil},
		{"token", natsauth.Client{Token: secret}, nil},
		{"nkey seed", natsauth.Client{NKeyFile: seed}, nil},
		{"user without password", natsauth.Client{User: "injector"}, []string{"without a password"}},
		{"password without user", natsauth.Client{Password: secret}, []string{"without a user"}},
		{"token and creds", natsauth.Client{Token: secret, CredsFile: missing}, []string{"only one of", "ENGRAM_NATS_CREDS"}},
		{"unreadable files", natsauth.Client{NKeyFile: missing, CAFile: missing}, []string{"ENGRAM_NATS_NKEY", "ENGRAM_NATS_CA"}},
		{"not a seed, not a CA", natsauth.Client{NKeyFile: notPEM, CAFile: notPEM}, []string{"no nkey seed", "no PEM certificate"}},
		{"creds without a JWT", natsauth.Client{CredsFile: notPEM}, []string{"no user JWT"}},
		{"cert without key", natsauth.Client{CertFile: notPEM}, []string{"without its key"}},
		{"key without cert", natsauth.Client{KeyFile: notPEM}, []string{"without its certificate"}},
		{"bad cert and key", natsauth.Client{CertFile: notPEM, KeyFile: notPEM}, []string{"ENGRAM_NATS_CERT, ENGRAM_NATS_KEY"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.c.Validate()
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			joined := strings.Join(all, "\n")
			if strings.Contains(joined, secret) {
				t.Fatalf("a secret in the errors:\n%s", joined)
			}
			if len(tc.want) == 0 && len(errs) > 0 {
				t.Fatalf("unexpected problems:\n%s", joined)
			}
			for _, w := range tc.want {
				if !strings.Contains(joined, w) {
					t.Errorf("no problem mentions %q:\n%s", w, joined)
				}
			}
			if _, err := tc.c.Options(); (err != nil) != (len(tc.want) > 0) {
				t.Errorf("Options: %v", err)
			}
			if m := tc.c.Method(); strings.Contains(m, secret) {
				t.Errorf("Method %q shows the secret", m)
			}
		})
	}
}

func TestIsLocal(t *testing.T) {
	for in, want := range map[string]bool{
		"": true, "nats://127.0.0.1:4222": true, "nats://localhost:4222": true, "nats://[::1]:4222": true,
		"127.0.0.1:4222": true, "nats://127.0.0.1:-1": true, "nats://u:p@127.0.0.1:4222/": true, "nats://127.0.0.1:1,nats://10.0.0.5:4222": false, "nats://nats.example.com:4222": false,
	} {
		if got := natsauth.IsLocal(in); got != want {
			t.Errorf("IsLocal(%q) = %v", in, got)
		}
	}
}

func TestEnsureCredentialsAndKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c, created, err := natsauth.EnsureCredentials(dir)
	if err != nil || !created {
		t.Fatalf("first: %v created=%v", err, created)
	}
	seen := map[string]bool{}
	for _, r := range natsauth.Roles() {
		if len(c.Users[r]) < 20 || seen[c.Users[r]] {
			t.Errorf("password of %s: %q", r, c.Users[r])
		}
		seen[c.Users[r]] = true
	}
	again, created, err := natsauth.EnsureCredentials(dir)
	if err != nil || created || again.Users["admin"] != c.Users["admin"] {
		t.Fatalf("second: %v created=%v, same=%v", err, created, again.Users["admin"] == c.Users["admin"])
	}
	k, created, err := natsauth.EnsureStoreKey(dir)
	if err != nil || !created || len(k) != 64 {
		t.Fatalf("key: %v %v %d", err, created, len(k))
	}
	if k2, _, _ := natsauth.EnsureStoreKey(dir); k2 != k {
		t.Fatal("the key changed")
	}
	for _, f := range []string{natsauth.CredentialsFile, natsauth.StoreKeyFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", f, err, st.Mode())
		}
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", st.Mode())
	}
}
