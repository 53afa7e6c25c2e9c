package deploy

import (
	"context"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats-server/v2/server"
	"gopkg.in/yaml.v3"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/idle"
)

// loadCompose loads docker-compose.yml with the compose-spec loader, as
// `docker compose` would with env as its .env: schema validation,
// interpolation, normalisation and the consistency checks on.
func loadCompose(t *testing.T, env map[string]string) (*types.Project, error) {
	t.Helper()
	var list []string
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	opts, err := cli.NewProjectOptions([]string{path("docker-compose.yml")},
		cli.WithWorkingDirectory(root), cli.WithEnv(list), cli.WithName("engram"),
		cli.WithInterpolation(true), cli.WithNormalization(true), cli.WithConsistency(true), cli.WithResolvedPaths(true))
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

func envOf(s types.ServiceConfig) map[string]string {
	env := map[string]string{}
	for k, v := range s.Environment {
		if v != nil {
			env[k] = *v
		}
	}
	return env
}

// composeCommand is what the container runs: entrypoint + command, the
// image's ENTRYPOINT (engram) when the service sets none.
func composeCommand(s types.ServiceConfig) []string {
	if len(s.Entrypoint) > 0 {
		return append(append([]string{}, s.Entrypoint...), s.Command...)
	}
	return append([]string{"/usr/local/bin/engram"}, s.Command...)
}

func TestComposeFile(t *testing.T) {
	creds := credentials(t)
	p, err := loadCompose(t, creds)
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	engram := append(workerRoles(), "setup", "upgrade", idle.ConsumerName)
	want := append(append([]string{}, engram...), "nats", "redis", "ollama", "ollama-pull")
	sort.Strings(want)
	got := p.ServiceNames()
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	oneShot := map[string]bool{"setup": true, "upgrade": true, "ollama-pull": true}
	for name, s := range p.Services {
		switch {
		case s.Restart == "":
			t.Errorf("%s: no restart policy", name)
		case oneShot[name] && !strings.HasPrefix(s.Restart, "on-failure"):
			t.Errorf("%s: a one-shot restarts %q, want on-failure", name, s.Restart)
		case !oneShot[name] && s.Restart != "unless-stopped" && s.Restart != "always":
			t.Errorf("%s: restart %q, want unless-stopped", name, s.Restart)
		}
		hc := s.HealthCheck
		if !oneShot[name] && (hc == nil || hc.Disable || len(hc.Test) < 2 || hc.Interval == nil) {
			t.Errorf("%s: no health check", name)
		}
		checkImage(t, "compose "+name, s.Image)
	}

	// NATS: JetStream on the nats volume, monitoring on 8222, the
	// configuration of deploy/nats (checked with the server's parser).
	nats := p.Services["nats"]
	if !slices.Equal(nats.Command, []string{"-c", "/etc/nats/nats.conf"}) {
		t.Errorf("nats command %q, want -c /etc/nats/nats.conf", nats.Command)
	}
	mounts := volumeTargets(p, nats)
	if mounts["/etc/nats"] != path("deploy", "nats") && !strings.HasSuffix(mounts["/etc/nats"], "/deploy/nats") {
		t.Errorf("nats mounts %v, want deploy/nats on /etc/nats", mounts)
	}
	if mounts["/data"] != "volume:nats" {
		t.Errorf("nats keeps JetStream in %q, want the named volume nats on /data", mounts["/data"])
	}
	for _, r := range credentialRoles {
		if envOf(nats)[passwordVar(r)] != creds[passwordVar(r)] {
			t.Errorf("nats server lacks %s from .env (accounts.conf reads it)", passwordVar(r))
		}
	}
	opts := natsOptions(t, path("deploy", "nats", "nats.conf"), creds)
	if !opts.JetStream || opts.StoreDir != "/data" || opts.HTTPPort != 8222 || opts.Port != 4222 {
		t.Errorf("deploy/nats/nats.conf: jetstream %v in %q, monitoring %d, clients %d; want JetStream in /data, 8222, 4222",
			opts.JetStream, opts.StoreDir, opts.HTTPPort, opts.Port)
	}
	if !publishes(nats, 8222) || !publishes(nats, 4222) {
		t.Errorf("nats publishes %+v, want 4222 (platforms) and 8222 (monitoring)", nats.Ports)
	}
	if !strings.Contains(strings.Join(nats.HealthCheck.Test, " "), "8222/healthz") {
		t.Errorf("nats health check %q does not ask the monitoring port's /healthz", nats.HealthCheck.Test)
	}

	redis := p.Services["redis"]
	if cmd := strings.Join(redis.Command, " "); !strings.Contains(cmd, "--appendonly yes") || !strings.Contains(cmd, "--requirepass") {
		t.Errorf("redis command %q: want AOF persistence and a password", cmd)
	}
	if volumeTargets(p, redis)["/data"] != "volume:redis" {
		t.Errorf("redis keeps no data in the named volume redis")
	}
	if volumeTargets(p, p.Services["ollama"])["/root/.ollama"] != "volume:ollama" {
		t.Errorf("ollama keeps no models in the named volume ollama")
	}

	// The model pull pulls exactly the models the workers use, and those
	// default to the configuration's defaults.
	def := config.Default()
	pull := envOf(p.Services["ollama-pull"])
	for k, want := range map[string]string{"ENGRAM_EXTRACT_MODEL": def.LLM.Extract.Name, "ENGRAM_CONSOLIDATE_MODEL": def.LLM.Consolidate.Name,
		"ENGRAM_SUMMARIZE_MODEL": def.LLM.Summarize.Name, "ENGRAM_EMBED_MODEL": def.LLM.Embed.Name} {
		if v, ok := pull[k]; !ok || v != want {
			t.Errorf("ollama-pull %s = %q, want the default %q", k, v, want)
		}
		if !strings.Contains(strings.Join(p.Services["ollama-pull"].Command, " "), "$"+k) {
			t.Errorf("ollama-pull does not pull $%s", k)
		}
	}
	if d, ok := p.Services["ollama-pull"].DependsOn["ollama"]; !ok || d.Condition != types.ServiceConditionHealthy {
		t.Errorf("ollama-pull does not wait for a healthy ollama")
	}

	// The Engram containers: binary, user, credentials, configuration.
	natsURL := "nats://nats:" + strconv.Itoa(opts.Port)
	for _, name := range engram {
		s := p.Services[name]
		where := "compose " + name
		k := kindOf(t, where, composeCommand(s))
		if k.role != name {
			t.Errorf("%s runs %q, the %s", where, composeCommand(s), k.role)
		}
		env := envOf(s)
		if env["ENGRAM_NATS_USER"] != k.user() || env["ENGRAM_NATS_PASSWORD"] != creds[passwordVar(k.user())] {
			t.Errorf("%s connects as NATS user %q; want user %s with %s from .env", where, env["ENGRAM_NATS_USER"], k.user(), passwordVar(k.user()))
		}
		cfg := loadProcessConfig(t, where, k, env)
		if cfg.NATS.URL != natsURL {
			t.Errorf("%s: ENGRAM_NATS_URL %q, want %s", where, cfg.NATS.URL, natsURL)
		}
		if k.groups&config.Runtime != 0 {
			u, err := url.Parse(cfg.Store.RedisURL)
			if err != nil || cfg.Store.Kind != "redis" || u.Host != "redis:6379" || u.User == nil {
				t.Errorf("%s: store %s at %q, want redis at redis:6379 with a password", where, cfg.Store.Kind, cfg.Store.RedisURL)
			} else if pw, _ := u.User.Password(); pw != creds["ENGRAM_REDIS_PASSWORD"] {
				t.Errorf("%s: the Redis password is not ENGRAM_REDIS_PASSWORD", where)
			}
			if cfg.LLM.Host != "http://ollama:11434" {
				t.Errorf("%s: ENGRAM_OLLAMA_HOST %q, want http://ollama:11434", where, cfg.LLM.Host)
			}
		}
		if !s.ReadOnly || s.User != "65532:65532" || !slices.Contains(s.CapDrop, "ALL") {
			t.Errorf("%s: read-only %v, user %q, cap_drop %v; want a read-only root, the image's non-root user, no capabilities",
				where, s.ReadOnly, s.User, s.CapDrop)
		}
		if s.Build == nil || s.Build.Dockerfile != "deploy/Dockerfile" {
			t.Errorf("%s: not built from deploy/Dockerfile", where)
		}
		if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= cfg.Work.ShutdownTimeout+10*time.Second {
			t.Errorf("%s: stop_grace_period %v, want more than ENGRAM_SHUTDOWN_TIMEOUT %v + 10s", where, s.StopGracePeriod, cfg.Work.ShutdownTimeout)
		}
		if name == "setup" {
			// JetStream reserves each file stream's max bytes.
			var need int64
			topo := cfg.Topology()
			for _, sc := range []int64{topo.In.MaxBytes, topo.Out.MaxBytes, topo.DLQ.MaxBytes} {
				need += sc
			}
			if need > opts.JetStreamMaxStore {
				t.Errorf("the streams engram setup creates need %d bytes, over NATS max_file_store %d", need, opts.JetStreamMaxStore)
			}
			if d := s.DependsOn["nats"]; d.Condition != types.ServiceConditionHealthy {
				t.Errorf("setup does not wait for a healthy nats")
			}
			continue
		}
		if name == "upgrade" {
			// Raises the store's format: only once every Engram container
			// of an earlier image is replaced (compose stops a container
			// before it starts its replacement).
			for _, w := range append(workerRoles(), idle.ConsumerName) {
				if d, ok := s.DependsOn[w]; !ok || d.Condition != types.ServiceConditionStarted {
					t.Errorf("upgrade does not wait for %s to be started: %+v", w, d)
				}
			}
			continue
		}
		if !slices.Equal(s.HealthCheck.Test, []string{"CMD", "/usr/local/bin/engram", "probe", "-ready"}) {
			t.Errorf("%s: health check %q, want engram probe -ready", where, s.HealthCheck.Test)
		}
		for dep, cond := range map[string]string{"setup": types.ServiceConditionCompletedSuccessfully,
			"nats": types.ServiceConditionHealthy, "redis": types.ServiceConditionHealthy} {
			if d, ok := s.DependsOn[dep]; !ok || d.Condition != cond {
				t.Errorf("%s: depends on %s %+v, want %s", where, dep, s.DependsOn[dep], cond)
			}
		}
		if _, port, _ := net.SplitHostPort(cfg.HTTP.Addr); port != "7474" {
			t.Errorf("%s: ENGRAM_HTTP_ADDR %q: the health check asks port 7474", where, cfg.HTTP.Addr)
		}
	}
}

// TestComposeCredentialsNeverInline: every credential in the file is a
// reference to .env, and loading without .env fails naming the variable.
func TestComposeCredentialsNeverInline(t *testing.T) {
	var doc struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(read(t, "docker-compose.yml"), &doc); err != nil {
		t.Fatal(err)
	}
	secret := regexp.MustCompile(`PASSWORD|_TOKENS?$|SECRET|REDISCLI_AUTH|_KEY$|_NKEY$|_CREDS$`)
	userinfo := regexp.MustCompile(`://[^/@]*:[^/@]*@`)
	n := 0
	for name, s := range doc.Services {
		for k, v := range s.Environment {
			if (secret.MatchString(k) || userinfo.MatchString(v)) && !regexp.MustCompile(`\$\{ENGRAM_[A-Z]+_PASSWORD:\?[^}]+\}`).MatchString(v) {
				t.Errorf("%s: %s=%q is not a required reference to .env", name, k, v)
			}
			if secret.MatchString(k) {
				n++
			}
		}
	}
	if n < len(credentialRoles) {
		t.Errorf("found %d credentials in docker-compose.yml, want at least %d", n, len(credentialRoles))
	}
	_, err := loadCompose(t, nil)
	if err == nil || !strings.Contains(err.Error(), "_PASSWORD") || !strings.Contains(err.Error(), "credentials.sh") {
		t.Errorf("loading without .env: %v, want an error naming a password variable and deploy/credentials.sh", err)
	}
}

// volumeTargets maps a service's mount targets to "volume:<name>" or the
// bind source.
func volumeTargets(p *types.Project, s types.ServiceConfig) map[string]string {
	m := map[string]string{}
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeVolume {
			if _, ok := p.Volumes[v.Source]; ok {
				m[v.Target] = "volume:" + v.Source
			}
			continue
		}
		m[v.Target] = v.Source
	}
	return m
}

func publishes(s types.ServiceConfig, port uint32) bool {
	for _, p := range s.Ports {
		if p.Target == port && p.Published != "" {
			return true
		}
	}
	return false
}

// natsOptions parses a NATS server configuration with nats-server's own
// parser, its ENGRAM_<ROLE>_PASSWORD variables from env. When
// deploy/nats/accounts.conf does not exist yet, the Kubernetes base's
// copy of it is used beside it.
func natsOptions(t *testing.T, conf string, env map[string]string) *server.Options {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Setenv("POD_NAME", "engram-nats-0")
	dir := t.TempDir()
	src := read(t, strings.TrimPrefix(conf, root+"/"))
	if err := os.WriteFile(dir+"/nats.conf", src, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/accounts.conf", accountsConf(t), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(dir + "/nats.conf")
	if err != nil {
		t.Fatalf("%s: nats-server refuses it: %v", conf, err)
	}
	return opts
}

// accountsConf is deploy/nats/accounts.conf, or the Kubernetes base's copy
// while the former does not exist.
func accountsConf(t *testing.T) []byte {
	t.Helper()
	if b, err := os.ReadFile(path("deploy", "nats", "accounts.conf")); err == nil {
		return b
	}
	return read(t, "deploy", "k8s", "base", "nats", "accounts.conf")
}
