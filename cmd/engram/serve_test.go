package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/internal/nodetest"
	"github.com/engram-memory/engram/pkg/events"
)

// buildEngram builds the engram binary with the test worker, once per test
// binary run (removed by TestMain).
func buildEngram(t *testing.T) string {
	t.Helper()
	testBuild.Do(func() {
		dir, err := os.MkdirTemp("", "engram-test")
		if err != nil {
			testBuildErr = err
			return
		}
		tmpDirs = append(tmpDirs, dir)
		bin := filepath.Join(dir, "engram")
		cmd := exec.Command("go", "build", "-tags", "engram_testworker", "-o", bin, ".")
		cmd.Stderr = os.Stderr
		if testBuildErr = cmd.Run(); testBuildErr == nil {
			testBin = bin
		}
	})
	if testBuildErr != nil {
		t.Fatalf("go build: %v", testBuildErr)
	}
	return testBin
}

var (
	testBuild    sync.Once
	testBin      string
	testBuildErr error
	tmpDirs      []string
)

// served is a running `engram serve`.
type served struct {
	cmd     *exec.Cmd
	natsURL string
	httpURL string
	dataDir string
	startup time.Duration
	mu      sync.Mutex
	stderr  bytes.Buffer
	exited  chan error
	readyAt time.Duration
}

func (s *served) logs() string { s.mu.Lock(); defer s.mu.Unlock(); return s.stderr.String() }

// startServe runs `engram serve` on random ports with dataDir and waits for
// the ready line.
func startServe(t *testing.T, bin, dataDir string, env []string, args ...string) *served {
	t.Helper()
	t0 := time.Now()
	cmd := exec.Command(bin, append([]string{"serve", "-nats-listen", "127.0.0.1:-1", "-http", "127.0.0.1:0",
		"-log-format", "json", "-data", dataDir}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &served{cmd: cmd, exited: make(chan error, 1), dataDir: dataDir}
	ready := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.stderr.WriteString(line + "\n")
			s.mu.Unlock()
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "engram ready" {
				select {
				case ready <- m:
				default:
				}
			}
		}
	}()
	go func() { err := cmd.Wait(); pw.Close(); s.exited <- err }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-s.exited
		}
	})
	select {
	case m := <-ready:
		s.natsURL, _ = m["nats"].(string)
		s.httpURL, _ = m["http"].(string)
		s.readyAt = time.Since(t0)
	case err := <-s.exited:
		t.Fatalf("engram serve exited before ready: %v\n%s", err, s.logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("engram serve not ready within 60s:\n%s", s.logs())
	}
	if s.natsURL == "" || s.httpURL == "" {
		t.Fatalf("ready line without URLs:\n%s", s.logs())
	}
	return s
}

// stop sends SIGTERM and waits for a clean exit.
func (s *served) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.exited:
		if err != nil {
			t.Fatalf("engram serve exit after SIGTERM: %v\n%s", err, s.logs())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("engram serve did not stop within 60s of SIGTERM:\n%s", s.logs())
	}
}

// env points a CLI subcommand at s: its URLs and its data dir (whose
// credentials the CLI reads).
func (s *served) env() []string {
	return []string{"ENGRAM_NATS_URL=" + s.natsURL, "ENGRAM_HTTP_ADDR=" + strings.TrimPrefix(s.httpURL, "http://"),
		"ENGRAM_DATA=" + s.dataDir}
}

// connect connects to s's NATS as role, with the password serve generated
// into its data dir.
func (s *served) connect(t *testing.T, role string) *nats.Conn {
	t.Helper()
	creds, err := natsauth.LoadCredentials(s.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(s.natsURL, nats.UserInfo(role, creds.Users[role]))
	if err != nil {
		t.Fatalf("connect as %s: %v", role, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// engram runs a CLI subcommand against s and returns its stdout.
func (s *served) engram(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), s.env()...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("engram %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	t0 := time.Now()
	defer func() { t.Logf("waited %s for %s", time.Since(t0).Round(time.Millisecond), what) }()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func getReadyz(t *testing.T, base string) (int, health.Report) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		return 0, health.Report{}
	}
	defer resp.Body.Close()
	var rep health.Report
	_ = json.NewDecoder(resp.Body).Decode(&rep)
	return resp.StatusCode, rep
}

func TestServeEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the engram binary")
	}
	bin := buildEngram(t)
	dataDir := filepath.Join(t.TempDir(), "data") // empty, not even created
	defer func() {
		if _, err := os.Stat(filepath.Join(dataDir, "engram.db")); err != nil {
			t.Errorf("no SQLite database in the data dir: %v", err)
		}
	}()
	rejectFile := filepath.Join(t.TempDir(), "reject")
	if err := os.WriteFile(rejectFile, []byte("bad-project\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, bin, dataDir, []string{"ENGRAM_TESTWORKER_REJECT_FILE=" + rejectFile})
	t.Logf("engram serve: ready line after %s (process start to ready)", s.readyAt)

	waitFor(t, "/readyz 200", func() bool { code, _ := getReadyz(t, s.httpURL); return code == 200 })
	// Secure by default: serve's NATS refuses anonymous clients.
	if nc, err := nats.Connect(s.natsURL); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected to engram serve's NATS")
	}
	if !strings.Contains(s.logs(), `"nats_credentials":"`+natsauth.CredentialsPath(dataDir)+`"`) {
		t.Errorf("the ready line does not name the credentials file:\n%s", s.logs())
	}
	// Ready comes before the memories are loaded (in the background, a few
	// milliseconds for an empty store, longer on a busy machine): the store
	// reports degraded until then.
	var rep health.Report
	checks := map[string]string{}
	waitFor(t, "the store loaded", func() bool {
		_, rep = getReadyz(t, s.httpURL)
		for _, c := range rep.Checks {
			checks[c.Name] = c.Status
		}
		return checks["store"] == health.StatusOK
	})
	if checks["nats"] != health.StatusOK || checks["store"] != health.StatusOK || checks["worker:compactor"] != health.StatusOK {
		t.Fatalf("readiness checks %+v", rep.Checks)
	}

	nc := s.connect(t, natsauth.RoleAdmin)
	js, _ := jetstream.New(nc)
	cl, err := events.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Events from the Go client: the test worker (compactor) acks these.
	ref := events.Ref{ProjectID: "acme/web", SessionID: "chat 1"}
	for i := 0; i < 3; i++ {
		if _, err := cl.PublishTokensReported(ctx, ref, events.TokensReported{InputTokens: int64(1000 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.PublishTurnStarted(ctx, events.Ref{ProjectID: "acme/web", SessionID: "chat 1", TurnID: "t1"}, events.TurnStarted{Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	consumerInfo := func(name string) *jetstream.ConsumerInfo {
		c, err := js.Consumer(ctx, events.StreamIn, name)
		if err != nil {
			t.Fatal(err)
		}
		ci, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ci
	}
	waitFor(t, "the compactor to ack 3 events", func() bool {
		ci := consumerInfo(events.ConsumerCompactor)
		return ci.AckFloor.Stream > 0 && ci.NumPending == 0 && ci.NumAckPending == 0 && ci.Delivered.Consumer >= 3
	})
	waitFor(t, "the injector to answer turn_started", func() bool {
		ci := consumerInfo(events.ConsumerInjector)
		return ci.NumPending == 0 && ci.NumAckPending == 0 && ci.Delivered.Consumer >= 1
	})
	waitFor(t, "the idle detector to record activity", func() bool {
		ci := consumerInfo("idle")
		return ci.NumPending == 0 && ci.NumAckPending == 0 && ci.Delivered.Consumer >= 4
	})

	// engram status: streams, consumers with their lag, readiness.
	st := s.engram(t, bin, "status")
	creds, err := natsauth.LoadCredentials(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for role, pw := range creds.Users {
		if strings.Contains(st, pw) || strings.Contains(s.logs(), pw) {
			t.Errorf("the password of %s is in the status output or the logs", role)
		}
	}
	for _, want := range []*regexp.Regexp{
		// Interest retention: every consumer acked them, nothing is kept.
		regexp.MustCompile(`(?m)^ENGRAM_IN\s+\[engram\.in\.turn_started\.\*\.\*\.\* [^\]]*\]\s+interest\s+0\s+0\s+0\.0% of 1G\s+max 1000\s`),
		regexp.MustCompile(`(?m)^compactor\s+ENGRAM_IN\s+0\s+0\s+0\s`),
		regexp.MustCompile(`(?m)^injector\s+ENGRAM_IN\s+0\s+0\s+0\s`),
		regexp.MustCompile(`(?m)^ENGRAM_OUT\s+\[engram\.out\.>\]\s+limits\s+1\s`), // the injector's injection_ready
		regexp.MustCompile(`(?m)^compactor\s+ENGRAM_IN\s+0\s+0\s+0\s+1\s+.*\spulling$`),
		regexp.MustCompile(`(?m)^topology\s+ok`),
		regexp.MustCompile(`(?m)^worker:compactor\s+ok`),
		regexp.MustCompile(`readiness \(.*/readyz\): ready`),
	} {
		if !want.MatchString(st) {
			t.Errorf("engram status lacks %s:\n%s", want, st)
		}
	}

	// DLQ round trip 1: an undecodable event published raw is dead-lettered
	// with its reason.
	badSubj := events.Subjects{}.In(events.TypeTokensReported, "", "acme/web", "chat 1")
	if _, err := js.Publish(ctx, badSubj, []byte(`{"type":"tokens_reported","payload":`)); err != nil {
		t.Fatal(err)
	}
	// Round trip 2: a valid event the worker rejects (permanent failure).
	rejected, err := cl.PublishTokensReported(ctx, events.Ref{ProjectID: "bad-project", SessionID: "s"}, events.TokensReported{InputTokens: 7})
	if err != nil {
		t.Fatal(err)
	}
	dlqCount := func() uint64 {
		s, err := js.Stream(ctx, events.StreamDLQ)
		if err != nil {
			t.Fatal(err)
		}
		si, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return si.State.Msgs
	}
	waitFor(t, "two dead letters", func() bool { return dlqCount() == 2 })
	list := s.engram(t, bin, "dlq", "list")
	lines := strings.Split(strings.TrimSpace(list), "\n")
	// The compactor handles two at once: either may be dead-lettered first.
	if len(lines) == 3 && strings.Contains(lines[1], "rejected by the test worker") {
		lines[1], lines[2] = lines[2], lines[1]
	}
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "SEQ") ||
		!strings.Contains(lines[1], "compactor") || !strings.Contains(lines[1], "invalid event") ||
		!strings.Contains(lines[2], "rejected by the test worker") {
		t.Fatalf("engram dlq list:\n%s", list)
	}
	seqOf := func(line string) string { return strings.Fields(line)[0] }
	show := s.engram(t, bin, "dlq", "show", seqOf(lines[2]))
	for _, want := range []string{"consumer:    compactor", "subject:     engram.in.tokens_reported.%.bad-project.s",
		"event id:    " + rejected.ID, `"input_tokens": 7`} {
		if !strings.Contains(show, want) {
			t.Errorf("engram dlq show lacks %q:\n%s", want, show)
		}
	}
	// Fix the cause, replay: the event is handled and leaves the DLQ.
	if err := os.Remove(rejectFile); err != nil {
		t.Fatal(err)
	}
	acked := consumerInfo(events.ConsumerCompactor).AckFloor.Stream
	if got := s.engram(t, bin, "dlq", "replay", seqOf(lines[2])); !strings.Contains(got, "replayed "+seqOf(lines[2])) {
		t.Fatalf("engram dlq replay: %s", got)
	}
	waitFor(t, "the replayed event to be acked", func() bool {
		ci := consumerInfo(events.ConsumerCompactor)
		return ci.AckFloor.Stream > acked && ci.NumPending == 0 && ci.NumAckPending == 0
	})
	if n := dlqCount(); n != 1 {
		t.Fatalf("DLQ holds %d letters after the replay, want 1 (the undecodable one)", n)
	}
	if l := s.engram(t, bin, "dlq", "list"); strings.Contains(l, "rejected by the test worker") || !strings.Contains(l, "invalid event") {
		t.Fatalf("engram dlq list after replay:\n%s", l)
	}

	// engram publish: JSON on stdin with the id, version and time filled in.
	pub := exec.Command(bin, "publish")
	pub.Env = append(os.Environ(), s.env()...)
	pub.Stdin = strings.NewReader(`{"type":"tokens_reported","project_id":"cli","session_id":"s1","payload":{"input_tokens":5}}
{"type":"turn_ended","project_id":"cli","session_id":"s1","turn_id":"t1","payload":{"messages":[{"role":"user","content":"hi"}]}}`)
	if b, err := pub.CombinedOutput(); err != nil || strings.Count(string(b), "published ") != 2 {
		t.Fatalf("engram publish: %v\n%s", err, b)
	}
	bad := exec.Command(bin, "publish")
	bad.Env = pub.Env
	bad.Stdin = strings.NewReader(`{"type":"tokens_reported","project_id":"cli","payload":{"input_tokens":-1}}`)
	if b, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(b), "session_id") || !strings.Contains(string(b), "input_tokens") {
		t.Fatalf("engram publish of an invalid event: %v\n%s", err, b)
	}

	// Metrics reflect what happened.
	resp, err := http.Get(s.httpURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`engram_events_handled_total{result="acked",type="tokens_reported",worker="compactor"}`,
		`engram_events_dead_lettered_total{source="handler",worker="compactor"} 2`, `engram_consumer_pending{consumer="injector",stream="ENGRAM_IN"}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	s.stop(t)
	if !strings.Contains(s.logs(), `"msg":"shutting down"`) {
		t.Errorf("no shutdown line:\n%s", s.logs())
	}
	if n := strings.Count(s.logs(), `"level":"info"`); n > 3 {
		t.Errorf("serve logged %d info lines; want the ready line and the shutdown line:\n%s", n, s.logs())
	}

	// Restart on the same data dir: the streams and the unconsumed messages
	// (the extractor's, paused without a model) are still there.
	s2 := startServe(t, bin, dataDir, nil, "-idle=false")
	st = s2.engram(t, bin, "status")
	if !regexp.MustCompile(`(?m)^ENGRAM_IN\s+\[engram\.in\.turn_started\.\*\.\*\.\* [^\]]*\]\s+interest\s+(\d+)\s`).MatchString(st) || !strings.Contains(st, "injector") {
		t.Fatalf("status after restart:\n%s", st)
	}
	if m := regexp.MustCompile(`(?m)^ENGRAM_IN\s+\[[^\]]*\]\s+interest\s+(\d+)\s`).FindStringSubmatch(st); m == nil || m[1] == "0" {
		t.Fatalf("ENGRAM_IN lost its messages across a restart:\n%s", st)
	}
	s2.stop(t)
}

func TestServeIdleOffHasNoIdleConsumer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the engram binary")
	}
	bin := buildEngram(t)
	s := startServe(t, bin, filepath.Join(t.TempDir(), "data"), nil, "-idle=false")
	idleRow := regexp.MustCompile(`(?m)^idle\s+ENGRAM_IN\s`)
	st := s.engram(t, bin, "status")
	if idleRow.MatchString(st) {
		t.Fatalf("idle consumer exists with -idle=false:\n%s", st)
	}
	// engram setup (idle detector on by default) adds its consumer,
	// idempotently.
	for i := 0; i < 2; i++ {
		out := s.engram(t, bin, "setup")
		for _, want := range []string{"ENGRAM_IN", "ENGRAM_DLQ", "injector", "idle"} {
			if !strings.Contains(out, want) {
				t.Fatalf("engram setup output lacks %s:\n%s", want, out)
			}
		}
	}
	if st := s.engram(t, bin, "status"); !idleRow.MatchString(st) {
		t.Fatalf("no idle consumer after engram setup:\n%s", st)
	}
	s.stop(t)
}

func TestMain(m *testing.M) {
	// The NATS store keys of the serves these tests start (in process and
	// as binaries) go to a folder of their own, not the user's config dir.
	if dir, err := os.MkdirTemp("", "engram-test-config"); err == nil {
		_ = os.Setenv("XDG_CONFIG_HOME", dir)
		tmpDirs = append(tmpDirs, dir)
	}
	code := m.Run()
	nodetest.Cleanup()
	for _, d := range tmpDirs {
		_ = os.RemoveAll(d)
	}
	os.Exit(code)
}

func TestServeIdleDetectorPublishesSessionIdle(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the engram binary")
	}
	bin := buildEngram(t)
	s := startServe(t, bin, filepath.Join(t.TempDir(), "data"), nil, "-idle-quiet", "1s", "-idle-sweep", "200ms")
	nc := s.connect(t, natsauth.RoleAdmin)
	js, _ := jetstream.New(nc)
	cl, _ := events.NewClient(nc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cl.PublishTokensReported(ctx, events.Ref{ProjectID: "acme", SessionID: "quiet one"}, events.TokensReported{InputTokens: 3}); err != nil {
		t.Fatal(err)
	}
	var idle events.Envelope
	waitFor(t, "session_idle", func() bool {
		cons, err := js.OrderedConsumer(ctx, events.StreamIn, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{events.Subjects{}.InType(events.TypeSessionIdle)}})
		if err != nil {
			t.Fatal(err)
		}
		m, err := cons.Next(jetstream.FetchMaxWait(200 * time.Millisecond))
		if err != nil {
			return false
		}
		idle, err = events.Decode(m.Data())
		return err == nil
	})
	if idle.ProjectID != "acme" || idle.SessionID != "quiet one" {
		t.Fatalf("session_idle for %q/%q", idle.ProjectID, idle.SessionID)
	}
	// The counter moves after the publish is acknowledged, a moment after
	// the event is in the stream: poll for it.
	waitFor(t, "engram_idle_published_total 1 on /metrics", func() bool {
		resp, err := http.Get(s.httpURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(body), "engram_idle_published_total 1")
	})
	s.stop(t)
}
