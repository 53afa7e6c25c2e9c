package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// runBin runs the built engram with args and env, returning stdout, stderr
// and the exit code.
func runBin(t *testing.T, bin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestHelp: a command group's -h lists its commands instead of connecting
// or failing; a command's -h shows its own flags first and the shared
// settings under their own heading.
func TestHelp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the engram binary")
	}
	bin := buildEngram(t)
	noServer := []string{"ENGRAM_NATS_URL=nats://127.0.0.1:1", "ENGRAM_DATA=" + t.TempDir()}
	for _, group := range []string{"dlq", "memory", "bench"} {
		_, stderr, code := runBin(t, bin, noServer, group, "-h")
		if code != 0 || !strings.Contains(stderr, "commands:") || strings.Contains(stderr, "connect") {
			t.Errorf("engram %s -h: exit %d\n%s", group, code, stderr)
		}
		if _, stderr, code := runBin(t, bin, noServer, group); code != 2 || !strings.Contains(stderr, "commands:") {
			t.Errorf("engram %s: exit %d\n%s", group, code, stderr)
		}
	}
	if _, stderr, _ := runBin(t, bin, noServer, "dlq", "-h"); !strings.Contains(stderr, "drop SEQ...") {
		t.Errorf("engram dlq -h lacks drop:\n%s", stderr)
	}
	_, stderr, code := runBin(t, bin, noServer, "inject", "-h")
	own, shared := strings.Index(stderr, "Flags of engram inject:"), strings.Index(stderr, "Shared settings (")
	if code != 0 || own < 0 || shared < own || strings.Index(stderr, "  -project") > shared || strings.Index(stderr, "  -ack-wait") < shared {
		t.Errorf("engram inject -h: own flags first, then the shared ones under a heading:\n%s", stderr)
	}
	if _, stderr, _ := runBin(t, bin, noServer, "status", "-h"); strings.Contains(stderr, "Flags of") || !strings.Contains(stderr, "Shared settings (") {
		t.Errorf("engram status -h:\n%s", stderr)
	}
}

// TestVersion: engram version names the module version and the Go version.
func TestVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the engram binary")
	}
	bin := buildEngram(t)
	stdout, _, code := runBin(t, bin, nil, "version")
	if code != 0 || !strings.HasPrefix(stdout, "engram ") || !strings.Contains(stdout, runtime.Version()) {
		t.Errorf("engram version: exit %d: %q", code, stdout)
	}
	stdout, _, _ = runBin(t, bin, nil, "version", "-json")
	var v struct{ Version, Go string }
	if err := json.Unmarshal([]byte(stdout), &v); err != nil || v.Version == "" || v.Go != runtime.Version() {
		t.Errorf("engram version -json: %q %v", stdout, err)
	}
}

// TestStartupErrorIsOneLine: a start-up failure prints its cause on one
// line, not the dependency graph and stack traces (a tokens file of mode
// 644 used to print 5.9 KB before "chmod 600 it").
func TestStartupErrorIsOneLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the engram binary")
	}
	bin := buildEngram(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("b3c1f0e9a7d24c8e9f1a2b3c4d5e6f70 shop acme/web\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runBin(t, bin, nil, "serve", "-data", filepath.Join(t.TempDir(), "d"), "-nats-listen", "127.0.0.1:-1",
		"-http", "127.0.0.1:0", "-mcp-addr", "127.0.0.1:0", "-mcp-tokens", tokens, "-log-format", "json")
	// Log lines of what start-up did before it failed (at info, e.g. the
	// NATS store key it generated) may come first; the failure is one line.
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(stdout+stderr), "\n") {
		if !strings.HasPrefix(l, `{"level":"info"`) {
			lines = append(lines, l)
		}
	}
	all := strings.Join(lines, "\n")
	if code != 1 || len(lines) != 1 || !strings.Contains(all, "chmod 600 it") ||
		strings.Contains(all, "could not build") || strings.Contains(all, "stacktrace") {
		t.Fatalf("exit %d, want one line ending in the cause (%d bytes):\n%s", code, len(all), all)
	}
}

// TestImportGzipAndBadLines: memory import reads gzip, and a file of bad
// lines reports the first 20 and counts the rest.
func TestImportGzipAndBadLines(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the engram binary")
	}
	bin := buildEngram(t)
	dir := t.TempDir()
	graph, err := os.ReadFile(filepath.Join("..", "..", "examples", "graph.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(graph)
	_ = zw.Close()
	file := filepath.Join(dir, "graph.jsonl.gz")
	if err := os.WriteFile(file, gz.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"ENGRAM_DATA=" + filepath.Join(dir, "data")}
	if stdout, stderr, code := runBin(t, bin, env, "memory", "import", file); code != 0 || !strings.HasPrefix(stdout, "imported 8 nodes and 1 edges") {
		t.Fatalf("import of a gzip file: exit %d\n%s%s", code, stdout, stderr)
	}
	var bad strings.Builder
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&bad, "{\"type\":\"node\",\"subkind\":\"wish\",\"label\":\"x%d\"}\n", i)
	}
	badFile := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(badFile, []byte(bad.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runBin(t, bin, env, "memory", "import", badFile)
	if code != 1 || strings.Count(stderr, "invalid line ") != 20 || !strings.Contains(stderr, "10 more problems not listed") {
		t.Fatalf("import of 30 bad lines: exit %d\n%s", code, stderr)
	}
}

// TestPublishRefusesForeignReplyTo: publish refuses, before connecting, a
// turn_started whose reply_to the injector would dead-letter.
func TestPublishRefusesForeignReplyTo(t *testing.T) {
	var stdout, stderr bytes.Buffer
	in, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.WriteString(`{"type":"turn_started","project_id":"p","session_id":"s","turn_id":"t","payload":{"text":"hi","reply_to":"engram.in.turn_ended.p.s"}}`)
	_ = w.Close()
	old := os.Stdin
	os.Stdin = in
	defer func() { os.Stdin = old }()
	code := run([]string{"publish", "-nats-url", "nats://127.0.0.1:1"}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "is not an inbox") || strings.Contains(stderr.String(), "connect to NATS") {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
}

// TestCLIBesideServe: with serve running, a command that opens the SQLite
// store itself says that serve holds it and what to do; a failed NATS
// login is one warning line in serve's log; dlq drop deletes a letter.
func TestCLIBesideServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the engram binary")
	}
	bin := buildEngram(t)
	s := startServe(t, bin, filepath.Join(t.TempDir(), "data"), nil)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"memory", "export"}, "stop it first"},
		{[]string{"memory", "import", filepath.Join("..", "..", "examples", "graph.jsonl")}, "stop it first"},
		{[]string{"inject", "-direct", "-project", "p", "-session", "s", "question"}, "drop -direct to ask the running serve"},
		{[]string{"consolidate", "-project", "p", "-session", "s"}, "stop it first"},
	} {
		_, stderr, code := runBin(t, bin, s.env(), c.args...)
		if code == 0 || !strings.Contains(stderr, "held by another process, most likely a running `engram serve`") || !strings.Contains(stderr, c.want) {
			t.Errorf("engram %v beside serve: exit %d\n%s", c.args, code, stderr)
		}
	}

	// A client with a wrong password: one warning line, no stack trace.
	if nc, err := nats.Connect(s.natsURL, nats.UserInfo("platform", "wrong-password")); err == nil {
		nc.Close()
		t.Fatal("connected with a wrong password")
	}
	waitFor(t, "the failed login in serve's log", func() bool { return strings.Contains(s.logs(), "authentication error") })
	for _, line := range strings.Split(s.logs(), "\n") {
		if strings.Contains(line, "authentication error") && (!strings.Contains(line, `"level":"warn"`) || strings.Contains(line, "stacktrace")) {
			t.Errorf("failed login logged as: %s", line)
		}
	}

	// A letter to drop: an undecodable event on an input subject.
	nc := s.connect(t, "admin")
	if err := nc.Publish("engram.in.tokens_reported.%.p.s", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	var seq string
	waitFor(t, "the dead letter", func() bool {
		out := s.engram(t, bin, "dlq", "list")
		for _, line := range strings.Split(out, "\n")[1:] {
			if f := strings.Fields(line); len(f) > 0 {
				seq = f[0]
				return true
			}
		}
		return false
	})
	if out := s.engram(t, bin, "dlq", "drop", seq); !strings.Contains(out, "dropped "+seq) {
		t.Fatalf("dlq drop: %s", out)
	}
	if out := s.engram(t, bin, "dlq", "list"); !strings.Contains(out, "the DLQ is empty") {
		t.Fatalf("after drop: %s", out)
	}
	s.stop(t)
}
