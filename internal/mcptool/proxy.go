package mcptool

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

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

// DefaultKeepAlive is how often Dial's session pings serve: well inside
// serve's idle timeout (HTTPOptions.SessionTimeout, 30 minutes), whose
// timer only requests reset, so that an agent quiet for an hour still has
// its session.
const DefaultKeepAlive = 5 * time.Minute

// DialOption configures Dial.
type DialOption func(*Remote)

// WithKeepAlive sets the ping interval of the session (DefaultKeepAlive;
// tests shorten it together with serve's session timeout).
func WithKeepAlive(d time.Duration) DialOption { return func(r *Remote) { r.keepAlive = d } }

// Remote is a session with a running serve's endpoint that outlives the
// server's idle timeout: it pings (the SDK's keepalive) and, when serve has
// dropped the session anyway (a restart, a missed ping), dials again once
// and repeats the call. The call is repeated only when the session is
// gone: missing on serve (a 404: the call never reached the tool) or closed
// (the SDK closes it after three failed pings; a call cut off in flight by
// that close may run twice, which the operations tolerate: they are
// idempotent but for a link's reinforcement and recall's access count).
type Remote struct {
	endpoint, token, version string
	keepAlive                time.Duration

	mu sync.Mutex
	cs *mcp.ClientSession
}

// Dial connects to a running serve's endpoint (RemoteURL) with a bearer
// token, as the SDK's streamable HTTP client.
func Dial(ctx context.Context, endpoint, token string, version string, opts ...DialOption) (*Remote, error) {
	r := &Remote{endpoint: endpoint, token: token, version: version, keepAlive: DefaultKeepAlive}
	for _, o := range opts {
		o(r)
	}
	cs, err := r.dial(ctx)
	if err != nil {
		return nil, err
	}
	r.cs = cs
	return r, nil
}

func (r *Remote) dial(ctx context.Context) (*mcp.ClientSession, error) {
	tr := &mcp.StreamableClientTransport{Endpoint: r.endpoint, HTTPClient: &http.Client{Transport: bearerTransport{r.token}}}
	c := mcp.NewClient(&mcp.Implementation{Name: "engram-mcp", Version: r.version},
		&mcp.ClientOptions{KeepAlive: r.keepAlive, KeepAliveFailureThreshold: 3})
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		return nil, fmt.Errorf("mcptool: connect to %s: %w", redactQuery(r.endpoint), err)
	}
	return cs, nil
}

func (r *Remote) session() *mcp.ClientSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cs
}

// redial replaces the session old with a new one, unless another call
// has already replaced it.
func (r *Remote) redial(ctx context.Context, old *mcp.ClientSession) (*mcp.ClientSession, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cs != old {
		return r.cs, nil
	}
	cs, err := r.dial(ctx)
	if err != nil {
		return nil, err
	}
	_ = old.Close()
	r.cs = cs
	return cs, nil
}

// gone says err means the session no longer exists.
func gone(err error) bool {
	return errors.Is(err, mcp.ErrSessionMissing) || errors.Is(err, mcp.ErrConnectionClosed)
}

// CallTool calls a tool of the remote, dialling again once if serve has
// dropped the session.
func (r *Remote) CallTool(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	cs := r.session()
	res, err := cs.CallTool(ctx, p)
	if err == nil || !gone(err) {
		return res, err
	}
	if cs, err = r.redial(ctx, cs); err != nil {
		return nil, err
	}
	return cs.CallTool(ctx, p)
}

// Close ends the session.
func (r *Remote) Close() error { return r.session().Close() }

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
func NewProxy(ctx context.Context, remote *Remote, version string) (*mcp.Server, error) {
	var tool *mcp.Tool
	for t, err := range remote.session().Tools(ctx, nil) {
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
	s.AddTool(&mcp.Tool{Name: tool.Name, Title: tool.Title, Description: tool.Description, InputSchema: tool.InputSchema, OutputSchema: tool.OutputSchema,
		Annotations: tool.Annotations},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return remote.CallTool(ctx, &mcp.CallToolParams{Name: ToolName, Arguments: req.Params.Arguments})
		})
	return s, nil
}
