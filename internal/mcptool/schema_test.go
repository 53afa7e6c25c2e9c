package mcptool

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/engram-memory/engram/internal/buildinfo"
	"github.com/engram-memory/engram/internal/storetest"
)

// listedTool is the memory tool as a client lists it, decoded from the
// wire into plain JSON values.
func listedTool(t *testing.T, cs *mcp.ClientSession) map[string]any {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 1 || res.Tools[0].Name != ToolName {
		t.Fatalf("tools: %+v", res.Tools)
	}
	b, err := json.Marshal(res.Tools[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// typeLists finds every "type" of a schema that is not one string (a type
// list such as ["null", "array"]), with its path.
func typeLists(path string, v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			if _, isString := c.(string); k == "type" && !isString {
				*out = append(*out, path+".type")
			}
			typeLists(path+"."+k, c, out)
		}
	case []any:
		for _, c := range v {
			typeLists(path+"[]", c, out)
		}
	}
}

// TestSchemaIsExact: the tool's input and output schemas hold no type
// list (no null: the MCP Inspector's CLI and strict hosts refuse them),
// ops is a required array of 1 to MaxOps operations, label and body are
// strings, and the tool carries the specification's annotations.
func TestSchemaIsExact(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite)
	tool := listedTool(t, connectStdio(t, f, shop))
	var lists []string
	typeLists("inputSchema", tool["inputSchema"], &lists)
	typeLists("outputSchema", tool["outputSchema"], &lists)
	if len(lists) > 0 {
		t.Errorf("type lists (nullable types) in the schemas: %v", lists)
	}
	in := tool["inputSchema"].(map[string]any)
	ops := in["properties"].(map[string]any)["ops"].(map[string]any)
	if ops["type"] != "array" || ops["minItems"] != 1.0 || ops["maxItems"] != float64(MaxOps) {
		t.Errorf("ops: %v", ops)
	}
	if req, _ := in["required"].([]any); len(req) != 1 || req[0] != "ops" {
		t.Errorf("required: %v", in["required"])
	}
	item := ops["items"].(map[string]any)
	props := item["properties"].(map[string]any)
	for _, name := range []string{"label", "body", "query", "id"} {
		if typ := props[name].(map[string]any)["type"]; typ != "string" {
			t.Errorf("%s: type %v, want string", name, typ)
		}
	}
	if typ := props["explain"].(map[string]any)["type"]; typ != "boolean" {
		t.Errorf("explain: type %v, want boolean", typ)
	}
	if h := props["hops"].(map[string]any); h["minimum"] != 1.0 || h["maximum"] != 3.0 {
		t.Errorf("hops: %v", h)
	}
	if req, _ := item["required"].([]any); len(req) != 1 || req[0] != "op" {
		t.Errorf("an operation's required: %v", item["required"])
	}
	out := tool["outputSchema"].(map[string]any)
	if out["type"] != "object" {
		t.Errorf("outputSchema: %v", out)
	}
	// recall's why (explain): an object whose channels are an array of
	// objects, with no null anywhere (checked above).
	why := dig(t, out, "properties", "results", "items", "properties", "memories", "items", "properties", "why")
	if why["type"] != "object" {
		t.Errorf("why: %v", why)
	}
	if ch := dig(t, why, "properties", "channels"); ch["type"] != "array" || dig(t, ch, "items")["type"] != "object" {
		t.Errorf("why.channels: %v", ch)
	}
	if p := dig(t, why, "properties", "prior", "properties", "staleness"); p["type"] != "number" {
		t.Errorf("why.prior.staleness: %v", p)
	}
	ann, _ := tool["annotations"].(map[string]any)
	want := map[string]any{"title": "Engram memory", "readOnlyHint": false, "destructiveHint": true,
		"idempotentHint": false, "openWorldHint": false}
	for k, v := range want {
		if ann[k] != v {
			t.Errorf("annotation %s = %v, want %v (annotations %v)", k, ann[k], v, ann)
		}
	}
}

// TestNullRefused: a null where the schema wants an array or a string is
// refused by validation, not taken as "not given".
func TestNullRefused(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite)
	cs := connectStdio(t, f, shop)
	for _, args := range []string{
		`{"ops": null}`,
		`{"ops": [{"op": "update", "id": "x", "label": null}]}`,
		`{"ops": [{"op": "update", "id": "x", "body": null}]}`,
		`{"ops": [{"op": "neighbours", "id": "x", "hops": 9}]}`,
		`{}`,
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolName, Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		if !res.IsError || !strings.Contains(contentText(res), "validating") {
			t.Errorf("%s: accepted: %s", args, contentText(res))
		}
	}
}

// TestServerInfoVersion: the server reports the binary's version, not a
// placeholder.
func TestServerInfoVersion(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite)
	for name, cs := range map[string]*mcp.ClientSession{
		"stdio": connectStdio(t, f, shop),
		"http":  connectHTTP(t, httpServer(t, f).URL+"/mcp?project=shop", shopToken),
	} {
		info := cs.InitializeResult().ServerInfo
		if info.Name != "engram" || info.Version != buildinfo.Version() || info.Version == "" {
			t.Errorf("%s: serverInfo %+v, want engram %s", name, info, buildinfo.Version())
		}
	}
}

// TestSessionsPerToken: a token holds at most MaxSessionsPerToken open
// sessions; one more is refused with 429 and a message that says why, other
// tokens are not affected, and a session ended (DELETE) or idle past the
// timeout makes room again.
func TestSessionsPerToken(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite)
	tokens, err := LoadTokens(tokensFile(t))
	if err != nil {
		t.Fatal(err)
	}
	const idle = 400 * time.Millisecond
	h, err := HTTPHandler(f.tool, tokens, HTTPOptions{MaxSessionsPerToken: 2, SessionTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	url := srv.URL + "/mcp?project=shop"
	ctx := context.Background()
	a, err := dialHTTP(ctx, url, shopToken)
	if err != nil {
		t.Fatal(err)
	}
	b, err := dialHTTP(ctx, url, shopToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dialHTTP(ctx, url, shopToken); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("third session: %v, want Too Many Requests", err)
	}
	// On the wire: 429, and a body that says what to do.
	code, body := initialize(t, url, shopToken)
	if code != http.StatusTooManyRequests || !strings.Contains(body, "this token holds 2 open MCP sessions") ||
		!strings.Contains(body, "ENGRAM_MCP_SESSIONS_PER_TOKEN") {
		t.Fatalf("third session on the wire: %d %q", code, body)
	}
	// Another token has its own sessions.
	other := connectHTTP(t, url, opsToken)
	call(t, other, Op{Op: OpStats})
	// Ending a session (the client's DELETE) makes room at once.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := dialHTTP(ctx, url, shopToken)
	if err != nil {
		t.Fatalf("after a DELETE: %v", err)
	}
	call(t, c, Op{Op: OpStats})
	// Idle sessions expire: b and c stop talking; once the server has
	// closed them (asynchronously, so wait), a new session is admitted.
	var d *mcp.ClientSession
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err = dialHTTP(ctx, url, shopToken)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "Too Many Requests") || time.Now().After(deadline) {
			t.Fatalf("after %v idle: %v", idle, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	call(t, d, Op{Op: OpStats})
	_ = d.Close()
	// The expired session is gone: using it is "session not found".
	if _, err := b.CallTool(ctx, &mcp.CallToolParams{Name: ToolName, Arguments: Request{Ops: []Op{{Op: OpStats}}}}); err == nil {
		t.Fatal("an expired session still answered")
	}
	_ = b.Close()
	_ = c.Close()
	// A request that opens no session is not capped.
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+shopToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		t.Fatal("a GET without a session was capped")
	}
}

// initialize posts an MCP initialize request with token and returns the
// status and body.
func initialize(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// dig follows keys through nested schema objects.
func dig(t *testing.T, m map[string]any, keys ...string) map[string]any {
	t.Helper()
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			t.Fatalf("schema: no object at %q in %v", k, m)
		}
		m = next
	}
	return m
}
