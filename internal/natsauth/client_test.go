package natsauth_test

import (
	"encoding/json"
	"errors"
	"io/fs"
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
	for _, f := range []string{natsauth.CredentialsFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", f, err, st.Mode())
		}
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", st.Mode())
	}
}

// TestCredentialsOfAnOlderVersion: a credentials file written before the
// outputs role existed is read without it, and completed (the other
// passwords kept) by the next EnsureCredentials.
func TestCredentialsOfAnOlderVersion(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c, _, err := natsauth.EnsureCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]string{}
	for r, pw := range c.Users {
		if r != natsauth.RoleOutputs {
			old[r] = pw
		}
	}
	data, _ := json.Marshal(map[string]any{"users": old})
	if err := os.WriteFile(natsauth.CredentialsPath(dir), data, 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := natsauth.LoadCredentials(dir)
	if err != nil || loaded.Users[natsauth.RolePlatform] != old[natsauth.RolePlatform] || loaded.Users[natsauth.RoleOutputs] != "" {
		t.Fatalf("load of the older file: %v, %v", err, loaded.Users)
	}
	done, created, err := natsauth.EnsureCredentials(dir)
	if err != nil || created {
		t.Fatalf("ensure: %v created=%v", err, created)
	}
	for r, pw := range old {
		if done.Users[r] != pw {
			t.Errorf("the password of %s changed", r)
		}
	}
	if len(done.Users[natsauth.RoleOutputs]) < 20 {
		t.Fatalf("no password for outputs: %q", done.Users[natsauth.RoleOutputs])
	}
	again, err := natsauth.LoadCredentials(dir)
	if err != nil || again.Users[natsauth.RoleOutputs] != done.Users[natsauth.RoleOutputs] {
		t.Fatalf("the completed file: %v", err)
	}
	// A role that was always there, missing, is still an error.
	delete(old, natsauth.RoleInjector)
	data, _ = json.Marshal(map[string]any{"users": old})
	_ = os.WriteFile(natsauth.CredentialsPath(dir), data, 0o600)
	if _, err := natsauth.LoadCredentials(dir); err == nil || !strings.Contains(err.Error(), "no password for injector") {
		t.Fatalf("a file without the injector's password: %v", err)
	}
}

// TestStoreKeyOutsideTheDataDir: a new store's key is written to the key
// dir (0600, the dir 0700), named by its id, and found again by the id the
// store records; nothing of it is in the data dir.
func TestStoreKeyOutsideTheDataDir(t *testing.T) {
	data, keys := filepath.Join(t.TempDir(), "data"), filepath.Join(t.TempDir(), "keys")
	store := filepath.Join(data, "nats")
	k, err := natsauth.EnsureStoreKey(data, store, keys)
	if err != nil || !k.Created || len(k.Key) != 64 || filepath.Dir(k.Path) != keys {
		t.Fatalf("new key: %+v %v", k, err)
	}
	if err := natsauth.CheckStoreKey(store, k.Key); err != nil { // the store records its id
		t.Fatal(err)
	}
	if st, err := os.Stat(k.Path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", err, st)
	}
	if st, _ := os.Stat(keys); st.Mode().Perm() != 0o700 {
		t.Errorf("key dir mode %v", st.Mode())
	}
	if _, err := os.Stat(filepath.Join(data, natsauth.StoreKeyFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a key file in the data dir: %v", err)
	}
	again, err := natsauth.EnsureStoreKey(data, store, keys)
	if err != nil || again.Key != k.Key || again.Created || again.Moved {
		t.Fatalf("second start: %+v %v", again, err)
	}
	// The key is gone: the store's key is missing, named by its id; no
	// new key is made for an encrypted store.
	if err := os.Remove(k.Path); err != nil {
		t.Fatal(err)
	}
	if _, err := natsauth.EnsureStoreKey(data, store, keys); !errors.Is(err, natsauth.ErrStoreKeyMissing) ||
		!strings.Contains(err.Error(), natsauth.StoreKeyID(k.Key)) || !strings.Contains(err.Error(), "ENGRAM_NATS_STORE_KEY_FILE") {
		t.Fatalf("missing key: %v", err)
	}
}

// TestStoreKeyMovedOutOfTheDataDir: the key an older version kept in the
// data dir, beside the store, is moved to the key dir at the next start
// (the same key: the store stays readable) and removed from the data dir;
// a key in the data dir of another id than the store's is refused, and
// left where it is.
func TestStoreKeyMovedOutOfTheDataDir(t *testing.T) {
	data, keys := filepath.Join(t.TempDir(), "data"), filepath.Join(t.TempDir(), "keys")
	store := filepath.Join(data, "nats")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	legacy := filepath.Join(data, natsauth.StoreKeyFile)
	const old = "0123456789abcdef0123456789abcdef"
	if err := os.WriteFile(legacy, []byte(old+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := natsauth.CheckStoreKey(store, old); err != nil { // the older version's store
		t.Fatal(err)
	}
	k, err := natsauth.EnsureStoreKey(data, store, keys)
	if err != nil || k.Key != old || !k.Moved || k.MovedFrom != legacy || k.Path != filepath.Join(keys, natsauth.StoreKeyID(old)+".key") {
		t.Fatalf("moved: %+v %v", k, err)
	}
	if _, err := os.Stat(legacy); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the key is still in the data dir: %v", err)
	}
	if again, err := natsauth.EnsureStoreKey(data, store, keys); err != nil || again.Key != old || again.Moved {
		t.Fatalf("after the move: %+v %v", again, err)
	}
	// Another store whose data dir holds a key of another id.
	data2 := filepath.Join(t.TempDir(), "data")
	store2 := filepath.Join(data2, "nats")
	if err := natsauth.CheckStoreKey(store2, old); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data2, natsauth.StoreKeyFile), []byte("ffffffffffffffffffffffffffffffff"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := natsauth.EnsureStoreKey(data2, store2, filepath.Join(t.TempDir(), "keys")); !errors.Is(err, natsauth.ErrWrongStoreKey) {
		t.Fatalf("a key of another id: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data2, natsauth.StoreKeyFile)); err != nil {
		t.Fatalf("the mismatching key was not left in place: %v", err)
	}
}
