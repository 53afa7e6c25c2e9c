package mcptool

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RemoteURL is endpoint (a serve's .../mcp) with the project and session
// of the caller as query parameters.
func RemoteURL(endpoint string, c Caller) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("mcptool: remote %q: want an http(s) URL such as http://127.0.0.1:7475/mcp", endpoint)
	}
	q := u.Query()
	q.Set("project", c.Project)
	if c.Session != "" {
		q.Set("session", c.Session)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Dial connects to a running serve's endpoint (RemoteURL) with a bearer
// token, as the SDK's streamable HTTP client.
func Dial(ctx context.Context, endpoint, token string, version string) (*mcp.ClientSession, error) {
	tr := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearerTransport{token}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "engram-mcp", Version: version}, nil).Connect(ctx, tr, nil)
	if err != nil {
		return nil, fmt.Errorf("mcptool: connect to %s: %w", redactQuery(endpoint), err)
	}
	return cs, nil
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func redactQuery(s string) string {
	if u, err := url.Parse(s); err == nil {
		u.RawQuery = ""
		return u.String()
	}
	return s
}

// NewProxy returns a server whose `memory` tool forwards every call to
// remote (a session with a running serve's endpoint): `engram mcp -remote`
// serves an agent over stdio while serve holds the store. The tool's
// description and schema are the remote's.
func NewProxy(ctx context.Context, remote *mcp.ClientSession, version string) (*mcp.Server, error) {
	var tool *mcp.Tool
	for t, err := range remote.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcptool: list the remote tools: %w", err)
		}
		if t.Name == ToolName {
			tool = t
		}
	}
	if tool == nil {
		return nil, fmt.Errorf("mcptool: the remote serves no %q tool", ToolName)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "engram", Title: "Engram memory", Version: version}, nil)
	s.AddTool(&mcp.Tool{Name: tool.Name, Title: tool.Title, Description: tool.Description, InputSchema: tool.InputSchema, OutputSchema: tool.OutputSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return remote.CallTool(ctx, &mcp.CallToolParams{Name: ToolName, Arguments: req.Params.Arguments})
		})
	return s, nil
}
