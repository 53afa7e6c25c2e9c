package mcptool

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/engram-memory/engram/pkg/memory"
)

// MinTokenChars is the shortest token a tokens file may hold.
const MinTokenChars = 24

// callerKey is where the HTTP handler leaves the request's Caller in its
// auth.TokenInfo.Extra.
const callerKey = "engram.caller"

// Tokens are the bearer tokens of the HTTP endpoint: each names a
// principal, the tenant it is bound to and the projects of that tenant it
// may reach. Look-ups compare SHA-256 digests in constant time against
// every entry.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	sum       [sha256.Size]byte
	principal string
	tenant    string   // the one tenant the token reaches ("": the default tenant)
	projects  []string // nil with all
	all       bool     // every project of the tenant
}

// LoadTokens reads a tokens file (see ParseTokens). The file must be its
// owner's alone (no group or world bits: mode 600 or 400), as it holds
// secrets.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("mcptool: tokens file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("mcptool: tokens file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("mcptool: tokens file %s is open to its group or others (mode %v): chmod 600 it", path, st.Mode().Perm())
	}
	ts, err := ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("mcptool: tokens file %s: %w", path, err)
	}
	return ts, nil
}

// ParseTokens reads tokens, one a line: the token (at least MinTokenChars
// characters, or sha256:<hex of its SHA-256> so that the file need not
// hold the secret), the principal, the projects it may reach
// (comma-separated, or * for every project of its tenant) and, optionally,
// the tenant it is bound to (without it: the default tenant, as every
// token was before tenants). A token reaches one tenant only: the caller
// cannot name another (there is no ?tenant=), so a platform gives each
// of its customers tokens of their own tenant. Blank lines and lines
// starting with # are skipped. Every problem is reported, by line.
//
//	# token                          principal  projects    [tenant]
//	9f3c0a7e51d2b8c4e6a1f0d3b5c7e9a2 alice      shop,admin
//	sha256:<the 64 hex digits of a token's SHA-256>  ci-bot  shop
//	<a token of at least 24 characters>           ops     *
//	<another token>                  acme-bot   *           acme
func ParseTokens(r io.Reader) (*Tokens, error) {
	ts := &Tokens{}
	var errs []error
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, a...)))
		}
		f := strings.Fields(text)
		if len(f) != 3 && len(f) != 4 {
			bad("want three or four fields: token principal projects [tenant], got %d", len(f))
			continue
		}
		var e tokenEntry
		if len(f) == 4 {
			if err := memory.CheckTenant(f[3]); err != nil {
				bad("tenant: %v", err)
				continue
			}
			e.tenant = f[3]
		}
		if hexSum, ok := strings.CutPrefix(f[0], "sha256:"); ok {
			b, err := hex.DecodeString(hexSum)
			if err != nil || len(b) != sha256.Size {
				bad("sha256: wants 64 hex digits")
				continue
			}
			copy(e.sum[:], b)
		} else {
			if len(f[0]) < MinTokenChars {
				bad("the token is shorter than %d characters", MinTokenChars)
				continue
			}
			e.sum = sha256.Sum256([]byte(f[0]))
		}
		if prev, dup := seen[e.sum]; dup {
			bad("the same token as line %d", prev)
			continue
		}
		seen[e.sum] = line
		e.principal = f[1]
		if f[2] == "*" {
			e.all = true
		} else {
			for p := range strings.SplitSeq(f[2], ",") {
				if p = strings.TrimSpace(p); p == "" || p == "*" {
					bad("projects: an empty name or a * among names in %q", f[2])
					e.projects = nil
					break
				}
				e.projects = append(e.projects, p)
			}
			if e.projects == nil {
				continue
			}
		}
		ts.entries = append(ts.entries, e)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 && len(ts.entries) == 0 {
		errs = append(errs, errors.New("no token: without one nobody can reach the endpoint"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ts, nil
}

// lookup finds the entry of token, comparing its digest with every
// entry's in constant time (no early exit).
func (ts *Tokens) lookup(token string) (tokenEntry, bool) {
	sum := sha256.Sum256([]byte(token))
	var (
		found tokenEntry
		hit   int
	)
	for _, e := range ts.entries {
		if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 {
			found, hit = e, 1
		}
	}
	return found, hit == 1
}

// verify is the auth.TokenVerifier of the tokens: the principal becomes
// the TokenInfo's UserID, which the SDK binds an MCP session to (a session
// cannot be continued with another principal's token).
func (ts *Tokens) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	e, ok := ts.lookup(token)
	if !ok {
		return nil, fmt.Errorf("%w: unknown token", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{UserID: e.principal, Extra: map[string]any{entryKey: e}}, nil
}

const entryKey = "engram.token"

// DefaultMaxSessionsPerToken is how many MCP sessions one token may hold
// open at once when HTTPOptions leave it 0: an agent host opens one per
// conversation, and each costs the server memory until it ends or idles
// out.
const DefaultMaxSessionsPerToken = 100

// DefaultSessionTimeout closes an MCP session idle this long.
const DefaultSessionTimeout = 30 * time.Minute

// HTTPOptions configure HTTPHandler.
type HTTPOptions struct {
	// SessionTimeout closes an MCP session idle this long (0:
	// DefaultSessionTimeout).
	SessionTimeout time.Duration
	// MaxSessionsPerToken caps the sessions one token holds open at once
	// (0: DefaultMaxSessionsPerToken); a new session over the cap is
	// refused with 429 Too Many Requests until one ends or idles out.
	MaxSessionsPerToken int
	// Version is the server version reported to clients (empty: the
	// binary's).
	Version string
}

// HTTPHandler serves the `memory` tool over MCP's streamable HTTP
// transport (the SDK's handler, which keeps the Mcp-Session-Id sessions),
// behind bearer tokens (the SDK's auth.RequireBearerToken with tokens):
// no token or an unknown one is 401 with a WWW-Authenticate challenge. The
// project comes from ?project= (optional when the token reaches exactly
// one project) and the session from ?session=; a project the token does
// not reach is 403. Each token has its own MCP server, whose live sessions
// are the token's: a token holding MaxSessionsPerToken sessions gets 429
// for a new one.
func HTTPHandler(t *Tool, tokens *Tokens, opts HTTPOptions) (http.Handler, error) {
	if tokens == nil {
		return nil, errors.New("mcptool: the HTTP endpoint needs tokens")
	}
	if opts.SessionTimeout < 0 || opts.MaxSessionsPerToken < 0 {
		return nil, fmt.Errorf("mcptool: session timeout %v and sessions per token %d must not be negative", opts.SessionTimeout, opts.MaxSessionsPerToken)
	}
	// Build one server now: a bad schema fails here, not at the first call.
	if _, err := NewServer(t, ServerOptions{Version: opts.Version}); err != nil {
		return nil, err
	}
	reg := &registry{tool: t, version: opts.Version, max: opts.MaxSessionsPerToken,
		timeout: opts.SessionTimeout, servers: map[[sha256.Size]byte]*tokenServer{}}
	if reg.max == 0 {
		reg.max = DefaultMaxSessionsPerToken
	}
	if reg.timeout == 0 {
		reg.timeout = DefaultSessionTimeout
	}
	h := mcp.NewStreamableHTTPHandler(reg.serverOf, &mcp.StreamableHTTPOptions{SessionTimeout: reg.timeout})
	authn := auth.RequireBearerToken(tokens.verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	return challenge(authn, scoped(reg, h)), nil
}

// challenge answers a refused token as RFC 6750 asks: a 401 carries
// WWW-Authenticate naming the Bearer scheme (and, for a token that was
// given, error="invalid_token"), so that a client knows what to send.
// The SDK's middleware adds the header only for OAuth metadata, which this
// endpoint does not serve.
func challenge(authn func(http.Handler) http.Handler, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &challengeWriter{ResponseWriter: w, gaveToken: r.Header.Get("Authorization") != ""}
		// The request goes on with the original writer (the SDK's streams
		// need its Flusher); only a refusal is written through cw.
		authn(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
		})).ServeHTTP(cw, r)
	})
}

type challengeWriter struct {
	http.ResponseWriter
	gaveToken bool
}

func (w *challengeWriter) WriteHeader(code int) {
	if code == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		v := `Bearer realm="engram"`
		if w.gaveToken {
			v += `, error="invalid_token", error_description="unknown token"`
		}
		w.Header().Set("WWW-Authenticate", v)
	}
	w.ResponseWriter.WriteHeader(code)
}

// registry holds an MCP server per token, so that the live sessions of a
// token are its server's, and admits a new session only under the cap.
type registry struct {
	tool    *Tool
	version string
	max     int
	timeout time.Duration

	mu      sync.Mutex
	servers map[[sha256.Size]byte]*tokenServer
}

type tokenServer struct {
	srv     *mcp.Server
	opening int // session-creating requests in flight
}

// open admits a request that may create a session for e: it returns a
// func to call once the request is done, or an error when e holds the
// maximum of sessions.
func (g *registry) open(e tokenEntry) (func(), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ts := g.servers[e.sum]
	if ts == nil {
		srv, err := NewServer(g.tool, ServerOptions{Version: g.version})
		if err != nil {
			return nil, err
		}
		ts = &tokenServer{srv: srv}
		g.servers[e.sum] = ts
	}
	// Live sessions are the initialised ones: a POST without a session id
	// that is not an initialize (a client's stray notification) makes a
	// session of its own that the SDK closes when that request ends, and
	// a session being initialised is counted as opening until its
	// response starts.
	live := 0
	for ss := range ts.srv.Sessions() {
		if ss.InitializeParams() != nil {
			live++
		}
	}
	if live+ts.opening >= g.max {
		return nil, fmt.Errorf("%w: this token holds %d open MCP sessions, the most it may (ENGRAM_MCP_SESSIONS_PER_TOKEN); "+
			"end one (HTTP DELETE with its Mcp-Session-Id) or wait until one has been idle for %v", errTooManySessions, live, g.timeout)
	}
	ts.opening++
	return func() {
		g.mu.Lock()
		ts.opening--
		g.mu.Unlock()
	}, nil
}

var errTooManySessions = errors.New("too many sessions")

// serverOf is the SDK handler's server for a new session: the token's.
func (g *registry) serverOf(r *http.Request) *mcp.Server {
	ti := auth.TokenInfoFromContext(r.Context())
	if ti == nil {
		return nil
	}
	e, ok := ti.Extra[entryKey].(tokenEntry)
	if !ok {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if ts := g.servers[e.sum]; ts != nil {
		return ts.srv
	}
	return nil
}

// sessionHeader is the streamable HTTP transport's session header.
const sessionHeader = "Mcp-Session-Id"

// scoped resolves the request's project and session against its token,
// leaves the Caller in the token info for the tool and, for a request that
// opens a session (a POST without Mcp-Session-Id), applies the token's
// session cap.
func scoped(reg *registry, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ti := auth.TokenInfoFromContext(r.Context())
		e, ok := ti.Extra[entryKey].(tokenEntry)
		if !ok {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		q := r.URL.Query()
		project, session := strings.TrimSpace(q.Get("project")), strings.TrimSpace(q.Get("session"))
		if project == "" && len(e.projects) == 1 {
			project = e.projects[0]
		}
		if project == "" {
			http.Error(w, "name the project: ?project=<id>", http.StatusBadRequest)
			return
		}
		if !e.all && !slices.Contains(e.projects, project) {
			http.Error(w, "this token does not reach the project", http.StatusForbidden)
			return
		}
		ti.Extra[callerKey] = Caller{Tenant: e.tenant, Project: project, Session: session, Principal: e.principal, WritesGlobal: e.all}
		if r.Method == http.MethodPost && r.Header.Get(sessionHeader) == "" {
			done, err := reg.open(e)
			if errors.Is(err, errTooManySessions) {
				http.Error(w, err.Error(), http.StatusTooManyRequests)
				return
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			// The request stops counting as opening once its response
			// starts: by then the SDK has registered the session it
			// created (counted live from then on); counted both ways until
			// the handler returns, a client's next request (its initialized
			// notification or a second session) could be refused.
			ow := &openingWriter{ResponseWriter: w, done: sync.OnceFunc(done)}
			defer ow.done()
			next.ServeHTTP(ow, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// openingWriter calls done when the response starts (WriteHeader, or the
// first Write or Flush).
type openingWriter struct {
	http.ResponseWriter
	done func()
}

func (w *openingWriter) WriteHeader(code int) {
	w.done()
	w.ResponseWriter.WriteHeader(code)
}

func (w *openingWriter) Write(b []byte) (int, error) {
	w.done()
	return w.ResponseWriter.Write(b)
}

func (w *openingWriter) Flush() {
	w.done()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *openingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
