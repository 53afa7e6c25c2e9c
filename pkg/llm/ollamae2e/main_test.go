package ollamae2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/tools/tinymodel/tiny"
)

// Names of the models TestMain creates.
const (
	chatModel  = "engram-tiny"
	bareModel  = "engram-tiny-bare" // tool calls as bare JSON: Ollama's tag is "{"
	embedModel = "engram-tiny-embed"
	modelSeed  = 1
)

// testCalls are the fixed tool calls of the generated model: call i is
// emitted after tiny.CallControl(i).
var testCalls = []tiny.Call{
	{Name: "recall", Arguments: map[string]any{"query": "tiny model facts"}},
	{Name: "recall", Arguments: map[string]any{"query": "close } brace"}},
	{Name: "recall", Arguments: map[string]any{"query": "close } brace"}, Bare: true},
	{Name: "recall", Arguments: map[string]any{"query": "tiny model facts"}, Bare: true},
}

// server is the running Ollama server shared by the package's tests.
type server struct {
	bin     string
	extra   []string // extra environment, e.g. OLLAMA_NEW_ENGINE=1
	url     string   // http://127.0.0.1:port
	dir     string   // temporary folder: models, home, log, generated files
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	api     *api.Client
	version string
	files   tiny.Files

	// Timings of the start, for the report.
	readyIn    time.Duration
	createIn   map[string]time.Duration
	firstChat  time.Duration // includes loading the model
	firstEmbed time.Duration
}

var (
	srv        *server
	startErr   error
	skipReason string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bin := os.Getenv("ENGRAM_TEST_OLLAMA_BIN")
	if bin == "" {
		skipReason = "ENGRAM_TEST_OLLAMA_BIN is not set: build the pinned Ollama with `make ollama` " +
			"(scripts/ollama.sh build), then eval \"$(bash scripts/ollama.sh env)\" or run `bash scripts/ollama.sh test`"
		return m.Run()
	}
	s, err := start(bin)
	if err != nil {
		startErr = err
		if s != nil {
			startErr = fmt.Errorf("%w\n--- server log (tail) ---\n%s", err, s.logTail(4000))
			s.stop()
		}
		return m.Run()
	}
	srv = s
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- ollama server log (tail) ---\n%s\n", s.logTail(6000))
	}
	s.stop()
	return code
}

// need returns the shared server, or skips (locally) / fails (CI) the test
// when there is none.
func need(t testing.TB) *server {
	t.Helper()
	switch {
	case srv != nil:
		return srv
	case startErr != nil:
		t.Fatalf("real Ollama server did not start: %v", startErr)
	case os.Getenv("CI") != "":
		t.Fatalf("CI is set but %s", skipReason)
	default:
		t.Skip(skipReason)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start starts a server with extra environment variables, creates the tiny
// models and loads them.
func start(bin string, extra ...string) (*server, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("ENGRAM_TEST_OLLAMA_BIN: %w", err)
	}
	dir, err := os.MkdirTemp("", "engram-ollama-e2e-")
	if err != nil {
		return nil, err
	}
	s := &server{bin: bin, extra: extra, dir: dir, logPath: filepath.Join(dir, "server.log"), createIn: map[string]time.Duration{}}
	for _, sub := range []string{"models", "home", "tiny"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return s, err
		}
	}
	s.files, err = tiny.Generate(filepath.Join(dir, "tiny"), tiny.Options{Seed: modelSeed, Calls: testCalls})
	if err != nil {
		return s, err
	}

	port, err := freePort()
	if err != nil {
		return s, err
	}
	hostPort := fmt.Sprintf("127.0.0.1:%d", port)
	s.url = "http://" + hostPort
	u, _ := url.Parse(s.url)
	s.api = api.NewClient(u, http.DefaultClient)

	logf, err := os.Create(s.logPath)
	if err != nil {
		return s, err
	}
	defer logf.Close()
	s.cmd = exec.Command(bin, "serve")
	s.cmd.Env = s.env(hostPort)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	ownGroup(s.cmd)
	begin := time.Now()
	if err := s.cmd.Start(); err != nil {
		return s, fmt.Errorf("start %s serve: %w", bin, err)
	}
	s.exited = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.exited) }()

	// Poll until the server answers, generously: the machine may be loaded.
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		v, err := s.api.Version(ctx)
		cancel()
		if err == nil {
			s.version = v
			break
		}
		select {
		case <-s.exited:
			return s, fmt.Errorf("ollama serve exited before it was ready")
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("ollama serve not ready after 90s: %v", err)
		}
	}
	s.readyIn = time.Since(begin)

	for name, mf := range map[string]string{chatModel: s.files.Chat, bareModel: s.files.Bare, embedModel: s.files.Embed} {
		if err := s.create(name, mf); err != nil {
			return s, err
		}
	}
	return s, s.warmUp()
}

// warmUp loads both models with one call each (timed): a model that does
// not load fails every test with the server log.
func (s *server) warmUp() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stream := false
	begin := time.Now()
	err := s.api.Chat(ctx, &api.ChatRequest{Model: chatModel, Stream: &stream,
		Messages: []api.Message{{Role: "user", Content: "hi"}}}, func(api.ChatResponse) error { return nil })
	if err != nil {
		return fmt.Errorf("first chat: %w", err)
	}
	s.firstChat = time.Since(begin)
	if s.newEngine() {
		return nil // no embeddings there (TestNewEngine)
	}
	begin = time.Now()
	if _, err := s.api.Embed(ctx, &api.EmbedRequest{Model: embedModel, Input: "hi"}); err != nil {
		return fmt.Errorf("first embed: %w", err)
	}
	s.firstEmbed = time.Since(begin)
	return nil
}

// env is the server's whole environment: nothing of the developer's Ollama
// setup leaks in, and outbound HTTP goes to a closed port (no network).
func (s *server) env(hostPort string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(s.dir, "home"),
		"TMPDIR=" + os.TempDir(),
		"OLLAMA_HOST=" + hostPort,
		"OLLAMA_MODELS=" + filepath.Join(s.dir, "models"),
		"OLLAMA_MAX_LOADED_MODELS=2",
		"OLLAMA_NUM_PARALLEL=1",
		"HTTP_PROXY=http://127.0.0.1:9",
		"HTTPS_PROXY=http://127.0.0.1:9",
		"NO_PROXY=127.0.0.1,localhost",
	}, s.extra...)
}

// create runs `ollama create NAME -f MODELFILE` against the server.
func (s *server) create(name, modelfile string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, "create", name, "-f", filepath.Base(modelfile))
	cmd.Dir = filepath.Dir(modelfile)
	cmd.Env = s.env(strings.TrimPrefix(s.url, "http://"))
	begin := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ollama create %s: %w\n%s", name, err, out)
	}
	s.createIn[name] = time.Since(begin)
	return nil
}

func (s *server) newEngine() bool {
	for _, e := range s.extra {
		if e == "OLLAMA_NEW_ENGINE=1" {
			return true
		}
	}
	return false
}

func (s *server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.exited:
		case <-time.After(15 * time.Second):
		}
		killGroup(s.cmd)
		if s.exited != nil {
			<-s.exited
		}
	}
	if os.Getenv("ENGRAM_KEEP_OLLAMA_DIR") == "" {
		_ = os.RemoveAll(s.dir)
	} else {
		fmt.Fprintf(os.Stderr, "ollama e2e folder kept: %s\n", s.dir)
	}
}

func (s *server) logTail(n int) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}

// client returns an llm.Client for the shared server: every chat role uses
// the tiny chat model, embeddings the tiny embedding model.
func client(t testing.TB, edit ...func(*llm.Config)) *llm.Client {
	t.Helper()
	s := need(t)
	cfg := llm.DefaultConfig()
	cfg.Host = s.url
	chat := llm.ModelConfig{Name: chatModel, KeepAlive: 5 * time.Minute, Timeout: 2 * time.Minute}
	cfg.Extract, cfg.Consolidate, cfg.Summarize = chat, chat, chat
	cfg.Embed = llm.ModelConfig{Name: embedModel, KeepAlive: 5 * time.Minute, Timeout: 2 * time.Minute}
	for _, e := range edit {
		e(&cfg)
	}
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatalf("llm.New: %v", err)
	}
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestServerFacts checks the server is the pinned build and logs the start
// timings.
func TestServerFacts(t *testing.T) {
	s := need(t)
	if s.version == "" || s.version == "0.0.0" {
		t.Errorf("server version %q: built without -X github.com/ollama/ollama/version.Version", s.version)
	}
	if s.version != pinnedVersion {
		t.Errorf("server version %q, this suite documents %s (docs/ollama.md): update both together", s.version, pinnedVersion)
	}
	list, err := s.api.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list.Models {
		names = append(names, m.Name)
	}
	for _, want := range []string{chatModel + ":latest", embedModel + ":latest"} {
		if !contains(names, want) {
			t.Errorf("model %s not listed; have %v", want, names)
		}
	}
	st, err := os.Stat(s.files.GGUF)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ollama %s ready in %v; create %v; first chat %v, first embed %v (model loads); gguf %d bytes",
		s.version, s.readyIn, s.createIn, s.firstChat, s.firstEmbed, st.Size())
}

// pinnedVersion is the Ollama version scripts/ollama.sh builds.
const pinnedVersion = "0.17.4"

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
