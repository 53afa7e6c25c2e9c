package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/engram-memory/engram/internal/compact"
	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/credurl"
	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/internal/idle"
	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// Store kinds.
const (
	StoreSQLite = "sqlite"
	StoreRedis  = "redis"
)

// Log formats. Auto is console on a terminal (engram serve) and JSON otherwise.
const (
	LogAuto    = "auto"
	LogJSON    = "json"
	LogConsole = "console"
)

// Config is the whole process configuration.
type Config struct {
	// DataDir holds the embedded NATS store (<DataDir>/nats) and the SQLite
	// database (<DataDir>/engram.db) of `engram serve`.
	DataDir string

	NATS   NATS
	HTTP   HTTP
	Store  Store
	Events Events
	Work   Work
	Idle   Idle
	Log    Log
	// LLM is the model layer's configuration (Ollama host, models, budgets).
	LLM llm.Config
	// CrossProject (ENGRAM_CROSS_PROJECT, default true) lets memory reach
	// across the projects of a tenant: recall of the tenant's other
	// projects' memories whose reach is anywhere (when
	// ENGRAM_INJECT_CROSS_PROJECT is on too), and extracted memories that
	// are global (within the tenant) or reach anywhere. False, for a
	// deployment whose projects are separate people (a chat platform
	// where a project is one end user): a project's block and recall see
	// its own memories and its tenant's global ones only (the operator's
	// tenant-wide rules, written by import), and the extractor writes
	// every memory into its project with reach here. Load applies it to
	// Inject.CrossProject and Extract.CrossProject.
	CrossProject bool
	// RedactPII lists the tenants whose writes have their personal data
	// (e-mail addresses, phone numbers, IBANs, national ids) redacted:
	// tenant ids, "default" for the default tenant, "*" for all; empty:
	// off (memory.SetPIIRedaction).
	RedactPII []string
	// ChatModel, when set, is the model of every chat role whose own model
	// setting is not given (ENGRAM_CHAT_MODEL).
	ChatModel string
	// Inject holds the injector's constants (ENGRAM_INJECT_*).
	Inject inject.Config
	// Extract holds the extractor's constants (ENGRAM_EXTRACT_*).
	Extract extract.Config
	// MCP is the `memory` tool's HTTP endpoint in serve (ENGRAM_MCP_*).
	MCP MCP
	// Console is the memory console (ENGRAM_CONSOLE_*).
	Console Console
	// Compact holds the compactor's constants (ENGRAM_COMPACT_*).
	Compact compact.Config
	// Consolidate holds the consolidator's constants (ENGRAM_CONSOLIDATE_*).
	Consolidate consolidate.Config
}

// MCP is the `memory` MCP tool's streamable HTTP endpoint of `engram
// serve` (package mcptool). Off by default.
type MCP struct {
	// Addr of the endpoint (path /mcp); empty: off.
	Addr string
	// Tokens is the bearer tokens file (mcptool.ParseTokens), required
	// when Addr is set: no token, no access.
	Tokens string
	// SessionsPerToken caps the MCP sessions one token holds open at once
	// (mcptool.HTTPOptions.MaxSessionsPerToken).
	SessionsPerToken int
	// SessionIdle closes an MCP session idle this long.
	SessionIdle time.Duration
}

// DefaultConsoleAddr is where `engram serve` serves the memory console
// unless told otherwise (a worker binary serves it only when
// ENGRAM_CONSOLE_ADDR is set). When this default port is taken, serve
// takes a free one and says so.
const DefaultConsoleAddr = "127.0.0.1:7476"

// Console is the memory console (package internal/console): server-rendered
// pages over the store, behind the tokens of the memory tool and the
// operator's admin token.
type Console struct {
	// Addr of the console; empty or "off": off.
	Addr string
	// Tokens is the tokens file people log in with (mcptool.ParseTokens);
	// empty: the MCP endpoint's (ENGRAM_MCP_TOKENS), if any. Without
	// either only the operator logs in.
	Tokens string
	// AdminTokenFile holds the operator's token; empty:
	// <DataDir>/console-admin.token, generated on first start.
	AdminTokenFile string
	// TLSCert and TLSKey serve the console over HTTPS (cookies are then
	// Secure). A console on an address other than loopback needs them.
	TLSCert, TLSKey string
}

// On reports whether the console is served.
func (c Console) On() bool { return c.Addr != "" && c.Addr != "off" }

// ConsoleAdminTokenFile is the operator's console token file.
func (c Config) ConsoleAdminTokenFile() string {
	if c.Console.AdminTokenFile != "" {
		return c.Console.AdminTokenFile
	}
	return filepath.Join(c.DataDir, "console-admin.token")
}

// ConsoleLinkFile holds the console's current one-time login link.
func (c Config) ConsoleLinkFile() string { return filepath.Join(c.DataDir, "console-login") }

// ConsoleTokens is the tokens file of the console ("" : none).
func (c Config) ConsoleTokens() string {
	if c.Console.Tokens != "" {
		return c.Console.Tokens
	}
	return c.MCP.Tokens
}

// NATS says where the bus is.
type NATS struct {
	// URL of the NATS servers (comma-separated). Empty in `engram serve`
	// means: run an embedded server on Listen.
	URL string
	// Listen is the embedded server's client address.
	Listen string
	// ConnectTimeout bounds the first connection.
	ConnectTimeout time.Duration

	// Authentication and TLS of every connection (at most one of
	// user/password, token, nkey seed file and creds file). When none is
	// given, a client of a local server uses the credentials `engram
	// serve` generated in the data dir (natsauth.CredentialsFile).
	User, Password, Token, NKeyFile, CredsFile string
	CAFile, CertFile, KeyFile                  string
	// Insecure turns authentication off: serve's embedded server accepts
	// anyone, clients do not read the data dir's credentials. For
	// throwaway use only.
	Insecure bool
	// StoreKeyFile holds the embedded server's JetStream store key;
	// empty: a key in StoreKeyDir, generated on first start.
	StoreKeyFile string
	// StoreKeyDir is where the store keys are kept when StoreKeyFile is
	// empty (natsauth.EnsureStoreKey), outside the data dir; empty:
	// natsauth.StoreKeyDir(), in the user's configuration dir
	// ($XDG_CONFIG_HOME/engram/nats-store-keys). Not a setting: tests set
	// it, operators set XDG_CONFIG_HOME or StoreKeyFile.
	StoreKeyDir string
	// Sync is how the embedded server syncs its JetStream files to disk:
	// "always" (after every write) or an interval ("1s"); a message
	// published since the last sync is lost with the machine's power.
	Sync string
}

// SyncPolicy is what Sync says (checked by Validate): after every write,
// or every interval.
func (n NATS) SyncPolicy() (always bool, interval time.Duration) {
	if n.Sync == "always" {
		return true, 0
	}
	d, _ := time.ParseDuration(n.Sync)
	return false, d
}

// Client is the authentication and TLS given by settings (not the data
// dir's credentials: see internal/app).
func (n NATS) Client() natsauth.Client {
	return natsauth.Client{User: n.User, Password: n.Password, Token: n.Token, NKeyFile: n.NKeyFile,
		CredsFile: n.CredsFile, CAFile: n.CAFile, CertFile: n.CertFile, KeyFile: n.KeyFile}
}

// HTTP is the health and metrics endpoint.
type HTTP struct {
	// Addr of /healthz, /readyz and /metrics; empty disables the endpoint.
	Addr string
	// LagRefresh is how often JetStream consumer lag gauges are refreshed.
	LagRefresh time.Duration
	// MetricsProjectLabels labels the model metrics with project ids
	// (bounded, see health.MaxProjectLabels); off by default: /metrics is
	// unauthenticated and project ids are chosen by whoever publishes.
	MetricsProjectLabels bool
}

// Store selects and locates the memory store.
type Store struct {
	Kind       string // sqlite | redis
	SQLitePath string // empty: <DataDir>/engram.db
	RedisURL   string
	// RedisVectorQuant is how new Redis vector sets store vectors: q8
	// (default), noquant (float32) or bin. Existing sets keep theirs.
	RedisVectorQuant string
	// RedisReplicaWait is how long a worker waits for a replica of each
	// Redis primary to hold the writes so far before it acknowledges an
	// event (redis.Store.Durable; a primary without replicas is not waited
	// for); 0 acknowledges at once.
	RedisReplicaWait time.Duration
	// RedisCA, RedisCert and RedisKey are PEM files for TLS to Redis
	// (rediss:// URLs): the CA(s) of the server's certificate and a client
	// certificate and key. See RedisTLS.
	RedisCA, RedisCert, RedisKey string
}

// Events configures subjects, streams and consumers.
type Events struct {
	SubjectPrefix string
	// ReplyPrefixes are the subject prefixes a turn_started's reply_to may
	// name (default events.DefaultReplyPrefix).
	ReplyPrefixes []string
	// Retention of ENGRAM_IN, ENGRAM_OUT and ENGRAM_DLQ by age and size.
	InMaxAge, OutMaxAge, DLQMaxAge       time.Duration
	InMaxBytes, OutMaxBytes, DLQMaxBytes int64
	// InMaxMsgsPerSubject bounds ENGRAM_IN per subject (-1: unlimited).
	InMaxMsgsPerSubject int64
	// MaxEventBytes is the largest input event body.
	MaxEventBytes   int64
	Replicas        int
	DuplicateWindow time.Duration
	// Consumer overrides; 0 keeps each worker role's own default
	// (events.DefaultTopology: the injector has a short ack wait and few
	// deliveries, the others longer).
	AckWait       time.Duration
	MaxDeliver    int
	MaxAckPending int
}

// Work configures the workers a process runs.
type Work struct {
	// Workers lists the roles this process runs; empty or "all": every
	// registered worker; "none": no worker (an idle-detector-only process).
	Workers []string
	// Concurrency is the number of messages a worker handles at once.
	Concurrency int
	// PerWorker overrides Concurrency by role.
	PerWorker map[string]int
	// ShutdownTimeout bounds the graceful drain of in-flight messages.
	ShutdownTimeout time.Duration
}

// Idle configures the idle detector.
type Idle struct {
	Enabled bool
	// Quiet is how long a session must be quiet before session_idle.
	Quiet time.Duration
	// Sweep is how often sessions are checked; 0: derived from Quiet.
	Sweep time.Duration
}

// Log configures the logger.
type Log struct {
	Format string // auto | json | console
	Level  string // debug | info | warn | error
}

// Default returns the configuration before environment and flags.
func Default() Config {
	return Config{
		DataDir: defaultDataDir(),
		NATS: NATS{
			Listen:         "127.0.0.1:4222",
			ConnectTimeout: 5 * time.Second,
			Sync:           "1s",
		},
		HTTP:         HTTP{Addr: "127.0.0.1:7474", LagRefresh: 15 * time.Second},
		Console:      Console{Addr: DefaultConsoleAddr},
		Store:        Store{Kind: StoreSQLite, RedisVectorQuant: "q8", RedisReplicaWait: redis.DefaultReplicaWait},
		Events:       eventsDefaults(),
		Work:         Work{Concurrency: 2, ShutdownTimeout: 25 * time.Second},
		Idle:         Idle{Enabled: true, Quiet: 30 * time.Minute},
		Log:          Log{Format: LogAuto, Level: "info"},
		LLM:          llm.DefaultConfig(),
		CrossProject: true,
		MCP:          MCP{SessionsPerToken: 100, SessionIdle: 30 * time.Minute},
		Inject:       inject.Defaults(),
		Extract:      extract.Defaults(),
		Compact:      compact.Defaults(),
		Consolidate:  consolidate.Defaults(),
	}
}

func eventsDefaults() Events {
	t := events.DefaultTopology()
	return Events{
		SubjectPrefix:       t.Prefix,
		ReplyPrefixes:       []string{events.DefaultReplyPrefix},
		InMaxAge:            t.In.MaxAge,
		InMaxBytes:          t.In.MaxBytes,
		OutMaxAge:           t.Out.MaxAge,
		OutMaxBytes:         t.Out.MaxBytes,
		DLQMaxAge:           t.DLQ.MaxAge,
		DLQMaxBytes:         t.DLQ.MaxBytes,
		InMaxMsgsPerSubject: t.In.MaxMsgsPerSubject,
		MaxEventBytes:       int64(t.MaxEventBytes),
		Replicas:            t.In.Replicas,
		DuplicateWindow:     t.In.Duplicates,
	}
}

// Topology is the JetStream layout of this configuration: the default
// topology with the prefix, retention, replicas and consumer overrides
// applied, plus the idle detector's consumer when it is on.
func (c Config) Topology() events.Topology {
	t := events.DefaultTopology()
	e := c.Events
	t.Prefix = e.SubjectPrefix
	for _, s := range []struct {
		sc    *events.StreamConfig
		age   time.Duration
		bytes int64
	}{{&t.In, e.InMaxAge, e.InMaxBytes}, {&t.Out, e.OutMaxAge, e.OutMaxBytes}, {&t.DLQ, e.DLQMaxAge, e.DLQMaxBytes}} {
		s.sc.MaxAge, s.sc.MaxBytes = s.age, s.bytes
		s.sc.Replicas = e.Replicas
		s.sc.Duplicates = e.DuplicateWindow
	}
	t.In.MaxMsgsPerSubject = e.InMaxMsgsPerSubject
	t.MaxEventBytes = int(e.MaxEventBytes)
	if c.Idle.Enabled {
		t.Consumers = append(t.Consumers, idle.ConsumerConfig())
	}
	for i := range t.Consumers {
		cc := &t.Consumers[i]
		if e.AckWait > 0 {
			cc.AckWait = e.AckWait
		}
		if e.MaxDeliver != 0 && cc.MaxDeliver != -1 {
			cc.MaxDeliver = e.MaxDeliver
		}
		if e.MaxAckPending > 0 {
			cc.MaxAckPending = e.MaxAckPending
		}
	}
	return t
}

func defaultDataDir() string {
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "engram")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "engram")
	}
	return ".engram"
}

// NATSStoreDir is the embedded server's JetStream folder.
func (c Config) NATSStoreDir() string { return filepath.Join(c.DataDir, "nats") }

// SQLitePath is the SQLite database file.
func (c Config) SQLitePath() string {
	if c.Store.SQLitePath != "" {
		return c.Store.SQLitePath
	}
	return filepath.Join(c.DataDir, "engram.db")
}

// Embedded reports whether `engram serve` runs its own NATS server.
func (c Config) Embedded() bool { return strings.TrimSpace(c.NATS.URL) == "" }

// ClientNATSURL is the URL a client subcommand connects to: NATS.URL, or
// the local `engram serve` on NATS.Listen.
func (c Config) ClientNATSURL() string {
	if !c.Embedded() {
		return c.NATS.URL
	}
	host, port, err := net.SplitHostPort(c.NATS.Listen)
	if err != nil {
		return "nats://" + c.NATS.Listen
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "nats://" + net.JoinHostPort(host, port)
}

// HTTPURL is the base URL of the health endpoint (http://host:port).
func (c Config) HTTPURL() string {
	host, port, err := net.SplitHostPort(c.HTTP.Addr)
	if err != nil {
		return "http://" + c.HTTP.Addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// IdleSweep is the sweep interval: Idle.Sweep, or Quiet/30 clamped to
// [1s, 1m].
func (c Config) IdleSweep() time.Duration {
	if c.Idle.Sweep > 0 {
		return c.Idle.Sweep
	}
	d := c.Idle.Quiet / 30
	return min(max(d, time.Second), time.Minute)
}

// ConcurrencyOf is the concurrency of a worker role.
func (c Config) ConcurrencyOf(role string) int {
	if n, ok := c.Work.PerWorker[role]; ok {
		return n
	}
	return c.Work.Concurrency
}

// Runs reports whether this process runs the worker role.
func (c Config) Runs(role string) bool {
	if len(c.Work.Workers) == 0 {
		return true
	}
	for _, w := range c.Work.Workers {
		if w == "all" || w == role { // "none" matches no role
			return true
		}
	}
	return false
}

// Validate checks the whole configuration and returns every problem found,
// joined; nil when it is usable.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	if strings.TrimSpace(c.DataDir) == "" {
		bad("data dir (ENGRAM_DATA) is empty")
	}
	if always, d := c.NATS.SyncPolicy(); !always && d <= 0 {
		bad("embedded NATS sync (ENGRAM_NATS_SYNC) %q: want always or an interval such as 1s", c.NATS.Sync)
	}
	if err := memory.CheckPIITenants(c.RedactPII); err != nil {
		bad("ENGRAM_REDACT_PII: %v", err)
	}
	if !c.Embedded() {
		for _, u := range strings.Split(c.NATS.URL, ",") {
			if err := checkURL(strings.TrimSpace(u), "nats", "tls", "ws", "wss"); err != nil {
				bad("NATS URL (ENGRAM_NATS_URL) %q: %v", credurl.Redact(u), credurl.Error(err))
			}
		}
		if natsauth.URLHasAuth(c.NATS.URL) && c.NATS.Client().HasAuth() {
			bad("NATS credentials are given both in ENGRAM_NATS_URL and in ENGRAM_NATS_USER/PASSWORD/TOKEN/NKEY/CREDS: give one")
		}
	}
	errs = append(errs, c.NATS.Client().Validate()...)
	if c.NATS.StoreKeyFile != "" {
		if _, err := natsauth.ReadKeyFile(c.NATS.StoreKeyFile); err != nil {
			bad("NATS store key file (ENGRAM_NATS_STORE_KEY_FILE): %v", err)
		}
	}
	if err := checkHostPort(c.NATS.Listen, true); err != nil {
		bad("NATS listen address (ENGRAM_NATS_LISTEN) %q: %v", c.NATS.Listen, err)
	}
	if c.NATS.ConnectTimeout <= 0 {
		bad("NATS connect timeout (ENGRAM_NATS_CONNECT_TIMEOUT) must be positive, got %s", c.NATS.ConnectTimeout)
	}
	if c.HTTP.Addr != "" {
		if err := checkHostPort(c.HTTP.Addr, false); err != nil {
			bad("HTTP address (ENGRAM_HTTP_ADDR) %q: %v", c.HTTP.Addr, err)
		}
	}
	if c.HTTP.LagRefresh <= 0 {
		bad("lag refresh (ENGRAM_LAG_REFRESH) must be positive, got %s", c.HTTP.LagRefresh)
	}
	switch c.Store.Kind {
	case StoreSQLite:
	case StoreRedis:
		if strings.TrimSpace(c.Store.RedisURL) == "" {
			bad("store is redis but ENGRAM_REDIS_URL is empty")
		} else {
			// One URL (or host:port) is a server; a comma-separated list a cluster.
			for _, u := range strings.Split(c.Store.RedisURL, ",") {
				u = strings.TrimSpace(u)
				var err error
				if strings.Contains(u, "://") {
					err = checkURL(u, "redis", "rediss", "unix")
				} else if strings.Contains(u, "@") {
					// user:password@host:port: read as the redis:// URL it
					// becomes (app.OpenStore), so that the message masks it.
					u = "redis://" + u
					err = checkURL(u, "redis")
				} else {
					err = checkHostPort(u, false)
				}
				if err != nil {
					bad("Redis URL (ENGRAM_REDIS_URL) %q: %v", credurl.Redact(u), credurl.Error(err))
				}
			}
		}
	default:
		bad("store (ENGRAM_STORE) %q: want %s or %s", c.Store.Kind, StoreSQLite, StoreRedis)
	}
	if w := c.Store.RedisReplicaWait; w < 0 || (w > 0 && w < time.Millisecond) {
		bad("Redis replica wait (ENGRAM_REDIS_REPLICA_WAIT): %v: 0 (off) or at least 1ms", w)
	}
	if err := redis.CheckQuantization(c.Store.RedisVectorQuant); err != nil {
		bad("Redis vector quantization (ENGRAM_REDIS_VECTOR_QUANT): %v", err)
	}
	e := c.Events
	if err := checkSubjectPrefix(e.SubjectPrefix); err != nil {
		bad("subject prefix (ENGRAM_SUBJECT_PREFIX) %q: %v", e.SubjectPrefix, err)
	}
	for _, r := range []struct {
		env   string
		age   time.Duration
		bytes int64
	}{{"IN", e.InMaxAge, e.InMaxBytes}, {"OUT", e.OutMaxAge, e.OutMaxBytes}, {"DLQ", e.DLQMaxAge, e.DLQMaxBytes}} {
		if r.age <= 0 {
			bad("max age (ENGRAM_%s_MAX_AGE) must be positive, got %s", r.env, r.age)
		} else if e.DuplicateWindow > r.age {
			bad("duplicate window (ENGRAM_DUPLICATE_WINDOW) %s is longer than ENGRAM_%s_MAX_AGE %s", e.DuplicateWindow, r.env, r.age)
		}
		if r.bytes <= 0 {
			bad("max bytes (ENGRAM_%s_MAX_BYTES) must be positive, got %d", r.env, r.bytes)
		}
	}
	if e.InMaxMsgsPerSubject == 0 || e.InMaxMsgsPerSubject < -1 {
		bad("max messages per subject (ENGRAM_IN_MAX_MSGS_PER_SUBJECT) must be positive or -1 (unlimited), got %d", e.InMaxMsgsPerSubject)
	}
	if e.MaxEventBytes <= 0 || e.MaxEventBytes > 64<<20 {
		bad("max event bytes (ENGRAM_MAX_EVENT_BYTES) must be 1..64M, got %d", e.MaxEventBytes)
	}
	if e.Replicas < 1 || e.Replicas > 5 {
		bad("stream replicas (ENGRAM_STREAM_REPLICAS) must be 1..5, got %d", e.Replicas)
	}
	if e.DuplicateWindow <= 0 {
		bad("duplicate window (ENGRAM_DUPLICATE_WINDOW) must be positive, got %s", e.DuplicateWindow)
	}
	if e.AckWait != 0 && e.AckWait < time.Second {
		bad("ack wait (ENGRAM_ACK_WAIT) must be 0 (role default) or at least 1s, got %s", e.AckWait)
	}
	if e.MaxDeliver < -1 {
		bad("max deliver (ENGRAM_MAX_DELIVER) must be 0 (role default), -1 (unlimited) or positive, got %d", e.MaxDeliver)
	}
	if e.MaxAckPending < 0 {
		bad("max ack pending (ENGRAM_MAX_ACK_PENDING) must be 0 (role default) or positive, got %d", e.MaxAckPending)
	}
	w := c.Work
	if w.Concurrency < 1 {
		bad("concurrency (ENGRAM_CONCURRENCY) must be at least 1, got %d", w.Concurrency)
	}
	roles := make([]string, 0, len(w.PerWorker))
	for r := range w.PerWorker {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	for _, r := range roles {
		if n := w.PerWorker[r]; n < 1 {
			bad("worker concurrency (ENGRAM_WORKER_CONCURRENCY) of %q must be at least 1, got %d", r, n)
		}
	}
	for _, r := range w.Workers {
		if !validRole(r) {
			bad("workers (ENGRAM_WORKERS): %q is not a worker role name", r)
		}
	}
	if w.ShutdownTimeout <= 0 {
		bad("shutdown timeout (ENGRAM_SHUTDOWN_TIMEOUT) must be positive, got %s", w.ShutdownTimeout)
	}
	if c.Idle.Enabled && c.Idle.Quiet <= 0 {
		bad("idle quiet period (ENGRAM_IDLE_QUIET) must be positive when the idle detector is on, got %s", c.Idle.Quiet)
	}
	if c.Idle.Sweep < 0 {
		bad("idle sweep (ENGRAM_IDLE_SWEEP) must not be negative, got %s", c.Idle.Sweep)
	}
	switch c.Log.Format {
	case LogAuto, LogJSON, LogConsole:
	default:
		bad("log format (ENGRAM_LOG_FORMAT) %q: want auto, json or console", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log level (ENGRAM_LOG_LEVEL) %q: want debug, info, warn or error", c.Log.Level)
	}
	if err := c.LLM.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Inject.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Extract.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Compact.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.MCP.Addr != "" {
		if err := checkHostPort(c.MCP.Addr, false); err != nil {
			bad("MCP address (ENGRAM_MCP_ADDR) %q: %v", c.MCP.Addr, err)
		}
		if strings.TrimSpace(c.MCP.Tokens) == "" {
			bad("the MCP endpoint (ENGRAM_MCP_ADDR) needs a tokens file (ENGRAM_MCP_TOKENS): no token, no access")
		}
	}
	if c.MCP.SessionsPerToken < 1 {
		bad("MCP sessions per token (ENGRAM_MCP_SESSIONS_PER_TOKEN) %d: want at least 1", c.MCP.SessionsPerToken)
	}
	if c.MCP.SessionIdle < time.Second {
		bad("MCP session idle timeout (ENGRAM_MCP_SESSION_IDLE) %v: want at least 1s", c.MCP.SessionIdle)
	}
	if err := c.Consolidate.Validate(); err != nil {
		errs = append(errs, err)
	}
	c.validateConsole(bad)
	c.validateSecurity(bad)
	// A library's message may repeat a URL given in a setting.
	return credurl.Error(errors.Join(errs...))
}

func checkURL(raw string, schemes ...string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	for _, s := range schemes {
		if u.Scheme == s {
			if u.Host == "" && s != "unix" {
				return errors.New("no host")
			}
			return nil
		}
	}
	return fmt.Errorf("scheme %q, want one of %s", u.Scheme, strings.Join(schemes, ", "))
}

func checkHostPort(addr string, allowRandom bool) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("port %q is not a number", port)
	}
	if n == -1 && allowRandom {
		return nil
	}
	if n < 0 || n > 65535 {
		return fmt.Errorf("port %d out of range", n)
	}
	return nil
}

// checkSubjectPrefix accepts one or more dot-separated subject tokens made
// of letters, digits, '-' and '_'.
func checkSubjectPrefix(p string) error {
	if p == "" {
		return errors.New("empty")
	}
	for _, tok := range strings.Split(p, ".") {
		if tok == "" {
			return errors.New("empty token")
		}
		if !validRole(tok) {
			return fmt.Errorf("token %q: only letters, digits, '-' and '_'", tok)
		}
	}
	return nil
}

func validRole(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// validateConsole: a console reached from other hosts is served over TLS
// (its cookies carry a session; its login form a token).
func (c Config) validateConsole(bad func(string, ...any)) {
	if !c.Console.On() {
		return
	}
	host, _, err := net.SplitHostPort(c.Console.Addr)
	if err := checkHostPort(c.Console.Addr, false); err != nil {
		bad("console address (ENGRAM_CONSOLE_ADDR) %q: %v", c.Console.Addr, err)
		return
	}
	tls := c.Console.TLSCert != "" || c.Console.TLSKey != ""
	if tls && (c.Console.TLSCert == "" || c.Console.TLSKey == "") {
		bad("the console's TLS needs both ENGRAM_CONSOLE_TLS_CERT and ENGRAM_CONSOLE_TLS_KEY")
	}
	if err == nil && !tls && !loopback(host) {
		bad("console address (ENGRAM_CONSOLE_ADDR) %q is not loopback: serve it over TLS (ENGRAM_CONSOLE_TLS_CERT and _KEY), "+
			"or keep it on 127.0.0.1 behind a TLS proxy", c.Console.Addr)
	}
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
