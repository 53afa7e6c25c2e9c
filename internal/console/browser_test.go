package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/fx"

	"github.com/engram-memory/engram/internal/app/apptest"
	"github.com/engram-memory/engram/internal/console/consolefx"
	"github.com/engram-memory/engram/internal/erase/erasefx"
	"github.com/engram-memory/engram/internal/runner/dlq"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// chromium finds the browser: $ENGRAM_CHROMIUM, Debian's chromium, or
// Google's. scripts/chromium.sh installs Debian's where it is missing (CI
// does); without it the browser tests skip locally and fail in CI.
func chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{os.Getenv("ENGRAM_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium: scripts/chromium.sh installs Debian's (scripts/test.sh runs it)")
	}
	t.Skip("no Chromium (bash scripts/chromium.sh installs it)")
	return ""
}

// browser starts a headless Chromium with the flags this machine needs
// (no sandbox as root, no background networking: the network is closed)
// and a fresh profile; the context is its first tab.
func browser(t testing.TB, ctx context.Context) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancel)
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(cancelB)
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		t.Fatalf("chromium: %v", err)
	}
	return bctx
}

// served is engram's process (the same fx app as engram serve: embedded
// NATS, SQLite, the console module) with the world seeded into its store.
type served struct {
	*world
	url string
	con *consolefx.Console
	run apptest.Running
}

func serve(t *testing.T, ctx context.Context) *served {
	t.Helper()
	models := llmtest.New(t)
	cfg := apptest.Config(t, models.Config())
	cfg.Console.Addr = "127.0.0.1:0"
	cfg.Console.Tokens = writeTokens(t)
	var (
		st  memory.Store
		con *consolefx.Console
	)
	run := apptest.StartConfig(ctx, t, cfg, "console-test", "", []fx.Option{erasefx.Module(), consolefx.Module(), fx.Populate(&st, &con)})
	if con.URL() == "" {
		t.Fatal("the console is not served")
	}
	return &served{world: seed(t, ctx, st, models), url: con.URL(), con: con, run: run}
}

// page helpers: each fails the test with the page's text on error.
type tab struct {
	t   *testing.T
	ctx context.Context
	url string
	dir string // screenshots
}

func (b *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v\npage:\n%s", what, err, b.text("body"))
	}
}

// click clicks sel, which loads another page, and waits until the new page
// has loaded (a query right after the click could find the old page's
// elements).
func (b *tab) click(what, sel string) {
	b.t.Helper()
	b.eval(`window.__engramOld = true; "ok"`)
	b.do(what, chromedp.Click(chromedp.CSS(sel)))
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__engramOld === undefined && document.readyState === "complete"`))
		cancel()
		if err == nil && v {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: the next page did not load (%v)\npage:\n%s", what, err, b.text("body"))
		}
		time.Sleep(30 * time.Millisecond)
	}
}

func (b *tab) open(path string) {
	b.t.Helper()
	b.do("open "+path, chromedp.Navigate(b.url+path), chromedp.WaitReady(chromedp.CSS("body")))
}

func (b *tab) text(sel string) string {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		return fmt.Sprintf("(no %s: %v)", sel, err)
	}
	return s
}

func (b *tab) has(sel string, wants ...string) {
	b.t.Helper()
	got := b.text(sel)
	for _, w := range wants {
		if !strings.Contains(got, w) {
			b.t.Errorf("%s lacks %q:\n%s", sel, w, got)
		}
	}
}

func (b *tab) hasNot(sel string, nots ...string) {
	b.t.Helper()
	got := b.text(sel)
	for _, n := range nots {
		if strings.Contains(got, n) {
			b.t.Errorf("%s shows %q:\n%s", sel, n, got)
		}
	}
}

func (b *tab) eval(js string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// shot writes a PNG of the viewport to dir/name.png.
func (b *tab) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// shotOf writes a PNG of the element sel to dir/name.png.
func (b *tab) shotOf(name, sel string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("screenshot %s of %s: %v", name, sel, err)
	}
	if err := os.WriteFile(filepath.Join(b.dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *tab) login(token string) {
	b.t.Helper()
	b.open("/login")
	b.do("type the token", chromedp.SendKeys(chromedp.CSS("#token"), token))
	b.click("log in", "#login-button")
}

// screenshotDir is docs/console when ENGRAM_WRITE_SCREENSHOTS is set (the
// committed pictures docs/console.md shows), else a temporary folder.
func screenshotDir(t *testing.T) string {
	if os.Getenv("ENGRAM_WRITE_SCREENSHOTS") != "" {
		dir := filepath.Join("..", "..", "docs", "console")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// TestBrowser drives the console in headless Chromium against the serve
// process: log in with a project token and see that project only, search
// and open a memory, a turn's block and why each line is there, undo the
// consolidation pass and see the forgotten memory come back, resolve the
// held near-duplicate, refusals without a session and without the CSRF
// token, another tenant's token, the operator's operations page; and
// screenshots of the main pages.
func TestBrowser(t *testing.T) {
	ctx := timeout(t, 3*time.Minute)
	s := serve(t, ctx)
	b := &tab{t: t, ctx: browser(t, ctx), url: s.url, dir: screenshotDir(t)}

	// Without a session: the login page, and no JSON.
	b.open("/memories")
	b.has("body", "Engram memory console", "Token")
	if got := b.eval(`fetch("/api/memories?p=shop").then(r => String(r.status))`); got != "401" {
		t.Errorf("JSON without a session: %s, want 401", got)
	}

	// A project token sees its project (and the tenant's global memories).
	b.login(tokShop)
	b.has("#memories", labelStripe, labelFly, labelRaceNew, labelGlobal)
	b.hasNot("#memories", labelBlog, labelAcme, labelStaging)
	b.shot("memories")
	b.open("/memories?p=blog")
	b.has("#error", "does not reach")

	// Search as the injector recalls, and open the memory.
	b.open("/memories?p=shop")
	b.do("type the search", chromedp.SendKeys(chromedp.CSS("#q"), "stripe checkout payments"))
	b.click("search", "#search")
	b.has("#memories", labelStripe)
	b.has(".note", "the injector's recall")
	b.click("open the hit", "#memories a.mem")
	b.has("#title", labelStripe)
	b.has("#asserted", "user")
	b.has("#edges", labelFly)
	if n := b.eval(`String(document.querySelectorAll("svg.graph g.nb").length)`); n != "1" {
		t.Errorf("the graph draws %s neighbours, want 1", n)
	}
	b.open("/memory/" + s.fly.ID + "?p=shop") // the memory with the most edges
	if n := b.eval(`String(document.querySelectorAll("svg.graph g.nb").length)`); n != "3" {
		t.Errorf("the deploy decision's graph draws %s neighbours, want 3", n)
	}
	b.shot("memory")

	// Without the CSRF token the browser's own session cannot change anything.
	got := b.eval(fmt.Sprintf(`fetch("/memory/%s/pin?p=shop", {method: "POST", body: new URLSearchParams({pinned: "true"})}).then(r => String(r.status))`, s.fly.ID))
	if got != "403" {
		t.Errorf("a change without the CSRF token: %s, want 403", got)
	}
	if n, _ := s.st.Get(ctx, s.fly.ID); n.Pinned {
		t.Fatal("a change without the CSRF token was made")
	}

	// A turn's block as it was injected and why each line is there: the
	// rule that admitted it, and for a recalled line each retrieval
	// channel's rank and score and the prior; the candidates the policy
	// cut. The first turn's record keeps no explanation and says so.
	b.open("/session?p=shop&s=s1")
	b.has("#turn-turn-2", "<engram-memory>", labelStripe, labelFly, "standing instruction: the user stated it",
		"best recalled hit", "block policy of this turn: relative floor", "lexical #", "cosine", "prior (", "ranked candidates the block policy cut")
	b.has("#turn-turn-1", "[Engram memory]", "keeps no explanation")
	b.has("#summaries", "9000 → 1200", "1–2")
	lines := b.eval(`String(document.querySelectorAll("#turn-turn-2 tr.line").length)`)
	ruled := b.eval(`String(document.querySelectorAll("#turn-turn-2 tr.line .rule").length)`)
	scored := b.eval(`String([...document.querySelectorAll("#turn-turn-2 tr.line")].filter(r => r.querySelectorAll("ul.channels li").length > 0).length)`)
	if want := fmt.Sprint(len(s.block.IDs)); lines != want || ruled != want {
		t.Errorf("turn 2 shows %s lines, %s with their rule; the block has %s", lines, ruled, want)
	}
	if want := fmt.Sprint(len(s.block.Recalled)); scored != want {
		t.Errorf("turn 2 shows the channels of %s lines; the block recalled %s", scored, want)
	}
	b.shot("session")
	b.eval(`document.querySelector("#turn-turn-2 details.cut-list").open = true; "ok"`)
	b.shotOf("turn-why", "#turn-turn-2")

	// The pass as a diff, then undo it: the forgotten memory comes back.
	b.open("/pass/" + s.pass.Pass.ID + "?p=shop")
	b.has("#journal", "forget", labelStaging, "the user said staging moved to MySQL", "revise", "the user added go vet", "hold", heldText)
	if got := b.text("#journal ins"); got != "and go vet" {
		t.Errorf("the revision's added words: %q", got)
	}
	b.shot("pass")
	b.eval(`window.confirm = () => true; "ok"`)
	b.click("undo", "#undo-button")
	b.has("#undo-report", "restored (forgotten by the pass)", "reopened; its revision")
	b.has("#status", "undone")
	b.open("/memory/" + s.staging.ID + "?p=shop")
	b.has("#state", "live")
	if n, _ := s.st.Get(ctx, s.staging.ID); !n.Live() {
		t.Fatal("the undone pass's forgotten memory is not live")
	}

	// The held near-duplicate: keep both.
	b.open("/review?p=shop")
	b.has("#held", heldText, labelFly)
	b.shot("review")
	b.click("keep both", `#held button[value="keep"]`)
	b.has("#flash", "Kept both")
	b.has("#resolved", heldText, "kept by console:alice")
	b.hasNot("#held", heldText)
	live, err := s.st.Timeline(ctx, memory.TimelineQuery{Filter: memory.Filter{ProjectID: "shop"}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range live {
		found = found || n.Label == heldText
	}
	if !found {
		t.Fatal("keep both did not store the held fact")
	}

	// Another tenant's token sees nothing of this one.
	b.click("log out", ".logout button")
	b.login(tokAcme)
	b.has("#memories", labelAcme)
	b.hasNot("body", labelStripe, labelFly, labelGlobal)
	b.open("/memory/" + s.stripe.ID + "?p=shop")
	b.has("#error", "not found")
	b.open("/passes?p=shop")
	b.hasNot("body", s.pass.Pass.ID)

	// The operator: the one-time link, then operations.
	b.click("log out", ".logout button")
	b.do("open the one-time link", chromedp.Navigate(s.con.Server.LoginLink()), chromedp.WaitReady(chromedp.CSS("#once-button")))
	b.click("use the one-time link", "#once-button")
	b.open("/ops")
	b.has("#streams", "ENGRAM_IN", "ENGRAM_OUT", "ENGRAM_DLQ")
	b.has("#consumers", "injector")
	b.has("#checks", "store")

	// Dead letters: two, written as the runner writes them; show one,
	// replay it (back on its subject in ENGRAM_IN), drop the other.
	js := s.run.Process.Bus.JS
	topo := events.DefaultTopology()
	w := dlq.NewWriter(js, topo.Subjects())
	subject := topo.Subjects().In(events.TypeTurnStarted, "", "shop", "s9")
	for i, reason := range []string{"undecodable: unexpected end of JSON input", "invalid: no project"} {
		if err := w.Put(ctx, dlq.Letter{Consumer: events.ConsumerInjector, Reason: reason, Subject: subject, Stream: topo.In.Name,
			Sequence: uint64(100 + i), Deliveries: 1, MsgID: fmt.Sprintf("ev-%d", i), Data: []byte(`{"type":"turn_started"`)}); err != nil {
			t.Fatal(err)
		}
	}
	b.open("/ops")
	b.has("#letters", "undecodable: unexpected end of JSON input", "invalid: no project")
	b.shot("ops")
	letters, err := dlq.NewStore(js, topo.DLQ.Name).List(ctx, 0, 10)
	if err != nil || len(letters) != 2 {
		t.Fatalf("letters %v %v", letters, err)
	}
	b.open(fmt.Sprintf("/ops/dlq/%d", letters[0].DLQSequence))
	b.has("#reason", "undecodable")
	b.has("#body", `"type":"turn_started"`)
	b.click("replay", "#replay")
	b.has("#flash", "replayed")
	b.open(fmt.Sprintf("/ops/dlq/%d", letters[1].DLQSequence))
	b.eval(`window.confirm = () => true; "ok"`)
	b.click("drop", "#drop")
	b.has("#flash", "dropped")
	if left, err := dlq.NewStore(js, topo.DLQ.Name).List(ctx, 0, 10); err != nil || len(left) != 0 {
		t.Fatalf("after replay and drop the DLQ holds %v (%v)", left, err)
	}
	in, err := js.Stream(ctx, topo.In.Name)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := in.GetLastMsgForSubject(ctx, subject); err != nil || string(m.Data) != `{"type":"turn_started"` {
		t.Fatalf("the replayed letter is not back on %s: %v", subject, err)
	}

	// Erase session s1 of shop: the scope, the typed confirmation, the
	// receipt; the session's transcript and records are gone, the other
	// project's memory is not.
	b.open("/erase?p=shop&session=s1")
	b.has("#erase-hint", "erase session s1")
	b.shot("erase")
	b.do("confirm", chromedp.SendKeys(chromedp.CSS("#erase-confirm"), "erase session s1"))
	b.eval(`window.confirm = () => true; "ok"`)
	b.click("erase", "#erase-button")
	b.has("#receipt", "tenant (default), project shop, session s1", "transcript messages")
	if got := b.text("#complete"); got != "complete" {
		t.Errorf("the receipt says %q, want complete", got)
	}
	if got := b.text("#receipt-text"); !strings.Contains(got, "nothing of the scope") || strings.Contains(got, "FOUND") || strings.Contains(got, "NOT DONE") {
		t.Errorf("the receipt's verification:\n%s", got)
	}
	b.shot("receipt")
	if msgs, err := s.st.Messages(ctx, memory.SessionRef{Project: "shop", Session: "s1"}, 0, 0); err != nil || len(msgs) != 0 {
		t.Fatalf("after the erasure s1 holds %d messages (%v)", len(msgs), err)
	}
	if _, err := s.st.GetInjection(ctx, memory.SessionRef{Project: "shop", Session: "s1"}, "turn-1"); !memory.IsNotFound(err) {
		t.Fatalf("after the erasure s1's injection record: %v", err)
	}
	if n, err := s.st.Get(ctx, s.blog.ID); err != nil || !n.Live() {
		t.Fatalf("the other project's memory after the erasure: %v", err)
	}
	b.open("/session?p=shop&s=s1")
	b.has("body", "No transcript stored for this session.")

	// The session cookie is HttpOnly and SameSite=Strict.
	if got := b.eval(`document.cookie`); strings.Contains(got, "engram_console") {
		t.Errorf("the session cookie is readable by scripts: %q", got)
	}
}
