package config_test

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/idle"
	"github.com/engram-memory/engram/pkg/events"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func load(t *testing.T, e map[string]string, args ...string) (config.Config, *flag.FlagSet, error) {
	t.Helper()
	c := config.Default()
	c.DataDir = "/tmp/engram-test-data"
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	err := c.Load(fs, args, env(e), config.All)
	return c, fs, err
}

func TestDefaultsAreValid(t *testing.T) {
	c := config.Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if !c.Embedded() || c.ClientNATSURL() != "nats://127.0.0.1:4222" || c.HTTPURL() != "http://127.0.0.1:7474" {
		t.Fatalf("defaults: embedded=%v nats=%q http=%q", c.Embedded(), c.ClientNATSURL(), c.HTTPURL())
	}
	if c.Idle.Quiet != 30*time.Minute || !c.Idle.Enabled {
		t.Fatalf("idle defaults %+v", c.Idle)
	}
	if !strings.HasSuffix(c.DataDir, "engram") {
		t.Fatalf("data dir %q", c.DataDir)
	}
}

func TestEnvThenFlags(t *testing.T) {
	c, fs, err := load(t, map[string]string{
		"ENGRAM_DATA":               "/srv/engram",
		"ENGRAM_NATS_URL":           "nats://a:4222, nats://b:4222",
		"ENGRAM_STORE":              "redis",
		"ENGRAM_REDIS_URL":          "redis://r:6379/0",
		"ENGRAM_IN_MAX_AGE":         "3d12h",
		"ENGRAM_IN_MAX_BYTES":       "512M",
		"ENGRAM_CHAT_MODEL":         "llama3.2:1b",
		"ENGRAM_SUMMARIZE_MODEL":    "qwen2.5:0.5b",
		"ENGRAM_IDLE":               "off",
		"ENGRAM_WORKER_CONCURRENCY": "injector=8, extractor=3",
		"ENGRAM_WORKERS":            "injector,extractor",
		"ENGRAM_CONCURRENCY":        "4",
		"ENGRAM_HTTP_ADDR":          "0.0.0.0:9000",
	}, "-concurrency", "6", "-idle-quiet", "10m", "-data", "/override", "rest", "args")
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/override" {
		t.Errorf("flag should beat env: data %q", c.DataDir)
	}
	if c.Embedded() || c.ClientNATSURL() != "nats://a:4222, nats://b:4222" {
		t.Errorf("nats url %q", c.NATS.URL)
	}
	if c.Store.Kind != "redis" || c.Store.RedisURL != "redis://r:6379/0" {
		t.Errorf("store %+v", c.Store)
	}
	if c.Events.InMaxAge != 84*time.Hour || c.Events.InMaxBytes != 512<<20 {
		t.Errorf("retention %s %d", c.Events.InMaxAge, c.Events.InMaxBytes)
	}
	if c.LLM.Extract.Name != "llama3.2:1b" || c.LLM.Consolidate.Name != "llama3.2:1b" || c.LLM.Summarize.Name != "qwen2.5:0.5b" {
		t.Errorf("models %q %q %q", c.LLM.Extract.Name, c.LLM.Consolidate.Name, c.LLM.Summarize.Name)
	}
	if c.Idle.Enabled || c.Idle.Quiet != 10*time.Minute {
		t.Errorf("idle %+v", c.Idle)
	}
	if c.ConcurrencyOf("injector") != 8 || c.ConcurrencyOf("extractor") != 3 || c.ConcurrencyOf("compactor") != 6 {
		t.Errorf("concurrency %d %d %d", c.ConcurrencyOf("injector"), c.ConcurrencyOf("extractor"), c.ConcurrencyOf("compactor"))
	}
	if !c.Runs("injector") || c.Runs("compactor") {
		t.Errorf("workers %v", c.Work.Workers)
	}
	if c.HTTPURL() != "http://127.0.0.1:9000" {
		t.Errorf("http url %q", c.HTTPURL())
	}
	if got := strings.Join(fs.Args(), " "); got != "rest args" {
		t.Errorf("remaining args %q", got)
	}
	if c.SQLitePath() != "/override/engram.db" || c.NATSStoreDir() != "/override/nats" {
		t.Errorf("paths %q %q", c.SQLitePath(), c.NATSStoreDir())
	}
}

func TestValidateListsEveryProblem(t *testing.T) {
	c := config.Default()
	c.DataDir = ""
	c.NATS.URL = "http://x"
	c.NATS.Listen = "nohost"
	c.Store.Kind = "redis" // without URL
	c.Events.SubjectPrefix = "a b"
	c.Events.Replicas = 9
	c.Events.AckWait = 500 * time.Millisecond
	c.LLM.Host = "ftp://ollama"
	c.Events.MaxDeliver = -2
	c.Work.Concurrency = 0
	c.Work.PerWorker = map[string]int{"injector": 0}
	c.Idle.Quiet = 0
	c.Log.Format = "xml"
	c.Store.RedisVectorQuant = "fp8"
	c.Store.RedisReplicaWait = -time.Second
	c.NATS.Sync = "sometimes"
	err := c.Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("error is not a joined error: %T", err)
	}
	want := []string{"ENGRAM_DATA", "ENGRAM_NATS_URL", "ENGRAM_NATS_LISTEN", "ENGRAM_REDIS_URL",
		"ENGRAM_SUBJECT_PREFIX", "ENGRAM_STREAM_REPLICAS", "ENGRAM_ACK_WAIT", "ENGRAM_MAX_DELIVER",
		"ENGRAM_CONCURRENCY", "ENGRAM_WORKER_CONCURRENCY", "ENGRAM_IDLE_QUIET", "ENGRAM_LOG_FORMAT", "ENGRAM_REDIS_VECTOR_QUANT",
		"ENGRAM_REDIS_REPLICA_WAIT", "ENGRAM_NATS_SYNC", "llm config: host"}
	if n := len(joined.Unwrap()); n != len(want) {
		t.Errorf("got %d problems, want %d:\n%v", n, len(want), err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("problem with %s not reported:\n%v", w, err)
		}
	}
}

func TestLoadReportsBadVariablesAndInvalidValuesTogether(t *testing.T) {
	_, _, err := load(t, map[string]string{
		"ENGRAM_ACK_WAIT":           "soon",
		"ENGRAM_MAX_DELIVER":        "many",
		"ENGRAM_IDLE":               "maybe",
		"ENGRAM_IN_MAX_BYTES":       "lots",
		"ENGRAM_WORKER_CONCURRENCY": "injector",
		"ENGRAM_STORE":              "postgres",
	}, "-log-level", "loud")
	if err == nil {
		t.Fatal("want errors")
	}
	for _, w := range []string{"ENGRAM_ACK_WAIT=\"soon\"", "ENGRAM_MAX_DELIVER=\"many\"", "ENGRAM_IDLE=\"maybe\"",
		"ENGRAM_IN_MAX_BYTES=\"lots\"", "ENGRAM_WORKER_CONCURRENCY=\"injector\"", "ENGRAM_STORE", "ENGRAM_LOG_LEVEL"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("missing %s in:\n%v", w, err)
		}
	}
}

func TestLoadUnknownFlag(t *testing.T) {
	_, _, err := load(t, nil, "-no-such-flag")
	if err == nil || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("err = %v", err)
	}
}

func TestGroupsRegisterOnlyTheirFlags(t *testing.T) {
	c := config.Default()
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := c.Load(fs, nil, env(map[string]string{"ENGRAM_STORE": "bogus-but-ignored"}), config.Conn); err != nil {
		t.Fatalf("a Conn-only load must not read ENGRAM_STORE: %v", err)
	}
	if fs.Lookup("nats-url") == nil || fs.Lookup("http") == nil {
		t.Error("conn flags missing")
	}
	if fs.Lookup("store") != nil || fs.Lookup("ack-wait") != nil {
		t.Error("flags of other groups registered")
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"30s": 30 * time.Second, "7d": 7 * 24 * time.Hour, "1d2h": 26 * time.Hour, " 5m ": 5 * time.Minute} {
		got, err := config.ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "xd", "7days", "soon"} {
		if _, err := config.ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) succeeded", in)
		}
	}
}

func TestSettingsTableIsComplete(t *testing.T) {
	c := config.Default()
	seenFlag, seenEnv := map[string]bool{}, map[string]bool{}
	for _, s := range c.Settings() {
		if !strings.HasPrefix(s.Env, "ENGRAM_") || s.Flag == "" || s.Usage == "" || s.Group == 0 {
			t.Errorf("incomplete setting %+v", s)
		}
		if seenFlag[s.Flag] || seenEnv[s.Env] {
			t.Errorf("duplicate setting %s / %s", s.Flag, s.Env)
		}
		seenFlag[s.Flag], seenEnv[s.Env] = true, true
	}
}

func TestIdleSweepDerivedFromQuiet(t *testing.T) {
	c := config.Default()
	if c.IdleSweep() != time.Minute {
		t.Errorf("30m quiet: sweep %s", c.IdleSweep())
	}
	c.Idle.Quiet = 3 * time.Second
	if c.IdleSweep() != time.Second {
		t.Errorf("3s quiet: sweep %s", c.IdleSweep())
	}
	c.Idle.Sweep = 7 * time.Second
	if c.IdleSweep() != 7*time.Second {
		t.Errorf("explicit sweep %s", c.IdleSweep())
	}
}

func TestTopologyAppliesOverrides(t *testing.T) {
	c := config.Default()
	topo := c.Topology()
	if err := topo.Validate(); err != nil {
		t.Fatalf("default topology invalid: %v", err)
	}
	inj, _ := topo.Consumer(events.ConsumerInjector)
	ext, _ := topo.Consumer(events.ConsumerExtractor)
	if inj.AckWait == ext.AckWait {
		t.Errorf("role defaults flattened: injector %s extractor %s", inj.AckWait, ext.AckWait)
	}
	if _, ok := topo.Consumer(idle.ConsumerName); !ok {
		t.Error("idle consumer missing while the detector is on")
	}

	c.Events.SubjectPrefix = "acme.engram"
	c.Events.Replicas = 3
	c.Events.AckWait = 45 * time.Second
	c.Events.MaxDeliver = 4
	c.Events.InMaxAge = 48 * time.Hour
	c.Idle.Enabled = false
	topo = c.Topology()
	if err := topo.Validate(); err != nil {
		t.Fatal(err)
	}
	if topo.Prefix != "acme.engram" || topo.In.Replicas != 3 || topo.DLQ.Replicas != 3 || topo.In.MaxAge != 48*time.Hour {
		t.Errorf("streams %+v %+v", topo.In, topo.DLQ)
	}
	for _, cc := range topo.Consumers {
		if cc.AckWait != 45*time.Second || cc.MaxDeliver != 4 {
			t.Errorf("consumer %s: ack wait %s max deliver %d", cc.Name, cc.AckWait, cc.MaxDeliver)
		}
		if cc.Name == idle.ConsumerName {
			t.Error("idle consumer present while the detector is off")
		}
	}
}

func TestChatModelYieldsToRoleModels(t *testing.T) {
	for _, args := range [][]string{
		{"-extract-model", "ex:1", "-chat-model", "chat:2"},
		{"-chat-model", "chat:2", "-extract-model", "ex:1"},
	} {
		c := config.Default()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		env := map[string]string{"ENGRAM_SUMMARIZE_MODEL": "sum:3"}
		if err := c.Load(fs, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, config.All); err != nil {
			t.Fatal(err)
		}
		if c.LLM.Extract.Name != "ex:1" || c.LLM.Consolidate.Name != "chat:2" || c.LLM.Summarize.Name != "sum:3" {
			t.Errorf("%v: extract %q consolidate %q summarize %q", args, c.LLM.Extract.Name, c.LLM.Consolidate.Name, c.LLM.Summarize.Name)
		}
	}
}

func TestMCPEndpointNeedsTokens(t *testing.T) {
	if c := config.Default(); c.MCP.Addr != "" {
		t.Fatalf("the MCP endpoint is on by default: %q", c.MCP.Addr)
	}
	_, _, err := load(t, map[string]string{"ENGRAM_MCP_ADDR": "127.0.0.1:notaport"})
	if err == nil || !strings.Contains(err.Error(), "ENGRAM_MCP_ADDR") || !strings.Contains(err.Error(), "ENGRAM_MCP_TOKENS") {
		t.Fatalf("want both MCP problems, got %v", err)
	}
	c, _, err := load(t, map[string]string{"ENGRAM_MCP_ADDR": "127.0.0.1:7475"}, "-mcp-tokens", "/etc/engram/tokens")
	if err != nil || c.MCP.Addr != "127.0.0.1:7475" || c.MCP.Tokens != "/etc/engram/tokens" {
		t.Fatalf("MCP settings: %+v, %v", c.MCP, err)
	}
}

// TestCrossProjectSwitch: ENGRAM_CROSS_PROJECT=false turns cross-project
// reach off for the injector (and so the memory tool) and the extractor;
// naming ENGRAM_INJECT_CROSS_PROJECT=true beside it is a contradiction
// reported at start.
func TestCrossProjectSwitch(t *testing.T) {
	c, _, err := load(t, nil)
	if err != nil || !c.CrossProject || !c.Inject.CrossProject || !c.Extract.CrossProject {
		t.Fatalf("default: cross %v inject %v extract %v (%v)", c.CrossProject, c.Inject.CrossProject, c.Extract.CrossProject, err)
	}
	c, _, err = load(t, map[string]string{"ENGRAM_CROSS_PROJECT": "false"})
	if err != nil || c.CrossProject || c.Inject.CrossProject || c.Extract.CrossProject {
		t.Fatalf("off: cross %v inject %v extract %v (%v)", c.CrossProject, c.Inject.CrossProject, c.Extract.CrossProject, err)
	}
	if _, _, err := load(t, map[string]string{"ENGRAM_CROSS_PROJECT": "false", "ENGRAM_INJECT_CROSS_PROJECT": "true"}); err == nil ||
		!strings.Contains(err.Error(), "contradicts") {
		t.Fatalf("a contradiction: %v", err)
	}
	if c, _, err := load(t, nil, "-cross-project=false", "-inject-cross-project=false"); err != nil || c.Inject.CrossProject {
		t.Fatalf("flags: %v %v", c.Inject.CrossProject, err)
	}
}
