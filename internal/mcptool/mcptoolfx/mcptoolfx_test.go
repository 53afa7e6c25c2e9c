package mcptoolfx_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/mcptool"
	"github.com/engram-memory/engram/internal/mcptool/mcptoolfx"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

const token = "fx-test-token-0123456789abcdef"

func start(t *testing.T, cfg config.Config, st memory.Store) *mcptoolfx.Endpoint {
	t.Helper()
	var ep *mcptoolfx.Endpoint
	app := fxtest.New(t,
		fx.Supply(cfg, zap.NewNop()),
		fx.Provide(func() memory.Store { return st }, func() *llm.Client { return nil }),
		mcptoolfx.Module(),
		fx.Populate(&ep),
	)
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	return ep
}

func TestEndpointOffByDefault(t *testing.T) {
	cfg := config.Default()
	if ep := start(t, cfg, storetest.OpenSQLite(t)); ep.URL() != "" {
		t.Fatalf("the endpoint is on by default: %s", ep.URL())
	}
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

func TestEndpointServesTheTool(t *testing.T) {
	st := storetest.OpenSQLite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := st.Upsert(ctx, memory.Node{Subkind: memory.Decision, ProjectID: "shop", Label: "Stripe Checkout for payments"}); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(token+" agent shop\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.MCP = config.MCP{Addr: "127.0.0.1:0", Tokens: tokens}
	ep := start(t, cfg, st)
	if !strings.HasSuffix(ep.URL(), "/mcp") {
		t.Fatalf("url %q", ep.URL())
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: ep.URL() + "?session=s1", HTTPClient: &http.Client{Transport: bearer(token)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcptool.ToolName,
		Arguments: mcptool.Request{Ops: []mcptool.Op{{Op: mcptool.OpStats}, {Op: mcptool.OpRecall, Query: "Stripe Checkout"}}}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	var resp mcptool.Response
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &resp); err != nil {
		t.Fatal(err)
	}
	// The memory has no vector yet: stats says so and recall waits, with
	// the hashing embedder the configuration names (no embedding model).
	s := resp.Results[0].Stats
	if !resp.Results[0].OK || s.Project != "shop" || s.Session.ID != "s1" || s.Counts.Live != 1 || s.Counts.Pending != 1 ||
		resp.Results[1].OK {
		t.Fatalf("answer: %+v", resp)
	}
}

func TestBadTokensFileStopsTheStart(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("short agent shop\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.MCP = config.MCP{Addr: "127.0.0.1:0", Tokens: tokens}
	st := storetest.OpenSQLite(t)
	app := fx.New(fx.NopLogger, fx.Supply(cfg, zap.NewNop()),
		fx.Provide(func() memory.Store { return st }, func() *llm.Client { return nil }), mcptoolfx.Module())
	if err := app.Err(); err == nil || !strings.Contains(err.Error(), "line 1: the token is shorter") {
		t.Fatalf("error %v", err)
	}
}
