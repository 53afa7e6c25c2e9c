package natsauth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/internal/natsembed"
)

// pemFiles makes a CA, a server certificate for 127.0.0.1 and a client
// certificate, and writes them as PEM files into dir.
func pemFiles(t *testing.T, dir string) (ca, srvCert, srvKey, cliCert, cliKey string) {
	t.Helper()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "engram test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kd, _ := x509.MarshalECPrivateKey(k)
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kd)
	}
	ca = write("ca.pem", "CERTIFICATE", caDER)
	srvCert, srvKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	cliCert, cliKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return
}

// TestClientOptionsConnect: the options of natsauth.Client connect to a
// server that requires mutual TLS and a user, an nkey or a token; without
// the client certificate, or with a wrong password, they do not.
func TestClientOptionsConnect(t *testing.T) {
	dir := t.TempDir()
	ca, sc, sk, cc, ck := pemFiles(t, dir)
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
