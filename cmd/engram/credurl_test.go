package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Issue 23: `engram setup`, `engram status` and a failed connection print
// the NATS URL without its password.
func TestCommandsDoNotPrintURLPasswords(t *testing.T) {
	const pw = "s3cr3t-Passw0rd"
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, Username: "admin", Password: pw,
		JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	addr := srv.Addr().String()
	url := fmt.Sprintf("nats://admin:%s@%s", pw, addr)
	for _, args := range [][]string{
		{"setup", "-nats-url", url},
		{"status", "-nats-url", url, "-http", "127.0.0.1:1"},
		{"status", "-nats-url", "nats://admin:" + pw + "@127.0.0.1:1", "-nats-connect-timeout", "200ms"},
		{"status", "-nats-url", "nats://admin:" + pw + "@127.0.0.1:x"},
		{"dlq", "list", "-nats-url", fmt.Sprintf("nats://admin:wrong-%s@%s", pw, addr)},
	} {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		all := out.String() + errb.String()
		if strings.Contains(all, pw) {
			t.Errorf("engram %v (exit %d) printed the password:\n%s", args, code, all)
		}
		if args[0] == "setup" && (code != 0 || !strings.Contains(all, "nats://admin:xxxxx@")) {
			t.Errorf("engram setup: exit %d, want the masked URL:\n%s", code, all)
		}
	}
}
