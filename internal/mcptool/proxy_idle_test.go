package mcptool

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/engram-memory/engram/internal/storetest"
)

// proxyOver serves the tool's HTTP handler with a short session timeout
// behind a handler that can be swapped (a serve restart forgets every
// session), and connects an agent to a proxy dialled to it.
func proxyOver(t *testing.T, f *fixture, timeout time.Duration, opts ...DialOption) (*mcp.ClientSession, *Remote, func()) {
	t.Helper()
	tokens, err := LoadTokens(tokensFile(t))
	if err != nil {
		t.Fatal(err)
	}
	newHandler := func() http.Handler {
		h, err := HTTPHandler(f.tool, tokens, HTTPOptions{SessionTimeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	var cur atomic.Pointer[http.Handler]
	h := newHandler()
	cur.Store(&h)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*cur.Load()).ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	url, err := RemoteURL(srv.URL, shop)
	if err != nil {
		t.Fatal(err)
	}
	remote, err := Dial(f.ctx, url, shopToken, "test", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remote.Close() })
	proxy, err := NewProxy(f.ctx, remote, "test")
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := proxy.Connect(f.ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := newClient().Connect(f.ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	restart := func() {
		h := newHandler()
		cur.Store(&h)
	}
	return cs, remote, restart
}

// TestProxyKeepAlive: the proxy's session with serve survives a quiet
// spell several times serve's idle timeout: Dial pings, and the pings keep
// the same session (no redial needed).
func TestProxyKeepAlive(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite)
	cs, remote, _ := proxyOver(t, f, time.Second, WithKeepAlive(250*time.Millisecond))
	before := remote.session().ID()
	time.Sleep(3 * time.Second)
	if r := call(t, cs, Op{Op: OpStats})[0]; !r.OK {
		t.Fatalf("after an idle spell: %+v", r)
	}
	if after := remote.session().ID(); after != before {
		t.Fatalf("the session was lost to the idle timeout (redialled: %s -> %s)", before, after)
	}
}

// TestProxyRedial: when serve no longer knows the session (restarted, or
// it timed out with no keepalive), the proxy dials again once and the
// call goes through.
func TestProxyRedial(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite)
	cs, remote, restart := proxyOver(t, f, 300*time.Millisecond, WithKeepAlive(0))
	if r := call(t, cs, Op{Op: OpStats})[0]; !r.OK {
		t.Fatal(r.Error)
	}
	before := remote.session().ID()
	time.Sleep(time.Second) // serve closes the idle session
	if r := call(t, cs, Op{Op: OpStats})[0]; !r.OK {
		t.Fatalf("after serve dropped the session: %+v", r)
	}
	restart() // serve forgets every session
	if r := call(t, cs, Op{Op: OpForget, ID: f.ids["webhook"], Reason: "after a restart"})[0]; !r.OK {
		t.Fatalf("after serve restarted: %+v", r)
	}
	if remote.session().ID() == before || f.get("webhook").ArchivedAt.IsZero() {
		t.Fatal("no redial, or the call did not reach the store")
	}
}
