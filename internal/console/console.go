package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/internal/mcptool"
	"github.com/engram-memory/engram/internal/runner/dlq"
	"github.com/engram-memory/engram/pkg/memory"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Store is what the console reads and changes of the memory store (the
// whole contract: it shows everything a project holds).
type Store interface {
	memory.Store
}

// Embedder embeds search queries (the injector's recall needs the vector).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Model() string
}

// Ops is what the operations page reads and does: the streams and
// consumers (what `engram status` shows), the readiness checks and the
// dead letters. Nil: the page says the process has no bus.
type Ops interface {
	Inspect(ctx context.Context) (health.TopologyState, error)
	Checks(ctx context.Context) health.Report
	DLQ
}

// DLQ is the dead-letter stream (dlq.Store has it).
type DLQ interface {
	List(ctx context.Context, from uint64, limit int) ([]dlq.Letter, error)
	Get(ctx context.Context, seq uint64) (dlq.Letter, error)
	Replay(ctx context.Context, seq uint64) error
	Delete(ctx context.Context, seq uint64) error
}

var _ DLQ = (*dlq.Store)(nil)

// Search holds the recall settings of the injector, so that the console's
// search ranks as the memory block does.
type Search struct {
	Ranking       *memory.Ranking
	MinConfidence float64
	CrossProject  bool
}

// Deps are what the console runs on.
type Deps struct {
	Store    Store
	Tool     *mcptool.Tool // edit, pin, forget and restore go through the memory tool's rules
	Embedder Embedder
	Search   Search
	// Tokens are the tokens file's (mcptool.LoadTokens); nil: only the
	// operator logs in.
	Tokens *mcptool.Tokens
	// AdminToken is the operator's token (EnsureAdminToken).
	AdminToken string
	Ops        Ops
	// Eraser erases a scope (the erase page); nil: the page says erasure
	// is not available in this build.
	Eraser Eraser
	Log    *zap.Logger
	Now    func() time.Time
}

// Options are the console's settings.
type Options struct {
	// BaseURL is where people open the console (the login link names it).
	BaseURL string
	// LinkFile holds the current one-time login link ("": kept in memory
	// only, LoginLink returns it).
	LinkFile string
	// Secure marks every cookie Secure (the console is served over TLS);
	// a request that arrives over TLS gets Secure cookies anyway.
	Secure bool
	// SessionTTL is how long a login lasts (0: 12 hours).
	SessionTTL time.Duration
}

// Server is the memory console: server-rendered pages over the store.
type Server struct {
	st       Store
	tool     *mcptool.Tool
	emb      Embedder
	search   Search
	tokens   *mcptool.Tokens
	admin    string
	ops      Ops
	eraser   Eraser
	log      *zap.Logger
	now      func() time.Time
	secure   bool
	sessions *sessions
	once     *oneTime
	pages    map[string]*template.Template
	mux      *http.ServeMux
}

// New builds the console. The one-time login link is made (and written to
// LinkFile) at once.
func New(d Deps, o Options) (*Server, error) {
	var bad []string
	if d.Store == nil {
		bad = append(bad, "a store")
	}
	if d.Tool == nil {
		bad = append(bad, "the memory tool")
	}
	if d.Embedder == nil {
		bad = append(bad, "an embedder")
	}
	if len(d.AdminToken) < mcptool.MinTokenChars {
		bad = append(bad, fmt.Sprintf("an admin token of at least %d characters", mcptool.MinTokenChars))
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("console: needs %s", strings.Join(bad, ", "))
	}
	if d.Log == nil {
		d.Log = zap.NewNop()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 12 * time.Hour
	}
	s := &Server{st: d.Store, tool: d.Tool, emb: d.Embedder, search: d.Search, tokens: d.Tokens, admin: d.AdminToken,
		ops: d.Ops, eraser: d.Eraser, log: d.Log, now: d.Now, secure: o.Secure,
		sessions: newSessions(o.SessionTTL, d.Now),
		once:     &oneTime{path: o.LinkFile, base: strings.TrimSuffix(o.BaseURL, "/")}}
	if err := s.parse(); err != nil {
		return nil, err
	}
	if err := s.once.renew(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

// LoginLink is the current one-time login link ("" once used until the
// next is made).
func (s *Server) LoginLink() string { return s.once.current() }

// SetBaseURL sets the URL the login link names (once the listener has its
// port) and makes a new link.
func (s *Server) SetBaseURL(u string) error {
	s.once.mu.Lock()
	s.once.base = strings.TrimSuffix(u, "/")
	s.once.mu.Unlock()
	return s.once.renew()
}

// ServeHTTP serves the console.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	s.mux.ServeHTTP(w, r)
}

func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /login", s.handleLogin)
	m.HandleFunc("POST /login", s.handleLogin)
	m.HandleFunc("GET /login/once", s.handleOnce)
	m.HandleFunc("POST /login/once", s.handleOnce)
	m.Handle("POST /logout", s.authed(func(w http.ResponseWriter, r *http.Request, _ *session) { s.handleLogout(w, r) }))

	m.Handle("GET /{$}", s.authed(s.handleMemories))
	m.Handle("GET /memories", s.authed(s.handleMemories))
	m.Handle("GET /memory/{id}", s.authed(s.handleMemory))
	m.Handle("POST /memory/{id}/edit", s.authed(s.handleEdit))
	m.Handle("POST /memory/{id}/pin", s.authed(s.handlePin))
	m.Handle("POST /memory/{id}/forget", s.authed(s.handleForget))
	m.Handle("POST /memory/{id}/restore", s.authed(s.handleRestore))
	m.Handle("GET /api/memories", s.authed(s.apiMemories))
	m.Handle("GET /api/memory/{id}", s.authed(s.apiMemory))

	m.Handle("GET /sessions", s.authed(s.handleSessions))
	m.Handle("GET /session", s.authed(s.handleSession))

	m.Handle("GET /passes", s.authed(s.handlePasses))
	m.Handle("GET /pass/{id}", s.authed(s.handlePass))
	m.Handle("POST /pass/{id}/undo", s.authed(s.handleUndo))
	m.Handle("GET /review", s.authed(s.handleReview))
	m.Handle("POST /review/resolve", s.authed(s.handleResolve))

	m.Handle("GET /ops", s.authed(s.handleOps))
	m.Handle("GET /ops/dlq/{seq}", s.authed(s.handleLetter))
	m.Handle("POST /ops/dlq/{seq}/replay", s.authed(s.handleReplay))
	m.Handle("POST /ops/dlq/{seq}/drop", s.authed(s.handleDrop))

	m.Handle("GET /erase", s.authed(s.handleErasePage))
	m.Handle("POST /erase", s.authed(s.handleErase))
	s.mux = m
}

// page is what every template gets.
type page struct {
	Title string
	Nav   string
	P     principal
	CSRF  string
	Scope scope
	// Projects the scope selector offers.
	Projects []string
	Flash    string
	Error    string
	Data     any
}

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"day": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02")
	},
	"pct":   func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) },
	"f2":    func(f float64) string { return fmt.Sprintf("%.2f", f) },
	"f3":    func(f float64) string { return fmt.Sprintf("%.3f", f) },
	"cut":   cut,
	"join":  strings.Join,
	"lower": strings.ToLower,
	"add":   func(a, b int) int { return a + b },
	"list":  func(s ...string) []string { return s },
	"pageQuery": func(q listQuery, page int) template.URL {
		v := url.Values{}
		for k, x := range map[string]string{"q": q.Q, "kind": q.Kind, "authority": q.Authority, "state": q.State, "stale": q.Stale,
			"pinned": q.Pinned, "session": q.Session} {
			if x != "" {
				v.Set(k, x)
			}
		}
		v.Set("page", strconv.Itoa(page))
		return template.URL(v.Encode()) //nolint:gosec // url.Values encoded
	},
	"svg": func(s string) template.HTML { return template.HTML(s) }, //nolint:gosec // built by graphSVG, every text escaped
}

func cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func (s *Server) parse() error {
	layout, err := templateFS.ReadFile("templates/layout.html")
	if err != nil {
		return err
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return err
	}
	s.pages = map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		body, err := templateFS.ReadFile(n)
		if err != nil {
			return err
		}
		t, err := template.New("layout").Funcs(funcs).Parse(string(layout))
		if err != nil {
			return fmt.Errorf("console: template layout: %w", err)
		}
		if _, err := t.New(name).Parse(string(body)); err != nil {
			return fmt.Errorf("console: template %s: %w", name, err)
		}
		s.pages[name] = t
	}
	return nil
}

// render writes a page; a template error is a 500 with nothing half-written.
func (s *Server) render(w http.ResponseWriter, r *http.Request, name string, p *page) {
	t, ok := s.pages[name]
	if !ok {
		http.Error(w, "no such page", http.StatusInternalServerError)
		return
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "layout", p); err != nil {
		s.log.Error("console: render", zap.String("page", name), errField(err))
		http.Error(w, "the page failed to render", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = b.WriteTo(w)
}

// scope is the tenant and project a page shows; Session narrows some.
type scope struct {
	Tenant  string
	Project string
}

// Query is the scope as URL parameters, for the links of a page.
func (sc scope) Query() template.URL {
	v := url.Values{}
	if sc.Tenant != "" {
		v.Set("t", sc.Tenant)
	}
	v.Set("p", sc.Project)
	return template.URL(v.Encode()) //nolint:gosec // url.Values encoded
}

func (sc scope) ref() memory.ProjectRef {
	return memory.ProjectRef{Tenant: sc.Tenant, Project: sc.Project}
}

func (sc scope) caller(p principal) mcptool.Caller {
	return mcptool.Caller{Tenant: sc.Tenant, Project: sc.Project, Principal: "console:" + p.Name, WritesGlobal: p.writesGlobal()}
}

// errNoProject: the page needs a project and none was named or known.
var errNoProject = errors.New("name a project")

// resolve reads the scope of a request (t, p) against the session's
// principal: a token's tenant is its own (a t parameter is ignored, as
// the memory tool has no ?tenant=), its project must be one it reaches; the
// operator names any. Without p: the token's only project, or the first
// known project of the tenant.
func (s *Server) resolve(ctx context.Context, r *http.Request, ss *session) (scope, []string, error) {
	p := ss.p
	sc := scope{Tenant: p.Grant.Tenant, Project: strings.TrimSpace(r.FormValue("p"))}
	if p.Admin {
		sc.Tenant = strings.TrimSpace(r.FormValue("t"))
		if sc.Tenant != "" {
			if err := memory.CheckTenant(sc.Tenant); err != nil {
				return sc, nil, err
			}
		}
	}
	var projects []string
	if p.Admin || p.Grant.All {
		if d, ok := s.st.(memory.Directory); ok {
			ps, err := d.Projects(ctx, sc.Tenant)
			if err != nil {
				return sc, nil, err
			}
			projects = ps
		}
	} else {
		projects = slices.Clone(p.Grant.Projects)
	}
	if sc.Project == "" && len(projects) > 0 {
		sc.Project = projects[0]
	}
	if sc.Project == "" {
		return sc, projects, errNoProject
	}
	if !p.reaches(sc.Tenant, sc.Project) {
		return sc, projects, errForbidden
	}
	if !slices.Contains(projects, sc.Project) {
		projects = append(projects, sc.Project)
	}
	return sc, projects, nil
}

var errForbidden = errors.New("your token does not reach this project")

// base fills the page fields every page has, or writes the error page and
// returns nil when the scope cannot be resolved.
func (s *Server) base(w http.ResponseWriter, r *http.Request, ss *session, nav, title string) *page {
	sc, projects, err := s.resolve(r.Context(), r, ss)
	pg := &page{Title: title, Nav: nav, P: ss.p, CSRF: ss.csrf, Scope: sc, Projects: projects, Flash: r.FormValue("flash")}
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errForbidden) {
			status = http.StatusForbidden
		}
		if errors.Is(err, errNoProject) {
			status = http.StatusOK
			pg.Error = "No project yet: name one (p) in the selector above."
		} else {
			pg.Error = err.Error()
		}
		w.WriteHeader(status)
		s.render(w, r, "error", pg)
		return nil
	}
	return pg
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, pg *page, status int, err error) {
	pg.Error = describe(err)
	if status == 0 {
		status = http.StatusInternalServerError
		switch {
		case memory.IsNotFound(err):
			status = http.StatusNotFound
		case errors.Is(err, memory.ErrInvalid), errors.Is(err, errTool):
			status = http.StatusBadRequest
		case errors.Is(err, memory.ErrRefused):
			status = http.StatusConflict
		}
	}
	if status >= 500 {
		s.log.Error("console: request failed", zap.String("path", r.URL.Path), errField(err))
	}
	w.WriteHeader(status)
	s.render(w, r, "error", pg)
}

func describe(err error) string {
	switch {
	case errors.Is(err, memory.ErrNotReplicated), errors.Is(err, memory.ErrFailedOver):
		return err.Error() // what was written, and what to do
	case errors.Is(err, memory.ErrUnavailable):
		return "the memory store is unavailable; try again later"
	case errors.Is(err, context.DeadlineExceeded):
		return "the request timed out"
	}
	return err.Error()
}

// back redirects after a change to target with a flash message.
func back(w http.ResponseWriter, r *http.Request, target, flash string) {
	sep := "?"
	if strings.Contains(target, "?") {
		sep = "&"
	}
	if flash != "" {
		target += sep + "flash=" + url.QueryEscape(flash)
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

func errField(err error) zap.Field { return zap.Error(err) }

func principalField(p principal) zap.Field {
	if p.Admin {
		return zap.String("principal", "operator")
	}
	return zap.String("principal", p.Name)
}

func remoteField(r *http.Request) zap.Field { return zap.String("remote", r.RemoteAddr) }

func zapString(k, v string) zap.Field { return zap.String(k, v) }

func zapInt(k string, v int) zap.Field { return zap.Int(k, v) }

func urlEscape(s string) string { return url.QueryEscape(s) }
