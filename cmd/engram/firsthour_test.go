package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/engram-memory/engram/internal/mcpclients"
	"github.com/engram-memory/engram/internal/mcptool"
)

// readmeBlock is a fenced block of the README's "Try it" section.
type readmeBlock struct {
	lang string // "sh" or "" (an output shown)
	text string
}

// tryIt returns the fenced blocks of the README's "Try it" section (up to
// "## Documentation"), in order.
func tryIt(t *testing.T) []readmeBlock {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	i, j := strings.Index(readme, "\n## Try it\n"), strings.Index(readme, "\n## Documentation\n")
	if i < 0 || j < i {
		t.Fatal(`README.md has no "## Try it" section before "## Documentation"`)
	}
	var blocks []readmeBlock
	for _, m := range regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```\n").FindAllStringSubmatch(readme[i:j], -1) {
		blocks = append(blocks, readmeBlock{lang: m[1], text: m[2]})
	}
	return blocks
}

// shell runs an sh block of the README as a newcomer would, from the
// repository's root, with `go run ./cmd/engram` as the built binary; the
// `serve` lines are not in script (the test runs serve itself).
func shell(t *testing.T, bin, script string, env []string, s *served) string {
	t.Helper()
	script = strings.ReplaceAll(script, "go run ./cmd/engram", bin)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		logs := ""
		if s != nil {
			logs = s.logs()
		}
		t.Fatalf("README commands failed: %v\n%s\nstdout:\n%s\nstderr:\n%s\nserve's log:\n%s", err, script, stdout.String(), stderr.String(), logs)
	}
	return stdout.String()
}

// splitServe separates the `go run ./cmd/engram serve ...` line of a block
// (its flags) from the other commands.
func splitServe(text string) (serveArgs []string, hasServe bool, rest string) {
	var keep []string
	for _, line := range strings.Split(text, "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		if f := strings.Fields(cmd); len(f) >= 4 && f[0] == "go" && f[2] == "./cmd/engram" && f[3] == "serve" {
			serveArgs, hasServe = f[4:], true
			continue
		}
		keep = append(keep, line)
	}
	return serveArgs, hasServe, strings.Join(keep, "\n")
}

// TestFirstHour is a newcomer's first hour, from the README: the example
// graph imported, serve started, the block of the README printed for the
// README's question; an event published and the status read; then serve
// with the demo model, the example conversation turned into memories, a
// consolidation pass and a summary; then the `memory` tool from the
// TypeScript SDK's client and the MCP Inspector's CLI, over stdio and over
// serve's HTTP endpoint. (promtool test rules and the Helm chart's render
// are in go test ./deploy/.)
func TestFirstHour(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the engram binary")
	}
	bin := buildPlainEngram(t)
	blocks := tryIt(t)
	if len(blocks) != 5 || blocks[0].lang != "sh" || blocks[1].lang != "sh" || blocks[2].lang != "" || blocks[3].lang != "sh" || blocks[4].lang != "sh" {
		t.Fatalf("the README's Try it has changed shape (want sh, sh, the block shown, sh, sh): %d blocks", len(blocks))
	}
	data := filepath.Join(t.TempDir(), "data")

	// 1. Import the example graph, start serve.
	serveArgs, ok, rest := splitServe(blocks[0].text)
	if !ok {
		t.Fatal("the README's first block starts no serve")
	}
	if out := shell(t, bin, rest, []string{"ENGRAM_DATA=" + data}, nil); !strings.HasPrefix(out, "imported 8 nodes and 1 edges") {
		t.Fatalf("import of the example graph: %s", out)
	}
	s := startServe(t, bin, data, nil, serveArgs...)

	// 2. The block for the README's question is the README's block.
	// A line ends its provenance with the day the memory was written (the
	// import's day here): the README shows the day it was written, so days
	// are compared as a placeholder.
	out := undated(shell(t, bin, blocks[1].text, s.env(), s))
	for _, line := range strings.Split(undated(blocks[2].text), "\n") {
		if strings.HasPrefix(line, "- (") || strings.HasPrefix(line, "STANDING") || strings.HasPrefix(line, "RECALLED") || strings.HasPrefix(line, "<") {
			if !strings.Contains(out, line+"\n") {
				t.Errorf("engram inject does not print the README's line\n%s\nit printed:\n%s", line, out)
			}
		}
	}

	// 3. Publish an event the way a platform does, and read the status.
	out = shell(t, bin, blocks[3].text, s.env(), s)
	if !strings.Contains(out, "published turn_started") || !strings.Contains(out, "CONSUMER") {
		t.Errorf("publish and status:\n%s", out)
	}
	s.stop(t)

	// 4. The whole loop with the demo model.
	serveArgs, ok, rest = splitServe(blocks[4].text)
	if !ok || !strings.Contains(strings.Join(serveArgs, " "), "-model demo") {
		t.Fatalf("the README's loop does not start serve -model demo: %v", serveArgs)
	}
	s = startServe(t, bin, data, nil, serveArgs...)
	if !strings.Contains(s.logs(), "DEMO MODEL") {
		t.Errorf("serve -model demo logged no DEMO warning:\n%s", s.logs())
	}
	// The README says to run inject again when extraction has not finished:
	// the block is asked until it holds the rules (bounded), as a newcomer
	// would.
	inject := regexp.MustCompile(`(?m)^go run \./cmd/engram inject .*$`).FindString(rest)
	if inject == "" {
		t.Fatal("the README's loop has no inject")
	}
	out = shell(t, bin, rest, s.env(), s)
	for _, want := range []string{"published turn_ended", "compacted up to message", "<engram-summary>", "## Active task"} {
		if !strings.Contains(out, want) {
			t.Errorf("the README's loop printed no %q:\n%s", want, out)
		}
	}
	rules := []string{"Never use yarn here, we use pnpm.", "Always write the tests with Vitest.", "We decided to keep prices in cents.",
		"The webhook test failed with a signature error."}
	waitFor(t, "the conversation's rules in the block", func() bool {
		block := shell(t, bin, inject, s.env(), s)
		for _, r := range rules {
			if !strings.Contains(block, r) {
				return false
			}
		}
		return true
	})
	waitFor(t, "the consolidator's remembered fact", func() bool {
		return strings.Contains(shell(t, bin, `go run ./cmd/engram inject -project acme/web -session "chat 3" "where is the staging webhook secret?"`, s.env(), s),
			"The staging webhook secret lives in Vault under stripe/staging.")
	})
	s.stop(t)

	// 5. The memory tool from clients nobody here wrote.
	mods := mcpclients.Modules(t)
	calls := []any{map[string]any{"ops": []any{
		map[string]any{"op": "recall", "query": "stripe webhook signature"},
		map[string]any{"op": "stats"},
	}}}
	checkTS := func(where string, rep mcpclients.TSReport) {
		t.Helper()
		if rep.Error != "" || len(rep.Calls) != 1 || rep.Calls[0].IsError || rep.ServerInfo.Name != "engram" {
			t.Fatalf("%s: TypeScript SDK client: %+v", where, rep)
		}
		var resp mcptool.Response
		if err := json.Unmarshal(rep.Calls[0].StructuredContent, &resp); err != nil || len(resp.Results) != 2 || !resp.Results[0].OK ||
			len(resp.Results[0].Memories) == 0 || !strings.Contains(resp.Results[0].Memories[0].Text, "ebhook") {
			t.Fatalf("%s: recall: %s %v", where, rep.Calls[0].StructuredContent, err)
		}
	}
	const ops = `ops=[{"op":"recall","query":"stripe webhook signature"}]`
	checkInspector := func(where string, r mcpclients.Result) {
		t.Helper()
		if r.Code != 0 || !strings.Contains(r.Stdout, `"ok": true`) || strings.Contains(r.Stdout, `"isError": true`) {
			t.Fatalf("%s: Inspector CLI: exit %d\n%s\n%s", where, r.Code, r.Stdout, r.Stderr)
		}
	}
	// Over stdio: engram mcp on the data dir's store (serve is stopped).
	stdio := []string{bin, "mcp", "-data", data, "-project", "acme/web", "-session", "chat 9"}
	checkTS("stdio", mcpclients.TypeScript(t, mods, "", calls, nil, "stdio", stdio...))
	checkInspector("stdio", mcpclients.Inspector(t, mods, nil, append(stdio, "--method", "tools/call", "--tool-name", "memory", "--tool-arg", ops)...))
	// Over HTTP: serve's endpoint behind a token.
	tokens := filepath.Join(t.TempDir(), "tokens")
	const token = "first-hour-token-0123456789abcdef"
	if err := os.WriteFile(tokens, []byte(token+" agent acme/web\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	s = startServe(t, bin, data, []string{"ENGRAM_MCP_ADDR=" + addr, "ENGRAM_MCP_TOKENS=" + tokens})
	url := "http://" + addr + "/mcp?project=acme/web&session=chat-9"
	checkTS("http", mcpclients.TypeScript(t, mods, token, calls, nil, "http", url))
	checkInspector("http", mcpclients.Inspector(t, mods, nil, url, "--transport", "http", "--header", "Authorization: Bearer "+token,
		"--method", "tools/call", "--tool-name", "memory", "--tool-arg", ops))
	s.stop(t)
}

// freeAddr is a 127.0.0.1 address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

var (
	plainBuild    sync.Once
	plainBin      string
	plainBuildErr error
)

// buildPlainEngram builds engram as a user does, without the test worker
// that buildEngram's binary runs in place of the compactor.
func buildPlainEngram(t *testing.T) string {
	t.Helper()
	plainBuild.Do(func() {
		dir, err := os.MkdirTemp("", "engram-plain")
		if err != nil {
			plainBuildErr = err
			return
		}
		tmpDirs = append(tmpDirs, dir)
		bin := filepath.Join(dir, "engram")
		cmd := exec.Command("go", "build", "-o", bin, ".")
		cmd.Stderr = os.Stderr
		if plainBuildErr = cmd.Run(); plainBuildErr == nil {
			plainBin = bin
		}
	})
	if plainBuildErr != nil {
		t.Fatalf("go build: %v", plainBuildErr)
	}
	return plainBin
}

// dayInLine is the day a block line's provenance ends with.
var dayInLine = regexp.MustCompile(`, \d{4}-\d{2}-\d{2}\)`)

// undated replaces the days of a block's provenances with a placeholder.
func undated(block string) string { return dayInLine.ReplaceAllString(block, ", DAY)") }
