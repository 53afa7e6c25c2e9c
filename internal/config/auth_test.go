package config_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestNATSAuthValidatedWithoutShowingSecrets: conflicting or broken NATS
// credentials are all reported, and no password or token is in the error,
// the flags' help or a redacted URL.
func TestNATSAuthValidatedWithoutShowingSecrets(t *testing.T) {
	const pw, tok = "pa55-w0rd-secret", "t0ken-secret"
	missing := filepath.Join(t.TempDir(), "missing.pem")
	_, fs, err := load(t, map[string]string{
		"ENGRAM_NATS_URL":            "nats://admin:" + pw + "@nats.example.com:4222",
		"ENGRAM_NATS_USER":           "injector",
		"ENGRAM_NATS_PASSWORD":       pw,
		"ENGRAM_NATS_TOKEN":          tok,
		"ENGRAM_NATS_CERT":           missing,
		"ENGRAM_NATS_CA":             missing,
		"ENGRAM_NATS_STORE_KEY_FILE": missing,
	})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{"both in ENGRAM_NATS_URL", "only one of", "ENGRAM_NATS_KEY", "ENGRAM_NATS_CA", "ENGRAM_NATS_STORE_KEY_FILE"} {
		if !strings.Contains(msg, want) {
			t.Errorf("no problem mentions %q:\n%s", want, msg)
		}
	}
	var help bytes.Buffer
	fs.SetOutput(&help)
	fs.PrintDefaults()
	for _, s := range []string{msg, help.String()} {
		if strings.Contains(s, pw) || strings.Contains(s, tok) {
			t.Fatalf("a secret is shown:\n%s", s)
		}
	}
	// A bad URL with a password is reported redacted.
	_, _, err = load(t, map[string]string{"ENGRAM_NATS_URL": "http://admin:" + pw + "@nats:4222"})
	if err == nil || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "xxxxx") {
		t.Fatalf("bad URL error: %v", err)
	}
}
