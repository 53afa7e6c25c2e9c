package consolefx_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/console/consolefx"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/internal/testpki"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

func start(t *testing.T, cfg config.Config) *consolefx.Console {
	t.Helper()
	st := storetest.OpenSQLite(t)
	var c *consolefx.Console
	app := fxtest.New(t,
		fx.Supply(cfg, zap.NewNop()),
		fx.Provide(func() memory.Store { return st }, func() (*llm.Client, error) { return llm.New(cfg.LLM) }),
		consolefx.Module(),
		fx.Populate(&c),
	)
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	return c
}

func TestOffWhenAddrIsOff(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Console.Addr = "off"
	if c := start(t, cfg); c.URL() != "" || c.Server != nil {
		t.Fatalf("the console runs with ENGRAM_CONSOLE_ADDR=off: %q", c.URL())
	}
}

// TestServesWithATokenAndALinkInTheDataDir: the admin token is generated
// private into the data dir, the one-time link written beside it (naming
// the real port), and the console answers; on the default port taken it
// takes a free one.
func TestServesWithATokenAndALinkInTheDataDir(t *testing.T) {
	taken, err := net.Listen("tcp", config.DefaultConsoleAddr)
	if err != nil {
		t.Skipf("the default console port is in use here: %v", err)
	}
	defer taken.Close()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	c := start(t, cfg)
	if c.URL() == "" || strings.HasSuffix(c.URL(), ":7476") {
		t.Fatalf("url %q: want a free port while the default one is taken", c.URL())
	}
	st, err := os.Stat(filepath.Join(cfg.DataDir, "console-admin.token"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("admin token file: %v %v", st, err)
	}
	link, err := os.ReadFile(cfg.ConsoleLinkFile())
	if err != nil || !strings.HasPrefix(string(link), c.URL()+"/login/once?code=") {
		t.Fatalf("link file %q %v", link, err)
	}
	resp, err := http.Get(c.URL() + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("login page: %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
}

func TestRefusesAPlainConsoleOffLoopback(t *testing.T) {
	cfg := config.Default()
	cfg.Console.Addr = "0.0.0.0:7476"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "ENGRAM_CONSOLE_TLS_CERT") {
		t.Fatalf("a console on 0.0.0.0 without TLS: %v", err)
	}
}

// TestTLS: with a certificate the console is served over HTTPS, on any
// address, and its cookies are Secure.
func TestTLS(t *testing.T) {
	pki := testpki.New(t, t.TempDir())
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Console = config.Console{Addr: "0.0.0.0:0", TLSCert: pki.ServerCert, TLSKey: pki.ServerKey}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a TLS console off loopback: %v", err)
	}
	c := start(t, cfg)
	if !strings.HasPrefix(c.URL(), "https://127.0.0.1:") {
		t.Fatalf("url %q", c.URL())
	}
	caPEM, err := os.ReadFile(pki.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get(c.URL() + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var secure bool
	for _, ck := range resp.Cookies() {
		secure = ck.Secure && ck.HttpOnly && ck.SameSite == http.SameSiteStrictMode
	}
	if resp.StatusCode != http.StatusOK || !secure {
		t.Fatalf("login over TLS: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	if plain, err := http.Get(strings.Replace(c.URL(), "https://", "http://", 1) + "/login"); err == nil {
		plain.Body.Close()
		if plain.StatusCode == http.StatusOK || len(plain.Cookies()) > 0 {
			t.Fatalf("the TLS console answered plain HTTP: %d", plain.StatusCode)
		}
	}
}
