// Package typescript_test runs the TypeScript client's own tests (node
// --test) from `go test`, so that `make test` and CI run them: against the
// shared vectors, the AsyncAPI document (with the official parser), a real
// `engram serve` with a scripted model, and NATS servers that take each
// credential kind Engram's roles use; then it checks what `npm pack` ships.
package typescript_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/internal/natsembed"
	"github.com/engram-memory/engram/internal/nodetest"
	"github.com/engram-memory/engram/internal/testpki"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	nodetest.Cleanup()
	os.Exit(code)
}

// summary is the scripted model's summary (test/serve.test.mjs expects it):
// the compactor's template, its "Active task" section first.
const summary = "## Active task\n\"How do we deploy the web app?\"\n\n## Goal\nDeploy the web app through the release workflow.\n"

// TestTypeScriptClient runs `node --test` on the package's tests with a
// real engram binary, a scripted model and the credential fixtures.
func TestTypeScriptClient(t *testing.T) {
	if testing.Short() {
		t.Skip("installs npm packages and runs engram serve")
	}
	pkg := nodetest.Package(t)
	bin := nodetest.Engram(t)
	model, err := llmtest.Start(llmtest.WithoutRecording())
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	// serve's default model for every role (no model names configured).
	model.AddModel(llm.DefaultChatModel)
	// Structured calls (extraction) get a valid instance of their schema;
	// plain ones (the compactor's summary) the summary.
	model.SetDefault(llmtest.Func(func(req api.ChatRequest) llmtest.Reply {
		if len(req.Format) > 0 {
			return llmtest.Example()
		}
		return llmtest.Text(summary)
	}))
	fixture := authFixture(t)
	env := []string{
		"ENGRAM_BIN=" + bin,
		"ENGRAM_TEST_OLLAMA_HOST=" + model.URL(),
		"ENGRAM_REPO=" + nodetest.Root(),
		"ENGRAM_TS_AUTH_FIXTURE=" + fixture,
	}
	serveLog := filepath.Join(t.TempDir(), "serve.log")
	env = append(env, "ENGRAM_TS_SERVE_LOG="+serveLog)
	tests, err := filepath.Glob(filepath.Join(pkg, "test", "*.test.mjs"))
	if err != nil || len(tests) < 4 {
		t.Fatalf("test files %v: %v", tests, err)
	}
	out, err := nodetest.Node(pkg, env, 10*time.Minute, append([]string{"--test", "--test-reporter=spec"}, tests...)...)
	t.Logf("node --test:\n%s", out)
	if err != nil {
		if b, rerr := os.ReadFile(serveLog); rerr == nil {
			t.Logf("engram serve's log:\n%s", b)
		}
		t.Fatalf("node --test: %v", err)
	}
	for _, want := range []string{"a whole platform turn loop", "bodies that are refused, for Go's reasons",
		"the official AsyncAPI parser accepts the document", "the deadline path", "creds file"} {
		if !strings.Contains(out, want) {
			t.Errorf("node --test did not run %q", want)
		}
	}
	if m := regexp.MustCompile(`(?m)^\S* ?skipped (\d+)$`).FindStringSubmatch(out); m == nil || m[1] != "0" {
		t.Errorf("node --test skipped tests, or printed no summary (every test must run here): %v", m)
	}
}

// TestPackContents: what `npm pack` ships: the built JavaScript with its
// type declarations, the README and package.json, nothing else (no tests,
// no sources, no lock file).
func TestPackContents(t *testing.T) {
	if testing.Short() {
		t.Skip("installs npm packages")
	}
	pkg := nodetest.Package(t)
	out, err := nodetest.Run(pkg, []string{"npm_config_loglevel=error"}, 5*time.Minute, "npm", "pack", "--dry-run", "--json")
	if err != nil {
		t.Fatalf("npm pack: %v\n%s", err, out)
	}
	// npm prints the prepack build's output before the JSON.
	var packs []struct {
		Name  string `json:"name"`
		Files []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	if i := strings.Index(out, "[\n"); i >= 0 {
		out = out[i:]
	}
	if err := json.Unmarshal([]byte(out), &packs); err != nil || len(packs) != 1 {
		t.Fatalf("npm pack --json: %v\n%s", err, out)
	}
	var files []string
	for _, f := range packs[0].Files {
		files = append(files, f.Path)
	}
	t.Logf("%s: %s", packs[0].Name, strings.Join(files, " "))
	if packs[0].Name != "@engram-memory/client" {
		t.Errorf("package name %q", packs[0].Name)
	}
	for _, want := range []string{"package.json", "README.md", "dist/index.js", "dist/index.d.ts", "dist/client.js", "dist/client.d.ts",
		"dist/contract.js", "dist/contract.d.ts", "dist/event.js", "dist/event.d.ts", "dist/tokens.d.ts", "dist/id.d.ts"} {
		if !slices.Contains(files, want) {
			t.Errorf("the package lacks %s", want)
		}
	}
	for _, f := range files {
		if f != "package.json" && f != "README.md" && !strings.HasPrefix(f, "dist/") || strings.Contains(f, "test") {
			t.Errorf("the package ships %s", f)
		}
	}
}

// authFixture starts NATS servers that take each credential kind of
// natsauth.Client (mutual TLS with a user and password, a token, an nkey,
// a creds file of a decentralised-auth account) and writes what a client
// needs to reach them to a JSON file, whose path it returns.
func authFixture(t *testing.T) string {
	dir := t.TempDir()
	k := testpki.New(t, dir)
	start := func(conf string) string {
		path := filepath.Join(t.TempDir(), "server.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		srv, err := natsembed.Start(natsembed.Options{ConfigFile: path, StoreDir: t.TempDir(), Listen: "127.0.0.1:-1"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		return fmt.Sprintf("127.0.0.1:%d", srv.Addr().(*net.TCPAddr).Port)
	}
	tlsConf := fmt.Sprintf("tls {\n cert_file: %q\n key_file: %q\n ca_file: %q\n verify: true\n}\n", k.ServerCert, k.ServerKey, k.CA)

	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	useed, _ := ukp.Seed()
	seedFile := filepath.Join(dir, "user.nk")
	if err := os.WriteFile(seedFile, useed, 0o600); err != nil {
		t.Fatal(err)
	}
	users := start(tlsConf + fmt.Sprintf("authorization {\n users: [\n  {user: platform, password: \"tls-password\"}\n  {nkey: %s}\n ]\n}\n", upub))
	token := start(tlsConf + "authorization {\n token: \"the-token-1234\"\n}\n")

	// A creds file: an operator, an account it signs, a user the account
	// signs; the server trusts the operator and knows the account.
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	ojwt, err := jwt.NewOperatorClaims(opub).Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	akp, _ := nkeys.CreateAccount()
	apub, _ := akp.PublicKey()
	ajwt, err := jwt.NewAccountClaims(apub).Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	creds := func(signer nkeys.KeyPair, name string) string {
		kp, _ := nkeys.CreateUser()
		pub, _ := kp.PublicKey()
		seed, _ := kp.Seed()
		uc := jwt.NewUserClaims(pub)
		uc.Name = name
		ujwt, err := uc.Encode(signer)
		if err != nil {
			t.Fatal(err)
		}
		b, err := jwt.FormatUserConfig(ujwt, seed)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name+".creds")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := creds(akp, "platform")
	stranger, _ := nkeys.CreateAccount()
	bad := creds(stranger, "stranger") // signed by an account the server does not know
	operatorFile := filepath.Join(dir, "operator.jwt")
	if err := os.WriteFile(operatorFile, []byte(ojwt), 0o600); err != nil {
		t.Fatal(err)
	}
	// Without JetStream (natsembed's), which an operator-mode server would
	// want a system account for: the creds check is the handshake's.
	confFile := filepath.Join(dir, "decentral.conf")
	conf := fmt.Sprintf("listen: \"127.0.0.1:-1\"\noperator: %q\nresolver: MEMORY\nresolver_preload: {\n %s: %q\n}\n", operatorFile, apub, ajwt)
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(confFile)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("the operator-mode NATS server is not ready")
	}
	t.Cleanup(srv.Shutdown)
	decentral := strings.TrimPrefix(srv.ClientURL(), "nats://")

	f := map[string]any{
		"tls":   map[string]string{"url": "tls://" + users, "ca": k.CA, "cert": k.ClientCert, "key": k.ClientKey, "user": "platform", "password": "tls-password"},
		"token": map[string]string{"url": "tls://" + token, "ca": k.CA, "cert": k.ClientCert, "key": k.ClientKey, "token": "the-token-1234"},
		"nkey":  map[string]string{"url": "tls://" + users, "ca": k.CA, "cert": k.ClientCert, "key": k.ClientKey, "seedFile": seedFile},
		"creds": map[string]string{"url": "nats://" + decentral, "credsFile": good, "strangerCredsFile": bad},
	}
	b, _ := json.MarshalIndent(f, "", "  ")
	path := filepath.Join(dir, "auth.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
