// Package mcpclients runs MCP clients that nobody here wrote against
// Engram's `memory` tool, for tests: the official TypeScript SDK's client
// (through internal/mcptool/testdata/clients/client.mjs), the MCP Inspector
// CLI (current) and the Inspector CLI 0.15, whose strict argument parsing
// once could not call the tool. They come from npm, pinned by
// internal/mcptool/testdata/clients/package-lock.json and installed into a
// cache by scripts/mcp-clients.sh.
//
// A test that uses them is skipped, with the reason, when node or npm is
// missing, except under CI (CI set), where that fails the test: the suite
// must not pass in CI without having run them.
package mcpclients

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/nodetest"
)

var (
	once    sync.Once
	modules string
	failure string
)

// Modules returns the node_modules directory of the clients, installing
// them on first use (scripts/mcp-clients.sh path). It skips t when node or
// npm is missing (fails it under CI) and fails it when the install fails.
func Modules(t testing.TB) string {
	t.Helper()
	nodetest.RequireFor(t, "the MCP client tests (TypeScript SDK, Inspector)")
	once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", filepath.Join(nodetest.Root(), "scripts", "mcp-clients.sh"), "path")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			failure = "scripts/mcp-clients.sh path: " + err.Error() + "\n" + errb.String()
			return
		}
		modules = strings.TrimSpace(out.String())
	})
	if failure != "" {
		t.Fatal(failure)
	}
	return modules
}

// Result is what a client process did.
type Result struct {
	Stdout, Stderr string
	Code           int
}

func run(t testing.TB, env []string, name string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	home := t.TempDir()
	// The Inspector keeps a catalog under HOME: a private one per run.
	cmd.Env = append(os.Environ(), "HOME="+home, "MCP_CATALOG_PATH="+filepath.Join(home, "mcp.json"), "NO_COLOR=1")
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return r
}

// TSReport is what client.mjs saw.
type TSReport struct {
	ServerInfo struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"serverInfo"`
	Tools []map[string]any `json:"tools"`
	Calls []struct {
		Arguments         json.RawMessage `json:"arguments"`
		IsError           bool            `json:"isError"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		Text              string          `json:"text"`
		Thrown            string          `json:"thrown"`
	} `json:"calls"`
	Error string `json:"error"`
}

// TypeScript runs the TypeScript SDK's client: over stdio with target the
// server's command and its arguments, or over streamable HTTP with target
// the URL (and token as the bearer token). It calls the memory tool once
// with each of calls, in order.
func TypeScript(t testing.TB, mods string, token string, calls []any, env []string, mode string, target ...string) TSReport {
	t.Helper()
	b, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, "MCP_CLIENTS_MODULES="+mods, "MCP_CALLS="+string(b), "MCP_TOKEN="+token)
	args := append([]string{filepath.Join(nodetest.Root(), "internal", "mcptool", "testdata", "clients", "client.mjs"), mode}, target...)
	r := run(t, env, "node", args...)
	var rep TSReport
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil || r.Code != 0 {
		t.Fatalf("client.mjs %s: exit %d, %v\nstdout: %s\nstderr: %s", mode, r.Code, err, r.Stdout, r.Stderr)
	}
	return rep
}

// Inspector runs the current MCP Inspector's CLI (`inspector --cli`) with
// args.
func Inspector(t testing.TB, mods string, env []string, args ...string) Result {
	t.Helper()
	launcher := filepath.Join(mods, "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	return run(t, env, "node", append([]string{launcher, "--cli"}, args...)...)
}

// Inspector015 runs the MCP Inspector CLI 0.15 with args.
func Inspector015(t testing.TB, mods string, env []string, args ...string) Result {
	t.Helper()
	cli := filepath.Join(mods, "@modelcontextprotocol", "inspector-cli", "build", "index.js")
	return run(t, env, "node", append([]string{cli}, args...)...)
}
