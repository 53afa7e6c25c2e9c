package mcptool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/engram-memory/engram/internal/buildinfo"
	"github.com/engram-memory/engram/internal/mcpclients"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/llm/hashembed"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// stdioServerArg, as the first argument followed by a directory, makes the
// test binary an MCP server over stdio instead of running tests: the
// `memory` tool over a SQLite store in that directory seeded with the
// fixture, for clients that start their server as a process (as `engram
// mcp` is started). An argument, not a variable: every client passes its
// server's arguments, not every one its environment.
const stdioServerArg = "engram-mcptool-stdio-server"

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == stdioServerArg {
		if err := serveStdio(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "stdio server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func serveStdio(dir string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "engram.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	emb := hashembed.New(0)
	for _, n := range fixtureNodes() {
		if n.node.Reach == "" {
			n.node.Reach = memory.ReachHere
		}
		if _, err := st.Upsert(ctx, n.node); err != nil {
			return err
		}
	}
	if _, err := memory.EmbedPending(ctx, st, emb, 64); err != nil {
		return err
	}
	tool, err := New(st, emb, Config{MinConfidence: 0.3, CrossProject: true})
	if err != nil {
		return err
	}
	srv, err := NewServer(tool, ServerOptions{Caller: &shop})
	if err != nil {
		return err
	}
	if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// stdioCommand is the command line of a stdio server (this test binary in
// server mode) and its environment.
func stdioCommand(t *testing.T) ([]string, []string) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, stdioServerArg, t.TempDir()}, nil
}

// TestTypeScriptSDK drives the tool with the official TypeScript SDK's
// client over stdio and streamable HTTP: the server's version, the tool's
// annotations and exact schemas as that client lists them, and calls whose
// structured answers the client validates against the output schema.
func TestTypeScriptSDK(t *testing.T) {
	mods := mcpclients.Modules(t)
	calls := []any{
		map[string]any{"ops": []any{
			map[string]any{"op": "recall", "query": "stripe webhook signature", "explain": true},
			map[string]any{"op": "stats"},
			map[string]any{"op": "timeline", "limit": 5},
			map[string]any{"op": "update", "id": "no-such-memory", "label": "a new label"},
		}},
		map[string]any{"ops": nil},
	}
	check := func(t *testing.T, rep mcpclients.TSReport) {
		if rep.Error != "" {
			t.Fatalf("client: %s", rep.Error)
		}
		if rep.ServerInfo.Name != "engram" || rep.ServerInfo.Version != buildinfo.Version() {
			t.Errorf("serverInfo %+v, want engram %s", rep.ServerInfo, buildinfo.Version())
		}
		if len(rep.Tools) != 1 || rep.Tools[0]["name"] != ToolName {
			t.Fatalf("tools: %v", rep.Tools)
		}
		var lists []string
		typeLists("inputSchema", rep.Tools[0]["inputSchema"], &lists)
		typeLists("outputSchema", rep.Tools[0]["outputSchema"], &lists)
		if len(lists) > 0 {
			t.Errorf("type lists in the schemas: %v", lists)
		}
		ann, _ := rep.Tools[0]["annotations"].(map[string]any)
		if ann["destructiveHint"] != true || ann["openWorldHint"] != false || ann["readOnlyHint"] != false || ann["title"] != "Engram memory" {
			t.Errorf("annotations: %v", ann)
		}
		if len(rep.Calls) != 2 {
			t.Fatalf("calls: %+v", rep.Calls)
		}
		first := rep.Calls[0]
		if first.Thrown != "" || first.IsError {
			t.Fatalf("first call: thrown %q, error %v: %s", first.Thrown, first.IsError, first.Text)
		}
		var resp Response
		if err := json.Unmarshal(first.StructuredContent, &resp); err != nil || len(resp.Results) != 4 {
			t.Fatalf("structured content %s: %v", first.StructuredContent, err)
		}
		if r := resp.Results[0]; !r.OK || len(r.Memories) == 0 || !strings.Contains(r.Memories[0].Text, "webhook") {
			t.Errorf("recall: %+v", r)
		} else if w := r.Memories[0].Why; w == nil || w.Rank != 1 || len(w.Channels) == 0 {
			t.Errorf("recall with explain: why %+v", w)
		}
		if r := resp.Results[1]; !r.OK || r.Stats == nil || r.Stats.Project != "shop" {
			t.Errorf("stats: %+v", r)
		}
		if r := resp.Results[2]; !r.OK {
			t.Errorf("timeline: %+v", r)
		}
		if r := resp.Results[3]; r.OK || !strings.Contains(r.Error, "not found") {
			t.Errorf("update of an unknown id: %+v", r)
		}
		if null := rep.Calls[1]; !null.IsError || !strings.Contains(null.Text, "validating") {
			t.Errorf("ops: null accepted: %+v", null)
		}
	}
	t.Run("stdio", func(t *testing.T) {
		cmd, env := stdioCommand(t)
		check(t, mcpclients.TypeScript(t, mods, "", calls, env, "stdio", cmd...))
	})
	t.Run("http", func(t *testing.T) {
		f := newFixture(t, storetest.OpenSQLite)
		srv := httpServer(t, f)
		check(t, mcpclients.TypeScript(t, mods, shopToken, calls, nil, "http", srv.URL+"/mcp?project=shop&session=s1"))
	})
}

// TestInspector drives the tool with the MCP Inspector's CLI, over stdio
// and streamable HTTP: its schema portability check finds nothing, and it
// calls the tool with an array argument. The Inspector CLI 0.15, which
// parses an argument as JSON only when its schema type is exactly "array",
// calls it too (it could not while ops was typed ["null", "array"]).
func TestInspector(t *testing.T) {
	mods := mcpclients.Modules(t)
	const ops = `ops=[{"op":"recall","query":"stripe webhook signature","explain":true},{"op":"stats"}]`
	type target struct {
		args []string
		env  []string
	}
	targets := map[string]func(t *testing.T) target{
		"stdio": func(t *testing.T) target {
			cmd, env := stdioCommand(t)
			return target{cmd, env}
		},
		"http": func(t *testing.T) target {
			srv := httpServer(t, newFixture(t, storetest.OpenSQLite))
			return target{args: []string{srv.URL + "/mcp?project=shop&session=s1", "--transport", "http",
				"--header", "Authorization: Bearer " + shopToken}}
		},
	}
	// The Inspector CLI 0.15 has no --header: it reaches only stdio servers
	// here (the HTTP endpoint wants a bearer token).
	called := func(t *testing.T, name string, r mcpclients.Result) {
		t.Helper()
		if r.Code != 0 {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", name, r.Code, r.Stdout, r.Stderr)
		}
		var res struct {
			IsError           bool     `json:"isError"`
			StructuredContent Response `json:"structuredContent"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
			t.Fatalf("%s: %v\nstdout: %s", name, err, r.Stdout)
		}
		rs := res.StructuredContent.Results
		if res.IsError || len(rs) != 2 || !rs[0].OK || len(rs[0].Memories) == 0 || rs[0].Memories[0].Why == nil ||
			len(rs[0].Memories[0].Why.Channels) == 0 || !rs[1].OK || rs[1].Stats.Project != "shop" {
			t.Fatalf("%s: %s", name, r.Stdout)
		}
	}
	for name, mk := range targets {
		t.Run(name, func(t *testing.T) {
			tg := mk(t)
			list := mcpclients.Inspector(t, mods, tg.env, append(append([]string{"--strict"}, tg.args...), "--method", "tools/list")...)
			if list.Code != 0 || strings.Contains(list.Stderr, "Warning") || strings.Contains(list.Stderr, "Error:") {
				t.Errorf("inspector --strict tools/list: exit %d\nstderr: %s", list.Code, list.Stderr)
			}
			if !strings.Contains(list.Stdout, `"destructiveHint": true`) {
				t.Errorf("inspector tools/list shows no annotations: %s", list.Stdout)
			}
			called(t, "inspector", mcpclients.Inspector(t, mods, tg.env,
				append(tg.args, "--method", "tools/call", "--tool-name", ToolName, "--tool-arg", ops)...))
			if name == "stdio" {
				called(t, "inspector 0.15", mcpclients.Inspector015(t, mods, tg.env,
					append(tg.args, "--method", "tools/call", "--tool-name", ToolName, "--tool-arg", ops)...))
			}
		})
	}
}
