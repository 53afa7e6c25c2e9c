package config_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A bad Redis or NATS URL is reported without its password, whatever the
// form: a URL, a bare user:password@host:port, a cluster list, a flag.
func TestURLPasswordsNotInErrors(t *testing.T) {
	const pw = "Tr0ub4dor-and-3"
	for _, e := range []map[string]string{
		{"ENGRAM_STORE": "redis", "ENGRAM_REDIS_URL": "redis://:" + pw + "@cache:notaport/0"},
		{"ENGRAM_STORE": "redis", "ENGRAM_REDIS_URL": "http://engram:" + pw + "@cache:6379"},
		{"ENGRAM_STORE": "redis", "ENGRAM_REDIS_URL": "engram:" + pw + "@cache:x"},
		{"ENGRAM_STORE": "redis", "ENGRAM_REDIS_URL": "redis://h1:7001,redis://u:" + pw + "@h2:bad"},
		{"ENGRAM_NATS_URL": "nats://admin:" + pw + "@nats:4222,nats://admin:" + pw + "@nats2:port"},
		{"ENGRAM_NATS_URL": "nats://admin:" + pw + "@nats:4222", "ENGRAM_CONCURRENCY": "x"},
	} {
		_, _, err := load(t, e)
		if err == nil {
			t.Fatalf("%v: want an error", e)
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("%v: password in the error:\n%v", e, err)
		}
		if !strings.Contains(err.Error(), "xxxxx") && !strings.Contains(err.Error(), "CONCURRENCY") {
			t.Errorf("%v: the error does not show the masked URL:\n%v", e, err)
		}
	}
}

func TestReplyPrefixes(t *testing.T) {
	c, _, err := load(t, map[string]string{"ENGRAM_REPLY_PREFIXES": "_INBOX., _INBOX_acme"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Events.ReplyPrefixes) != 2 || c.Events.ReplyPrefixes[1] != "_INBOX_acme" {
		t.Errorf("reply prefixes = %q", c.Events.ReplyPrefixes)
	}
	if d, _, _ := load(t, nil); len(d.Events.ReplyPrefixes) != 1 || d.Events.ReplyPrefixes[0] != "_INBOX." {
		t.Errorf("default reply prefixes = %q", d.Events.ReplyPrefixes)
	}
	for _, bad := range []string{"$KV.ENGRAM_ACTIVITY", "$JS.API", "engram", "engram.out", "_INBOX.*", ">", ""} {
		if _, _, err := load(t, map[string]string{"ENGRAM_REPLY_PREFIXES": bad}); err == nil || !strings.Contains(err.Error(), "ENGRAM_REPLY_PREFIXES") {
			t.Errorf("reply prefix %q: err %v, want a reply prefix problem", bad, err)
		}
	}
}

func TestMetricsProjectLabelsOffByDefault(t *testing.T) {
	c, _, err := load(t, nil)
	if err != nil || c.HTTP.MetricsProjectLabels {
		t.Fatalf("metrics project labels on by default (%v)", err)
	}
	c, _, err = load(t, map[string]string{"ENGRAM_METRICS_PROJECT_LABELS": "true"})
	if err != nil || !c.HTTP.MetricsProjectLabels {
		t.Fatalf("ENGRAM_METRICS_PROJECT_LABELS=true not applied (%v)", err)
	}
}

// writeCert writes a self-signed certificate and its key (PEM) into dir.
func writeCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "engram-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, DNSNames: []string{"cache"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestRedisTLSOptions(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{"ENGRAM_STORE": "redis", "ENGRAM_REDIS_URL": "rediss://engram:pw@cache:6380/0"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}

	c, _, err := load(t, with("ENGRAM_REDIS_CA", cert, "ENGRAM_REDIS_CERT", cert, "ENGRAM_REDIS_KEY", key))
	if err != nil {
		t.Fatal(err)
	}
	tc, err := c.Store.RedisTLS()
	if err != nil || tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 {
		t.Fatalf("RedisTLS = %+v, %v; want a CA pool and one client certificate", tc, err)
	}
	if c, _, err := load(t, base); err != nil {
		t.Fatal(err)
	} else if tc, err := c.Store.RedisTLS(); err != nil || tc != nil {
		t.Errorf("no TLS files: RedisTLS = %v, %v; want nil (go-redis's rediss:// defaults)", tc, err)
	}

	for name, c := range map[string]struct {
		env  map[string]string
		want string
	}{
		"missing CA":     {with("ENGRAM_REDIS_CA", filepath.Join(dir, "nope.pem")), "ENGRAM_REDIS_CA"},
		"junk CA":        {with("ENGRAM_REDIS_CA", junk), "no PEM certificate"},
		"cert, no key":   {with("ENGRAM_REDIS_CERT", cert), "needs its key"},
		"key, no cert":   {with("ENGRAM_REDIS_KEY", key), "needs its certificate"},
		"key mismatch":   {with("ENGRAM_REDIS_CERT", cert, "ENGRAM_REDIS_KEY", junk), "ENGRAM_REDIS_CERT, ENGRAM_REDIS_KEY"},
		"plain redis://": {with("ENGRAM_REDIS_CA", cert, "ENGRAM_REDIS_URL", "redis://engram:pw@cache:6379/0"), "not rediss://"},
	} {
		_, _, err := load(t, c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one saying %q", name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), ":pw@") {
			t.Errorf("%s: password in %v", name, err)
		}
	}
	// Every problem at once.
	_, _, err = load(t, with("ENGRAM_REDIS_CA", junk, "ENGRAM_REDIS_CERT", cert))
	if err == nil || !strings.Contains(err.Error(), "no PEM certificate") || !strings.Contains(err.Error(), "needs its key") {
		t.Errorf("want both problems, got %v", err)
	}
}
