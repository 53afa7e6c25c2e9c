package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNATSConfigPrintsTheShippedFile(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"nats-config"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nats", "accounts.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if stdout.String() != string(want) {
		t.Fatal("engram nats-config differs from deploy/nats/accounts.conf")
	}
	stdout.Reset()
	if code := run([]string{"nats-config", "-subject-prefix", "acme.mem"}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), `"acme.mem.in.*.%.>"`) || strings.Contains(stdout.String(), `"engram.in.`) {
		t.Fatalf("with a prefix: exit %d\n%s", code, stdout.String())
	}
}

// TestConnectErrorHidesThePassword: a URL with a password in a connection
// error is printed redacted.
func TestConnectErrorHidesThePassword(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"status", "-nats-url", "nats://admin:pa55w0rd-secret@127.0.0.1:1", "-nats-connect-timeout", "1s"}, &stdout, &stderr)
	if code != 1 || strings.Contains(stderr.String()+stdout.String(), "pa55w0rd-secret") || !strings.Contains(stderr.String(), "admin:xxxxx@") {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
}
