package natsauth_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/internal/natsembed"
	"github.com/engram-memory/engram/internal/testpki"
)

// TestClientOptionsConnect: the options of natsauth.Client connect to a
// server that requires mutual TLS and a user, an nkey or a token; without
// the client certificate, or with a wrong password, they do not.
func TestClientOptionsConnect(t *testing.T) {
	dir := t.TempDir()
	k := testpki.New(t, dir)
	ca, sc, sk, cc, ck := k.CA, k.ServerCert, k.ServerKey, k.ClientCert, k.ClientKey
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(dir, "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(auth string) string {
		conf := filepath.Join(t.TempDir(), "server.conf")
		body := fmt.Sprintf("tls {\n cert_file: %q\n key_file: %q\n ca_file: %q\n verify: true\n}\n%s\n", sc, sk, ca, auth)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		srv, err := natsembed.Start(natsembed.Options{ConfigFile: conf, StoreDir: t.TempDir(), Listen: "127.0.0.1:-1"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		return fmt.Sprintf("tls://127.0.0.1:%d", srv.Addr().(*net.TCPAddr).Port)
	}
	users := start(fmt.Sprintf("authorization {\n users: [\n  {user: injector, password: \"right-password\"}\n  {nkey: %s}\n ]\n}", pub))
	token := start("authorization {\n token: \"the-token-1234\"\n}")
	tlsOf := natsauth.Client{CAFile: ca, CertFile: cc, KeyFile: ck}
	with := func(c natsauth.Client, f func(*natsauth.Client)) natsauth.Client { f(&c); return c }
	for _, tc := range []struct {
		name string
		url  string
		c    natsauth.Client
		ok   bool
	}{
		{"mTLS + user", users, with(tlsOf, func(c *natsauth.Client) { c.User, c.Password = "injector", "right-password" }), true},
		{"mTLS + nkey", users, with(tlsOf, func(c *natsauth.Client) { c.NKeyFile = seedFile }), true},
		{"mTLS + token", token, with(tlsOf, func(c *natsauth.Client) { c.Token = "the-token-1234" }), true},
		{"wrong password", users, with(tlsOf, func(c *natsauth.Client) { c.User, c.Password = "injector", "wrong" }), false},
		{"no client certificate", users, natsauth.Client{CAFile: ca, User: "injector", Password: "right-password"}, false},
		{"wrong token", token, with(tlsOf, func(c *natsauth.Client) { c.Token = "not-it" }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := tc.c.Options()
			if err != nil {
				t.Fatal(err)
			}
			nc, err := nats.Connect(tc.url, append(opts, nats.Timeout(5*time.Second), nats.MaxReconnects(0))...)
			if err == nil {
				nc.Close()
			}
			if (err == nil) != tc.ok {
				t.Fatalf("connect: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
