package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/engram-memory/engram/internal/mcptool"
	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/pkg/events"
)

const mcpSeed = `{"type":"node","id":"rule1","subkind":"preference","scope":"project","project_id":"acme","label":"Use pnpm, never npm","asserted_by":"user","source":"user","confidence":0.95}
{"type":"node","id":"dec1","subkind":"decision","project_id":"acme","label":"Deploys run through make release","body":"The release target tags the image.","paths":["Makefile"]}
{"type":"node","id":"other1","subkind":"decision","project_id":"zeta","label":"Zeta deploys by hand","body":"Zeta has no release target."}
{"type":"edge","src":"dec1","dst":"rule1","relation":"relates_to"}
`

// seedDataDir imports mcpSeed into a fresh SQLite data dir (embedded).
func seedDataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("ENGRAM_DATA", dir)
	t.Setenv("ENGRAM_STORE", "sqlite")
	seed := filepath.Join(dir, "seed.jsonl")
	if err := os.WriteFile(seed, []byte(mcpSeed), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	if code := run([]string{"memory", "import", seed}, &out, &errOut); code != 0 {
		t.Fatalf("import: exit %d: %s", code, errOut.String())
	}
	return dir
}

// agent starts `engram mcp` as an agent host does (a child process over
// stdio) with the SDK's command transport.
func agent(t *testing.T, bin string, env []string, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"mcp", "-log-format", "json"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("engram mcp %v: %v", args, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callMemory(t *testing.T, cs *mcp.ClientSession, ops ...mcptool.Op) []mcptool.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcptool.ToolName, Arguments: mcptool.Request{Ops: ops}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	var resp mcptool.Response
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &resp); err != nil {
		t.Fatal(err)
	}
	return resp.Results
}

// recalled reports whether a recall result holds id. (On three memories
// the user's rule, of higher confidence, may rank above the decision.)
func recalled(r mcptool.Result, id string) bool {
	for _, m := range r.Memories {
		if m.ID == id {
			return true
		}
	}
	return false
}

// TestMCPStdio runs `engram mcp` on a data dir as an agent's child process.
func TestMCPStdio(t *testing.T) {
	bin := buildEngram(t)
	dir := seedDataDir(t)
	cs := agent(t, bin, []string{"ENGRAM_DATA=" + dir, "ENGRAM_STORE=sqlite"}, "-project", "acme", "-session", "s1")
	rs := callMemory(t, cs,
		mcptool.Op{Op: mcptool.OpRecall, Query: "which make target tags the release image?"},
		mcptool.Op{Op: mcptool.OpNeighbours, ID: "other1"},
		mcptool.Op{Op: mcptool.OpStats})
	if !rs[0].OK || !recalled(rs[0], "dec1") || recalled(rs[0], "other1") {
		t.Fatalf("recall: %+v", rs[0])
	}
	if rs[1].OK || rs[1].Error != `memory "other1" not found` {
		t.Fatalf("another project's id: %+v", rs[1])
	}
	if !rs[2].OK || rs[2].Stats.Counts.Live != 2 || rs[2].Stats.Session.ID != "s1" || !rs[2].Stats.Ready {
		t.Fatalf("stats: %+v", rs[2].Stats)
	}
	// Without a project there is nothing to serve.
	out, err := exec.Command(bin, "mcp").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "-project is required") {
		t.Fatalf("engram mcp without -project: %v %s", err, out)
	}
}

// TestServeMCPEndpoint runs `engram serve` with the endpoint on, reaches it
// with the SDK's HTTP client (no token, then the right one), and through
// `engram mcp -remote` as an agent would while serve holds the store.
func TestServeMCPEndpoint(t *testing.T) {
	bin := buildEngram(t)
	dir := seedDataDir(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	const token = "serve-e2e-token-0123456789abcdef"
	if err := os.WriteFile(tokens, []byte(token+" agent acme\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	s := startServe(t, bin, dir, []string{"ENGRAM_MCP_ADDR=" + addr, "ENGRAM_MCP_TOKENS=" + tokens})
	url := "http://" + addr + "/mcp"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if _, err := mcptool.Dial(ctx, url+"?project=acme", "", "test"); err == nil {
		t.Fatal("connected without a token")
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: status %d", resp.StatusCode)
	}

	// The store is serve's: a direct engram mcp is told to use -remote.
	out, err := exec.Command(bin, "mcp", "-project", "acme", "-data", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "engram mcp -remote") {
		t.Fatalf("engram mcp beside serve: %v %s", err, out)
	}

	// The tool's edits are announced like the workers' (memory_changed).
	nc := s.connect(t, natsauth.RoleAdmin)
	changed, err := nc.SubscribeSync("engram.out.memory_changed.>")
	if err != nil {
		t.Fatal(err)
	}
	cs := agent(t, bin, []string{"ENGRAM_MCP_TOKEN=" + token}, "-project", "acme", "-session", "s9", "-remote", url)
	rs := callMemory(t, cs,
		mcptool.Op{Op: mcptool.OpRecall, Query: "which make target tags the release image?"},
		mcptool.Op{Op: mcptool.OpForget, ID: "dec1", Reason: "moved to CI"},
		mcptool.Op{Op: mcptool.OpStats})
	if !rs[0].OK || !recalled(rs[0], "dec1") || !rs[1].OK || rs[2].Stats.Counts.Archived != 1 || rs[2].Stats.Session.ID != "s9" {
		t.Fatalf("through serve: %+v", rs)
	}
	msg, err := changed.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("no memory_changed after the tool's forget: %v", err)
	}
	ev, err := events.Decode(msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := events.PayloadAs[events.MemoryChanged](ev)
	if err != nil || ev.ProjectID != "acme" || ev.SessionID != "s9" || len(mc.Changes) != 1 ||
		mc.Changes[0] != (events.Change{ID: "dec1", Kind: events.ChangeArchived}) {
		t.Fatalf("memory_changed of the tool's forget: %+v %+v %v", ev, mc, err)
	}
	_ = cs.Close()
	t0 := time.Now()
	s.stop(t)
	t.Logf("serve stopped in %s", time.Since(t0).Round(time.Millisecond))
}
