package deploy

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/idle"
	"github.com/engram-memory/engram/pkg/events"
)

// root is the repository root (this package is deploy/).
const root = ".."

func path(p ...string) string { return filepath.Join(append([]string{root}, p...)...) }

func read(t *testing.T, p ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(path(p...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// workerRoles are the worker roles of the topology (one durable consumer
// of the role's name and one binary cmd/<role> each; the extractor's runs
// the transcript consumer too).
func workerRoles() []string { return events.DefaultTopology().Roles() }

// credentialRoles are the NATS users of deploy/nats/accounts.conf: every
// process role, plus the platform, the outputs reader and the operator.
var credentialRoles = append(append(workerRoles(), idle.ConsumerName, "setup"), "platform", "outputs", "admin")

// natsCredentialEnv are the NATS credential variables every Engram process
// reads (the nats-auth contract; they join internal/config's settings).
var natsCredentialEnv = []string{"ENGRAM_NATS_USER", "ENGRAM_NATS_PASSWORD", "ENGRAM_NATS_TOKEN", "ENGRAM_NATS_NKEY",
	"ENGRAM_NATS_CREDS", "ENGRAM_NATS_CA", "ENGRAM_NATS_CERT", "ENGRAM_NATS_KEY"}

func passwordVar(role string) string { return "ENGRAM_" + strings.ToUpper(role) + "_PASSWORD" }

// knownEnv reports whether name is a variable an Engram process reads.
func knownEnv(name string) bool {
	c := config.Default()
	for _, s := range c.Settings() {
		if s.Env == name {
			return true
		}
	}
	for _, n := range natsCredentialEnv {
		if n == name {
			return true
		}
	}
	return false
}

// processKind is how a container runs Engram: which binary, so which
// configuration groups and defaults it loads.
type processKind struct {
	role     string // worker role, "setup", "idle" or "upgrade"
	groups   config.Group
	worker   bool   // a single-worker binary: the idle detector is off by default
	natsUser string // the NATS user, when not role (the upgrade job: setup's)
}

// user is the NATS user of the process.
func (k processKind) user() string {
	if k.natsUser != "" {
		return k.natsUser
	}
	return k.role
}

// loadProcessConfig loads an Engram configuration from env exactly as the
// process would (config.Load validates it) and reports every variable that
// no Engram process reads.
func loadProcessConfig(t *testing.T, where string, k processKind, env map[string]string, allowExtra ...string) config.Config {
	t.Helper()
	extra := map[string]bool{}
	for _, e := range allowExtra {
		extra[e] = true
	}
	var unknown []string
	for name := range env {
		if strings.HasPrefix(name, "ENGRAM_") && !knownEnv(name) || !strings.HasPrefix(name, "ENGRAM_") && !extra[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("%s: variables no Engram process reads: %v", where, unknown)
	}
	cfg := config.Default()
	if k.worker {
		cfg.Idle.Enabled = false // app.runWorker does the same
	}
	fs := flag.NewFlagSet(where, flag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	if err := cfg.Load(fs, nil, lookup, k.groups); err != nil {
		t.Errorf("%s: the configuration does not load: %v", where, err)
	}
	return cfg
}

// kindOf tells how a container runs Engram from its command line.
func kindOf(t *testing.T, where string, cmd []string) processKind {
	t.Helper()
	if len(cmd) == 0 {
		t.Fatalf("%s: no command", where)
	}
	bin := filepath.Base(cmd[0])
	if bin == "engram" {
		cmd = cmd[1:]
	} else {
		if _, err := os.Stat(path("cmd", bin, "main.go")); err != nil {
			t.Fatalf("%s: runs %s, which is no binary of cmd/: %v", where, cmd[0], err)
		}
		return processKind{role: bin, groups: config.All, worker: true}
	}
	switch {
	case len(cmd) == 1 && cmd[0] == "setup":
		return processKind{role: "setup", groups: config.Conn | config.Topology}
	case len(cmd) == 2 && cmd[0] == "upgrade" && cmd[1] == "finish":
		return processKind{role: "upgrade", groups: config.Conn | config.Runtime, natsUser: "setup"}
	case len(cmd) == 3 && cmd[0] == "serve" && cmd[1] == "-workers" && cmd[2] == "none":
		return processKind{role: idle.ConsumerName, groups: config.All}
	}
	t.Fatalf("%s: unexpected engram command %q", where, cmd)
	return processKind{}
}

// credentials runs deploy/credentials.sh and returns what it printed.
func credentials(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("sh", path("deploy", "credentials.sh")).Output()
	if err != nil {
		t.Fatalf("deploy/credentials.sh: %v", err)
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok || !regexp.MustCompile(`^ENGRAM_[A-Z]+_PASSWORD$`).MatchString(k) || len(v) < 32 {
			t.Fatalf("deploy/credentials.sh printed %q, want ENGRAM_<ROLE>_PASSWORD=<32+ random characters>", sc.Text())
		}
		env[k] = v
	}
	for _, r := range append(credentialRoles, "redis") {
		if env[passwordVar(r)] == "" {
			t.Errorf("deploy/credentials.sh prints no %s", passwordVar(r))
		}
	}
	return env
}

// goModVersion is the version go.mod requires of module (or the go
// directive for "go").
func goModVersion(t *testing.T, module string) string {
	t.Helper()
	for _, line := range strings.Split(string(read(t, "go.mod")), "\n") {
		f := strings.Fields(line)
		if module == "go" && len(f) == 2 && f[0] == "go" {
			return f[1]
		}
		if len(f) >= 2 && f[0] == module {
			return f[1]
		}
		if len(f) >= 3 && f[0] == "require" && f[1] == module {
			return f[2]
		}
	}
	t.Fatalf("go.mod does not require %s", module)
	return ""
}

// minor is "2.15" of "v2.15.2".
func minor(v string) string {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// checkImages checks the third-party images against what the module tests:
// NATS of go.mod's nats-server minor version, Redis 8, Ollama of go.mod's
// version.
func checkImage(t *testing.T, where, image string) {
	t.Helper()
	name, tag, _ := strings.Cut(image, ":")
	switch name {
	case "nats":
		if want := minor(goModVersion(t, "github.com/nats-io/nats-server/v2")) + "-alpine"; tag != want {
			t.Errorf("%s: image %s, want nats:%s (the nats-server the tests run; alpine for the health check's wget)", where, image, want)
		}
	case "redis":
		if !strings.HasPrefix(tag, "8.") {
			t.Errorf("%s: image %s, want Redis 8.x (vector sets)", where, image)
		}
	case "ollama/ollama":
		if want := strings.TrimPrefix(goModVersion(t, "github.com/ollama/ollama"), "v"); tag != want {
			t.Errorf("%s: image %s, want ollama/ollama:%s (the Ollama the tests run)", where, image, want)
		}
	default:
		if tag == "" || tag == "latest" {
			t.Errorf("%s: image %s has no pinned tag", where, image)
		}
	}
}
