package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/engram-memory/engram/internal/mcptool"
)

// The cookies.
const (
	sessionCookie = "engram_console"
	loginCookie   = "engram_console_login" // the login form's CSRF value (double submit)
)

// principal is who a console session belongs to: a token of the tokens
// file (bound to one tenant and some or all of its projects) or the
// operator (the admin token or the one-time link): every tenant, and the
// operations pages.
type principal struct {
	Name  string
	Admin bool
	Grant mcptool.Grant // the token's grant (not for the operator)
}

// reaches reports whether p may see project of tenant.
func (p principal) reaches(tenant, project string) bool {
	if p.Admin {
		return true
	}
	return tenant == p.Grant.Tenant && p.Grant.Reaches(project)
}

// writesGlobal is the memory tool's rule for the tenant's global memories:
// a token that reaches every project of its tenant, or the operator.
func (p principal) writesGlobal() bool { return p.Admin || p.Grant.All }

type session struct {
	p       principal
	csrf    string
	expires time.Time
}

// sessions are kept in the process: a restart logs everyone out (they log
// in again with their token), which costs nothing a replica or a restart
// needs.
type sessions struct {
	mu   sync.Mutex
	byID map[[sha256.Size]byte]*session
	ttl  time.Duration
	now  func() time.Time
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{byID: map[[sha256.Size]byte]*session{}, ttl: ttl, now: now}
}

// create opens a session for p and returns its id (the cookie's value).
func (s *sessions) create(p principal) (string, *session) {
	id := randomToken()
	ss := &session{p: p, csrf: randomToken(), expires: s.now().Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, v := range s.byID { // sweep the expired ones
		if now.After(v.expires) {
			delete(s.byID, k)
		}
	}
	s.byID[sha256.Sum256([]byte(id))] = ss
	return id, ss
}

func (s *sessions) get(id string) (*session, bool) {
	if id == "" {
		return nil, false
	}
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byID[k]
	if !ok {
		return nil, false
	}
	if s.now().After(ss.expires) {
		delete(s.byID, k)
		return nil, false
	}
	return ss, true
}

func (s *sessions) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, sha256.Sum256([]byte(id)))
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("console: crypto/rand: %v", err)) // never fails on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func equal(a, b string) bool {
	return len(a) > 0 && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// EnsureAdminToken returns the operator's token kept in path, generating
// it (mode 600, in a private directory) on first use, as `engram serve`
// generates the NATS credentials. A file open to its group or others is
// refused.
func EnsureAdminToken(path string) (token string, created bool, err error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		st, err := os.Stat(path)
		if err != nil {
			return "", false, fmt.Errorf("console: admin token: %w", err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			return "", false, fmt.Errorf("console: admin token file %s is open to its group or others (mode %v): chmod 600 it", path, st.Mode().Perm())
		}
		t := strings.TrimSpace(string(b))
		if len(t) < mcptool.MinTokenChars {
			return "", false, fmt.Errorf("console: admin token file %s holds a token shorter than %d characters", path, mcptool.MinTokenChars)
		}
		return t, false, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", false, fmt.Errorf("console: admin token: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("console: admin token: %w", err)
	}
	t := randomToken()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("console: admin token: %w", err)
	}
	if _, err := f.WriteString(t + "\n"); err != nil {
		_ = f.Close()
		return "", false, fmt.Errorf("console: admin token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", false, fmt.Errorf("console: admin token: %w", err)
	}
	return t, true, nil
}

// oneTime is the one-time login link: a code that logs the operator in
// once. The current link is kept in a file of the data dir (mode 600), so
// the log can say where it is without printing a secret; using it writes
// the next one.
type oneTime struct {
	mu   sync.Mutex
	sum  [sha256.Size]byte
	set  bool
	path string // "" : not written anywhere (tests read Link)
	base string // the console's URL
	link string
}

// renew makes a new code and writes its link.
func (o *oneTime) renew() error {
	code := randomToken()
	link := o.base + "/login/once?code=" + code
	o.mu.Lock()
	o.sum, o.set, o.link = sha256.Sum256([]byte(code)), true, link
	o.mu.Unlock()
	if o.path == "" {
		return nil
	}
	tmp := o.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(link+"\n"), 0o600); err != nil {
		return fmt.Errorf("console: login link: %w", err)
	}
	if err := os.Rename(tmp, o.path); err != nil {
		return fmt.Errorf("console: login link: %w", err)
	}
	return nil
}

// use consumes code: true once for the current code.
func (o *oneTime) use(code string) bool {
	sum := sha256.Sum256([]byte(code))
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.set || subtle.ConstantTimeCompare(sum[:], o.sum[:]) != 1 {
		return false
	}
	o.set = false
	return true
}

func (o *oneTime) current() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.set {
		return ""
	}
	return o.link
}

func (s *Server) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     "/",
		MaxAge:   maxAge,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   s.secure || r.TLS != nil,
	})
}

// loginForm shows the token form; the login cookie carries the form's
// CSRF value.
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	v := randomToken()
	s.setCookie(w, r, loginCookie, v, 600)
	w.WriteHeader(status)
	s.render(w, r, "login", &page{Title: "Log in", Data: map[string]any{"CSRF": v, "Error": msg}})
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		s.loginPage(w, r, http.StatusOK, "")
		return
	}
	if !s.loginCSRF(r) {
		s.loginPage(w, r, http.StatusForbidden, "The form expired: try again.")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	var p principal
	switch {
	case equal(sha(token), sha(s.admin)):
		p = principal{Name: "operator", Admin: true}
	default:
		g, ok := s.tokens.Lookup(token)
		if !ok {
			s.log.Info("console login refused: unknown token", remoteField(r))
			s.loginPage(w, r, http.StatusUnauthorized, "Unknown token.")
			return
		}
		p = principal{Name: g.Principal, Grant: g}
	}
	s.startSession(w, r, p)
}

func sha(s string) string {
	b := sha256.Sum256([]byte(s))
	return string(b[:])
}

// loginCSRF checks the login form's double-submitted value.
func (s *Server) loginCSRF(r *http.Request) bool {
	c, err := r.Cookie(loginCookie)
	return err == nil && equal(r.PostFormValue("csrf"), c.Value)
}

// handleOnce: GET shows a button (a link prefetcher must not spend the
// code), POST logs the operator in and writes the next link.
func (s *Server) handleOnce(w http.ResponseWriter, r *http.Request) {
	code := r.FormValue("code")
	if r.Method == http.MethodGet {
		v := randomToken()
		s.setCookie(w, r, loginCookie, v, 600)
		s.render(w, r, "once", &page{Title: "Log in", Data: map[string]any{"CSRF": v, "Code": code}})
		return
	}
	if !s.loginCSRF(r) {
		s.loginPage(w, r, http.StatusForbidden, "The form expired: open the link again.")
		return
	}
	if !s.once.use(code) {
		s.loginPage(w, r, http.StatusUnauthorized, "This login link was used or is no longer valid: see the data dir's console-login file for the current one, or log in with a token.")
		return
	}
	if err := s.once.renew(); err != nil {
		s.log.Warn("console: the next one-time login link was not written", errField(err))
	}
	s.startSession(w, r, principal{Name: "operator", Admin: true})
}

func (s *Server) startSession(w http.ResponseWriter, r *http.Request, p principal) {
	id, _ := s.sessions.create(p)
	s.setCookie(w, r, loginCookie, "", -1)
	s.setCookie(w, r, sessionCookie, id, int(s.sessions.ttl.Seconds()))
	s.log.Info("console login", principalField(p), remoteField(r))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.sessions.drop(c.Value)
	}
	s.setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// authed wraps every page and JSON endpoint: no session, no access (a
// page redirects to the login, JSON is 401); every method but GET and
// HEAD needs the session's CSRF token (form field csrf or header
// X-CSRF-Token) and, when the browser sends one, an Origin of this
// console.
func (s *Server) authed(next func(http.ResponseWriter, *http.Request, *session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ss *session
		if c, err := r.Cookie(sessionCookie); err == nil {
			ss, _ = s.sessions.get(c.Value)
		}
		if ss == nil {
			if strings.HasPrefix(r.URL.Path, "/api/") || r.Method != http.MethodGet {
				http.Error(w, "no session: log in", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := r.ParseForm(); err != nil {
				http.Error(w, "bad form", http.StatusBadRequest)
				return
			}
			tok := r.PostFormValue("csrf")
			if tok == "" {
				tok = r.Header.Get("X-CSRF-Token")
			}
			if !equal(tok, ss.csrf) {
				s.log.Warn("console: a change without its CSRF token was refused", principalField(ss.p), remoteField(r))
				http.Error(w, "refused: missing or wrong CSRF token", http.StatusForbidden)
				return
			}
			if o := r.Header.Get("Origin"); o != "" && o != "null" && !sameOrigin(o, r) {
				http.Error(w, "refused: cross-origin request", http.StatusForbidden)
				return
			}
		}
		w.Header().Set("Cache-Control", "no-store")
		next(w, r, ss)
	})
}

func sameOrigin(origin string, r *http.Request) bool {
	o := strings.TrimPrefix(strings.TrimPrefix(origin, "https://"), "http://")
	return o == r.Host
}
