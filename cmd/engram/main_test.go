package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunReportsEveryConfigurationProblem(t *testing.T) {
	t.Setenv("ENGRAM_ACK_WAIT", "soon")
	var stdout, stderr bytes.Buffer
	code := run([]string{"serve", "-concurrency", "0", "-store", "redis", "-data", t.TempDir()}, &stdout, &stderr)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s", code, stderr.String())
	}
	for _, want := range []string{"invalid configuration", "ENGRAM_ACK_WAIT=\"soon\"", "ENGRAM_REDIS_URL is empty", "ENGRAM_CONCURRENCY"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestRunCommands(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(nil, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "serve") || !strings.Contains(stderr.String(), "dlq") {
		t.Errorf("no command: exit %d\n%s", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"frobnicate"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d\n%s", code, stderr.String())
	}
	stderr.Reset()
	// Nothing listens on port 1: a clear connection error, exit 1.
	if code := run([]string{"status", "-nats-url", "nats://127.0.0.1:1", "-nats-connect-timeout", "2s"}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "connect to NATS at nats://127.0.0.1:1") {
		t.Errorf("status without NATS: exit %d\n%s", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"dlq", "show", "abc", "-nats-url", "nats://127.0.0.1:1"}, &stdout, &stderr); code == 0 {
		t.Errorf("dlq show abc: exit 0")
	}
}
