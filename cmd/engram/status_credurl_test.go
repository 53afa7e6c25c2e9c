package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Issue 31: `engram status` prints the readiness checks without a URL's
// password, also when the server it asks does not mask it (an older one).
func TestStatusHidesURLPasswordsOfReadiness(t *testing.T) {
	const pw = "0llama-Pa55word"
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	readyz := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ready","checks":[{"name":"model","status":"degraded","error":"llm: version at http://engram:` + pw + `@ollama:11434: connection refused"}]}`))
	}))
	defer readyz.Close()
	var out, errb bytes.Buffer
	run([]string{"setup", "-nats-url", "nats://" + srv.Addr().String()}, &out, &errb)
	out.Reset()
	errb.Reset()
	run([]string{"status", "-nats-url", "nats://" + srv.Addr().String(), "-http", strings.TrimPrefix(readyz.URL, "http://")}, &out, &errb)
	all := out.String() + errb.String()
	if strings.Contains(all, pw) || !strings.Contains(all, "engram:xxxxx@ollama") {
		t.Errorf("engram status shows the password, or not the masked URL:\n%s", all)
	}
}
