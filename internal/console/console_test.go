package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/console"
	"github.com/engram-memory/engram/internal/mcptool"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// recordingEraser records the scopes it was asked to erase (the erase
// page's rules are the console's; the erasure itself is the erase
// package's).
type recordingEraser struct {
	mu     sync.Mutex
	scopes []console.EraseScope
}

func (e *recordingEraser) Erase(_ context.Context, s console.EraseScope) (console.Receipt, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.scopes = append(e.scopes, s)
	return console.Receipt{Scope: s, At: time.Now(), Counts: []console.Count{{Kind: "memories", N: 1}}, Complete: true}, nil
}

type unit struct {
	*world
	srv    *console.Server
	url    string
	eraser *recordingEraser
}

// plainStore is a store without memory.Directory (as Redis is): only the
// Store contract's methods.
type plainStore struct{ memory.Store }

func newUnit(t *testing.T) *unit { return newUnitWith(t, nil) }

// newUnitWith is newUnit on a SQLite store as wrap wraps it (nil: as it is).
func newUnitWith(t *testing.T, wrap func(memory.Store) memory.Store) *unit {
	t.Helper()
	ctx := timeout(t, 2*time.Minute)
	var st memory.Store = storetest.OpenSQLite(t)
	if wrap != nil {
		st = wrap(st)
	}
	models := llmtest.New(t)
	w := seed(t, ctx, st, models)
	emb := models.Client().Embedder()
	tool, err := mcptool.New(st, emb, mcptool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := mcptool.LoadTokens(w.tokens)
	if err != nil {
		t.Fatal(err)
	}
	er := &recordingEraser{}
	srv, err := console.New(console.Deps{Store: st, Tool: tool, Embedder: emb, Tokens: tokens, AdminToken: adminTok, Eraser: er}, console.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	if err := srv.SetBaseURL(hs.URL); err != nil {
		t.Fatal(err)
	}
	return &unit{world: w, srv: srv, url: hs.URL, eraser: er}
}

// client is a browser-like client: a cookie jar, no redirects followed.
func client(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func post(t *testing.T, c *http.Client, u string, form url.Values, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// login logs c in with token and returns the session's CSRF token.
func (u *unit) login(t *testing.T, c *http.Client, token string) string {
	t.Helper()
	_, page := get(t, c, u.url+"/login")
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF field on the login page:\n%s", page)
	}
	if code, body := post(t, c, u.url+"/login", url.Values{"csrf": {m[1]}, "token": {token}}); code != http.StatusSeeOther {
		t.Fatalf("login: %d\n%s", code, body)
	}
	code, page := get(t, c, u.url+"/memories")
	if code != http.StatusOK {
		t.Fatalf("after login: %d\n%s", code, page)
	}
	m = csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF token on the memories page")
	}
	return m[1]
}

// TestNoSessionNoAccess: no page, no JSON and no change without a session.
func TestNoSessionNoAccess(t *testing.T) {
	u := newUnit(t)
	c := client(t)
	for _, path := range []string{"/", "/memories", "/memory/" + u.stripe.ID, "/sessions", "/session?s=s1", "/passes",
		"/pass/" + u.pass.Pass.ID, "/review", "/ops", "/erase"} {
		code, _ := get(t, c, u.url+path)
		if code != http.StatusSeeOther {
			t.Errorf("GET %s without a session: %d, want a redirect to the login", path, code)
		}
	}
	for _, path := range []string{"/api/memories?p=shop", "/api/memory/" + u.stripe.ID} {
		if code, _ := get(t, c, u.url+path); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a session: %d, want 401", path, code)
		}
	}
	for _, path := range []string{"/memory/" + u.stripe.ID + "/forget", "/pass/" + u.pass.Pass.ID + "/undo", "/erase", "/review/resolve"} {
		if code, _ := post(t, c, u.url+path, url.Values{"reason": {"x"}, "p": {"shop"}}); code != http.StatusUnauthorized {
			t.Errorf("POST %s without a session: %d, want 401", path, code)
		}
	}
	if n, _ := u.st.Get(u.ctx, u.stripe.ID); !n.Live() {
		t.Fatal("a change without a session went through")
	}
	// An unknown token does not log in.
	_, page := get(t, c, u.url+"/login")
	m := csrfField.FindStringSubmatch(page)
	if code, _ := post(t, c, u.url+"/login", url.Values{"csrf": {m[1]}, "token": {"not-a-token-0123456789abcdef"}}); code != http.StatusUnauthorized {
		t.Fatalf("an unknown token: %d", code)
	}
	// Nor a right token without the login form's CSRF value.
	if code, _ := post(t, client(t), u.url+"/login", url.Values{"token": {tokShop}}); code != http.StatusForbidden {
		t.Fatalf("a login without the form's CSRF value: %d", code)
	}
}

// TestProjectTokenSeesItsProjectOnly: a token of project shop sees shop's
// memories and the tenant's global ones, not the tenant's other project,
// not another tenant's shop; another project or another tenant's id is
// refused or not found.
func TestProjectTokenSeesItsProjectOnly(t *testing.T) {
	u := newUnit(t)
	c := client(t)
	u.login(t, c, tokShop)
	_, page := get(t, c, u.url+"/memories")
	for _, want := range []string{labelStripe, labelFly, labelRaceNew, labelGlobal} {
		if !strings.Contains(page, want) {
			t.Errorf("the memories page lacks %q", want)
		}
	}
	for _, not := range []string{labelBlog, labelAcme, labelStaging /* forgotten: not live */, labelRace + "<" /* revised */} {
		if strings.Contains(page, not) {
			t.Errorf("the memories page shows %q", not)
		}
	}
	// Every page renders.
	for _, path := range []string{"/memories?state=all", "/memories?q=stripe", "/memory/" + u.stripe.ID, "/memory/" + u.race.ID, "/sessions",
		"/session?s=s1", "/passes", "/pass/" + u.pass.Pass.ID, "/review", "/erase"} {
		if code, body := get(t, c, u.url+path); code != http.StatusOK {
			t.Errorf("%s: %d\n%s", path, code, body)
		}
	}
	if _, body := get(t, c, u.url+"/sessions"); !strings.Contains(body, "s=s1") {
		t.Errorf("the sessions page does not list s1:\n%s", body)
	}
	if _, body := get(t, c, u.url+"/session?s=s1"); !strings.Contains(body, "9000 → 1200") || !strings.Contains(body, "1–2") {
		t.Errorf("the session page lacks its summary (tokens, messages covered):\n%s", body)
	}
	if code, _ := get(t, c, u.url+"/memories?p=blog"); code != http.StatusForbidden {
		t.Errorf("another project: %d, want 403", code)
	}
	if code, _ := get(t, c, u.url+"/memory/"+u.blog.ID); code != http.StatusNotFound {
		t.Errorf("another project's memory: %d, want 404", code)
	}
	if code, _ := get(t, c, u.url+"/memory/"+u.acme.ID); code != http.StatusNotFound {
		t.Errorf("another tenant's memory: %d, want 404", code)
	}
	if code, body := get(t, c, u.url+"/api/memory/"+u.acme.ID+"?t=acme"); code != http.StatusNotFound || strings.Contains(body, labelAcme) {
		t.Errorf("another tenant's memory over JSON (naming its tenant): %d %s", code, body)
	}
	code, body := get(t, c, u.url+"/api/memories?state=all")
	if code != http.StatusOK || !strings.Contains(body, labelStaging) || strings.Contains(body, labelBlog) || strings.Contains(body, labelAcme) {
		t.Errorf("the JSON list: %d %s", code, body)
	}
	// The operations pages are the operator's.
	if code, _ := get(t, c, u.url+"/ops"); code != http.StatusForbidden {
		t.Errorf("/ops for a project token: %d", code)
	}
}

// TestOtherTenantSeesNothingOfThisOne: tenant acme's token (every project
// of acme) sees acme's shop and nothing of the default tenant's shop.
func TestOtherTenantSeesNothingOfThisOne(t *testing.T) {
	u := newUnit(t)
	c := client(t)
	u.login(t, c, tokAcme)
	for _, path := range []string{"/memories?p=shop&state=all", "/memories?p=shop&t=&state=all", "/sessions?p=shop", "/session?p=shop&s=s1",
		"/passes?p=shop", "/review?p=shop", "/api/memories?p=shop&state=all"} {
		code, page := get(t, c, u.url+path)
		if code != http.StatusOK {
			t.Errorf("%s: %d", path, code)
		}
		for _, not := range []string{labelStripe, labelFly, labelStaging, labelRace, labelGlobal, heldText, u.pass.Pass.ID, "How do we take payments", summaryText[:12]} {
			if strings.Contains(page, not) {
				t.Errorf("%s shows the default tenant's %q", path, not)
			}
		}
		if strings.HasPrefix(path, "/memories") && !strings.Contains(page, labelAcme) {
			t.Errorf("%s lacks acme's own memory", path)
		}
	}
	for _, path := range []string{"/memory/" + u.stripe.ID + "?p=shop", "/pass/" + u.pass.Pass.ID + "?p=shop"} {
		if code, _ := get(t, c, u.url+path); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, code)
		}
	}
}

// TestChangesNeedTheCSRFToken: a change without the session's CSRF token,
// with a wrong one or from another origin is refused and changes nothing;
// with it, it is made.
func TestChangesNeedTheCSRFToken(t *testing.T) {
	u := newUnit(t)
	c := client(t)
	csrf := u.login(t, c, tokShop)
	pin := u.url + "/memory/" + u.fly.ID + "/pin?p=shop"
	for name, f := range map[string]url.Values{"none": {"pinned": {"true"}}, "wrong": {"pinned": {"true"}, "csrf": {csrf + "x"}}} {
		if code, _ := post(t, c, pin, f); code != http.StatusForbidden {
			t.Errorf("%s CSRF token: %d, want 403", name, code)
		}
	}
	if code, _ := post(t, c, pin, url.Values{"pinned": {"true"}, "csrf": {csrf}}, "Origin", "http://evil.example"); code != http.StatusForbidden {
		t.Errorf("another origin: %d, want 403", code)
	}
	if n, _ := u.st.Get(u.ctx, u.fly.ID); n.Pinned {
		t.Fatal("a refused change was made")
	}
	if code, body := post(t, c, pin, url.Values{"pinned": {"true"}, "csrf": {csrf}}); code != http.StatusSeeOther {
		t.Fatalf("with the token: %d %s", code, body)
	}
	if n, _ := u.st.Get(u.ctx, u.fly.ID); !n.Pinned {
		t.Fatal("pin with the token did not pin")
	}
	// Another session's token is not this one's.
	c2 := client(t)
	u.login(t, c2, tokShop)
	if code, _ := post(t, c2, pin, url.Values{"pinned": {"false"}, "csrf": {csrf}}); code != http.StatusForbidden {
		t.Errorf("another session's CSRF token: %d, want 403", code)
	}
}

// TestEditKeepsTheAuthority: an edit through the console goes through the
// memory tool: the text becomes the agent's, who asserted it stays.
func TestEditKeepsTheAuthority(t *testing.T) {
	u := newUnit(t)
	c := client(t)
	csrf := u.login(t, c, tokShop)
	code, body := post(t, c, u.url+"/memory/"+u.fly.ID+"/edit?p=shop", url.Values{"csrf": {csrf}, "label": {"Deploy the shop with Fly.io (region ams)"},
		"body": {"From main."}, "kind": {"decision"}})
	if code != http.StatusSeeOther {
		t.Fatalf("edit: %d %s", code, body)
	}
	n, err := u.st.Get(u.ctx, u.fly.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n.Label != "Deploy the shop with Fly.io (region ams)" || n.AssertedBy != memory.AssertedInferred || n.Source != memory.SourceAgent {
		t.Fatalf("after the edit: label %q asserted by %s source %s", n.Label, n.AssertedBy, n.Source)
	}
	// The change is in the memory's history, with who made it and the text before.
	_, page := get(t, c, u.url+"/memory/"+u.fly.ID)
	if !strings.Contains(page, "console:alice") || !strings.Contains(page, "update (this memory)") {
		t.Errorf("the memory's changes lack the edit:\n%s", page)
	}
	if _, page := get(t, c, u.url+"/passes"); strings.Contains(page, "console-") {
		t.Error("a change record is listed among the consolidation passes")
	}
	recs, err := u.st.Passes(u.ctx, memory.PassQuery{Project: "shop", Session: "console"})
	if err != nil || len(recs) != 1 || recs[0].By != "console:alice" || recs[0].Entries[0].Before.Label != labelFly {
		t.Fatalf("change records %+v %v", recs, err)
	}
	if code, _ := post(t, c, u.url+"/pass/"+recs[0].ID+"/undo?p=shop", url.Values{"csrf": {csrf}}); code != http.StatusConflict {
		t.Errorf("undo of a change record: %d, want 409 (not a consolidation pass)", code)
	}
	// A global memory is read-only for a token of one project (the tool's rule).
	if code, _ := post(t, c, u.url+"/memory/"+u.global.ID+"/forget?p=shop", url.Values{"csrf": {csrf}, "reason": {"x"}}); code != http.StatusBadRequest {
		t.Errorf("forget a global memory with a project token: %d, want 400 (not allowed)", code)
	}
	if n, _ := u.st.Get(u.ctx, u.global.ID); !n.Live() {
		t.Fatal("a project token forgot a global memory")
	}
}

// TestOneTimeLink: the link logs the operator in once; the next link is
// a new one.
func TestOneTimeLink(t *testing.T) {
	u := newUnit(t)
	link := u.srv.LoginLink()
	if !strings.HasPrefix(link, u.url+"/login/once?code=") {
		t.Fatalf("link %q", link)
	}
	use := func(c *http.Client) int {
		_, page := get(t, c, link)
		m := csrfField.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no form on the link's page:\n%s", page)
		}
		code, _ := post(t, c, u.url+"/login/once", url.Values{"csrf": {m[1]}, "code": {strings.TrimPrefix(link, u.url+"/login/once?code=")}})
		return code
	}
	c := client(t)
	if code := use(c); code != http.StatusSeeOther {
		t.Fatalf("first use: %d", code)
	}
	if code, page := get(t, c, u.url+"/ops"); code != http.StatusServiceUnavailable || !strings.Contains(page, "no bus") {
		t.Fatalf("the operator's /ops without a bus: %d", code)
	}
	if code := use(client(t)); code != http.StatusUnauthorized {
		t.Fatalf("second use: %d, want 401", code)
	}
	if next := u.srv.LoginLink(); next == "" || next == link {
		t.Fatalf("the next link %q", next)
	}
}

// TestEraseScopeRules: a project token erases its own project's session
// or the project, never another project, another tenant or its whole
// tenant; the confirmation must name the scope.
func TestEraseScopeRules(t *testing.T) {
	u := newUnit(t)
	c := client(t)
	csrf := u.login(t, c, tokShop)
	try := func(f url.Values) int {
		f.Set("csrf", csrf)
		code, _ := post(t, c, u.url+"/erase", f)
		return code
	}
	if code := try(url.Values{"p": {"shop"}, "session": {"s1"}, "confirm": {"erase project shop"}}); code != http.StatusBadRequest {
		t.Errorf("a wrong confirmation: %d", code)
	}
	if code := try(url.Values{"p": {"blog"}, "confirm": {"erase project blog"}}); code != http.StatusForbidden {
		t.Errorf("another project: %d", code)
	}
	if code := try(url.Values{"p": {""}, "confirm": {"erase tenant (default)"}}); code != http.StatusForbidden {
		t.Errorf("the whole tenant with a project token: %d", code)
	}
	if code := try(url.Values{"p": {"shop"}, "t": {"acme"}, "session": {"s1"}, "confirm": {"erase session s1"}}); code != http.StatusOK {
		t.Errorf("its own session: %d", code)
	}
	u.eraser.mu.Lock()
	defer u.eraser.mu.Unlock()
	if len(u.eraser.scopes) != 1 || u.eraser.scopes[0] != (console.EraseScope{Project: "shop", Session: "s1"}) {
		t.Fatalf("erased %+v: want only the default tenant's shop/s1 (a token's t is ignored)", u.eraser.scopes)
	}
}

// TestWithoutDirectory: on a store without memory.Directory and Finder the
// list pages through the timeline with the same filters, the sessions page
// lists the session ids, and a session shows its summaries.
func TestWithoutDirectory(t *testing.T) {
	u := newUnitWith(t, func(st memory.Store) memory.Store { return plainStore{st} })
	c := client(t)
	u.login(t, c, tokShop)
	code, page := get(t, c, u.url+"/memories?authority=user&state=all")
	if code != http.StatusOK || !strings.Contains(page, labelStripe) || !strings.Contains(page, labelGlobal) || strings.Contains(page, labelFly) {
		t.Errorf("the user's memories: %d\n%s", code, page)
	}
	code, page = get(t, c, u.url+"/memories?state=archived")
	if code != http.StatusOK || !strings.Contains(page, labelStaging) || strings.Contains(page, labelStripe) {
		t.Errorf("the archived memories: %d\n%s", code, page)
	}
	if _, page := get(t, c, u.url+"/sessions"); !strings.Contains(page, "s=s1") || !strings.Contains(page, "keeps no sizes") {
		t.Errorf("the sessions page without a Directory lists the session ids:\n%s", page)
	}
	if _, page := get(t, c, u.url+"/session?s=s1"); !strings.Contains(page, "9000 → 1200") {
		t.Errorf("the session's latest summary:\n%s", page)
	}
}

// TestResolveHeld: merge stores the held fact as the revision of the memory
// it resembles (closing it), once; discard stores nothing; either is
// written into the pass's journal with who resolved it.
func TestResolveHeld(t *testing.T) {
	for _, action := range []string{"merge", "discard"} {
		t.Run(action, func(t *testing.T) {
			u := newUnit(t)
			c := client(t)
			csrf := u.login(t, c, tokShop)
			entry := u.heldEntry(t)
			form := url.Values{"csrf": {csrf}, "pass": {u.pass.Pass.ID}, "entry": {strconv.Itoa(entry)}, "action": {action}}
			if code, body := post(t, c, u.url+"/review/resolve?p=shop", form); code != http.StatusSeeOther {
				t.Fatalf("%s: %d\n%s", action, code, body)
			}
			if code, _ := post(t, c, u.url+"/review/resolve?p=shop", form); code != http.StatusConflict {
				t.Errorf("resolving twice: %d, want 409", code)
			}
			p, err := u.st.GetPass(u.ctx, memory.ProjectRef{Project: "shop"}, u.pass.Pass.ID)
			if err != nil {
				t.Fatal(err)
			}
			e := p.Entries[entry]
			fly := u.get(t, u.fly.ID)
			switch action {
			case "merge":
				if e.Resolution != memory.ResolveMerge || e.ResolvedID == "" || fly.SupersededBy != e.ResolvedID {
					t.Fatalf("merge: entry %+v, the memory it resembles superseded by %q", e, fly.SupersededBy)
				}
				if n := u.get(t, e.ResolvedID); n.Label != heldText || !n.Live() {
					t.Fatalf("the merged revision: %+v", n)
				}
			case "discard":
				if e.Resolution != memory.ResolveDiscard || e.ResolvedID != "" || !fly.Live() {
					t.Fatalf("discard: entry %+v, the memory it resembles %+v", e, fly)
				}
			}
			if e.ResolvedBy != "console:alice" {
				t.Errorf("resolved by %q", e.ResolvedBy)
			}
		})
	}
}

// heldEntry is the index of the seeded pass's held fact in its journal.
func (u *unit) heldEntry(t *testing.T) int {
	t.Helper()
	for i, e := range u.pass.Pass.Entries {
		if e.Op == memory.OpHold {
			return i
		}
	}
	t.Fatal("the seeded pass held nothing")
	return -1
}

func (u *unit) get(t *testing.T, id string) memory.Node {
	t.Helper()
	n, err := u.st.Get(u.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMemoryTextIsEscaped: a memory's text is untrusted; every page that
// shows it escapes it (the list, its page, its neighbour's graph, a
// pass's diff).
func TestMemoryTextIsEscaped(t *testing.T) {
	u := newUnit(t)
	const evil = `<script>alert("x")</script><img src=x onerror=alert(1)>`
	res, err := u.st.Upsert(u.ctx, memory.Node{Subkind: memory.Decision, Scope: memory.ScopeProject, ProjectID: "shop", Label: evil,
		Source: memory.SourceAgent, AssertedBy: memory.AssertedInferred, Confidence: 0.7})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.st.Link(u.ctx, memory.Edge{Src: res.Node.ID, Dst: u.stripe.ID, Relation: memory.RelatesTo}); err != nil {
		t.Fatal(err)
	}
	c := client(t)
	u.login(t, c, tokShop)
	for _, path := range []string{"/memories", "/memory/" + res.Node.ID, "/memory/" + u.stripe.ID} {
		code, page := get(t, c, u.url+path)
		if code != http.StatusOK || strings.Contains(page, "<script>alert") || strings.Contains(page, "<img src=x") {
			t.Errorf("%s: %d, the text unescaped:\n%s", path, code, page)
		}
		if !strings.Contains(page, "&lt;script&gt;") && !strings.Contains(page, "&lt;img") {
			t.Errorf("%s does not show the text escaped", path)
		}
	}
}
