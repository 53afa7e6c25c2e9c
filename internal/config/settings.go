package config

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/engram-memory/engram/internal/credurl"
)

// Group selects a part of the settings; subcommands register only what
// they use.
type Group uint8

const (
	// Conn: where the bus and the health endpoint are, subjects, logging.
	Conn Group = 1 << iota
	// Topology: streams and consumers (engram setup, serve, workers).
	Topology
	// Runtime: data dir, store, workers, idle detector (serve, workers).
	Runtime

	// All is every setting.
	All = Conn | Topology | Runtime
)

// Setting is one configuration knob: a flag, an environment variable, a
// default and a meaning. Settings lists them all; the table of
// docs/configuration.md is made from it.
type Setting struct {
	Flag    string
	Env     string
	Usage   string
	Default string // the default as text
	Group   Group
	value   flag.Value
}

// Settings returns the table of settings bound to c. The values are c's
// fields: setting one writes c.
func (c *Config) Settings() []Setting {
	s := []Setting{
		{Flag: "data", Env: "ENGRAM_DATA", Group: Conn | Runtime, value: (*strV)(&c.DataDir),
			Usage: "data dir (mode 700): embedded NATS store (<data>/nats), its credentials and tenants (not its store key), SQLite database (<data>/engram.db); default $XDG_DATA_HOME/engram or ~/.local/share/engram"},
		{Flag: "nats-url", Env: "ENGRAM_NATS_URL", Group: Conn, value: (*natsURLV)(&c.NATS.URL),
			Usage: "NATS server URLs (comma-separated); empty: serve runs an embedded server, other commands use the local one on -nats-listen"},
		{Flag: "nats-listen", Env: "ENGRAM_NATS_LISTEN", Group: Conn, value: (*strV)(&c.NATS.Listen),
			Usage: "client address of the embedded NATS server (port -1: random)"},
		{Flag: "nats-connect-timeout", Env: "ENGRAM_NATS_CONNECT_TIMEOUT", Group: Conn, value: (*durV)(&c.NATS.ConnectTimeout),
			Usage: "timeout of the first NATS connection"},
		{Flag: "nats-user", Env: "ENGRAM_NATS_USER", Group: Conn, value: (*strV)(&c.NATS.User),
			Usage: "NATS user (with ENGRAM_NATS_PASSWORD); a role of deploy/nats/accounts.conf: admin, setup, platform, injector, extractor, consolidator, compactor, idle"},
		{Flag: "nats-password", Env: "ENGRAM_NATS_PASSWORD", Group: Conn, value: (*secretV)(&c.NATS.Password),
			Usage: "NATS password (prefer the variable: a flag shows in the process list)"},
		{Flag: "nats-token", Env: "ENGRAM_NATS_TOKEN", Group: Conn, value: (*secretV)(&c.NATS.Token),
			Usage: "NATS authentication token"},
		{Flag: "nats-nkey", Env: "ENGRAM_NATS_NKEY", Group: Conn, value: (*strV)(&c.NATS.NKeyFile),
			Usage: "file holding the NATS nkey seed (SU...) to authenticate with"},
		{Flag: "nats-creds", Env: "ENGRAM_NATS_CREDS", Group: Conn, value: (*strV)(&c.NATS.CredsFile),
			Usage: "NATS .creds file (user JWT and seed) to authenticate with"},
		{Flag: "nats-ca", Env: "ENGRAM_NATS_CA", Group: Conn, value: (*strV)(&c.NATS.CAFile),
			Usage: "PEM file of the CAs of the NATS server's certificate (turns TLS on)"},
		{Flag: "nats-cert", Env: "ENGRAM_NATS_CERT", Group: Conn, value: (*strV)(&c.NATS.CertFile),
			Usage: "client certificate (PEM) for NATS mutual TLS, with ENGRAM_NATS_KEY"},
		{Flag: "nats-key", Env: "ENGRAM_NATS_KEY", Group: Conn, value: (*strV)(&c.NATS.KeyFile),
			Usage: "client certificate key (PEM) for NATS mutual TLS"},
		{Flag: "insecure", Env: "ENGRAM_INSECURE", Group: Conn, value: (*boolV)(&c.NATS.Insecure),
			Usage: "THROWAWAY USE ONLY: serve's embedded NATS accepts anonymous clients, and clients do not read the data dir's credentials"},
		{Flag: "nats-sync", Env: "ENGRAM_NATS_SYNC", Group: Runtime, value: (*strV)(&c.NATS.Sync),
			Usage: "how serve's embedded NATS server syncs its streams to disk: an interval (events published since the last sync are lost with the machine's power) or always (after every write: about 40% fewer turns/s at 8 clients)"},
		{Flag: "nats-store-key-file", Env: "ENGRAM_NATS_STORE_KEY_FILE", Group: Runtime, value: (*strV)(&c.NATS.StoreKeyFile),
			Usage: "file of the embedded NATS JetStream store encryption key (empty: <user config dir>/engram/nats-store-keys/<key id>.key, outside the data dir, generated on first start; a key of an older version in <data>/nats-store.key is moved there)"},
		{Flag: "http", Env: "ENGRAM_HTTP_ADDR", Group: Conn, value: (*strV)(&c.HTTP.Addr),
			Usage: "address of /healthz, /readyz and /metrics (port 0: random; empty: off)"},
		{Flag: "lag-refresh", Env: "ENGRAM_LAG_REFRESH", Group: Runtime, value: (*durV)(&c.HTTP.LagRefresh),
			Usage: "how often the JetStream consumer lag gauges are refreshed"},
		{Flag: "store", Env: "ENGRAM_STORE", Group: Runtime, value: (*strV)(&c.Store.Kind),
			Usage: "memory store: sqlite or redis"},
		{Flag: "sqlite-path", Env: "ENGRAM_SQLITE_PATH", Group: Runtime, value: (*strV)(&c.Store.SQLitePath),
			Usage: "SQLite database file (default <data>/engram.db)"},
		{Flag: "redis-url", Env: "ENGRAM_REDIS_URL", Group: Runtime, value: (*strV)(&c.Store.RedisURL),
			Usage: "Redis 8 URL (redis://host:port/db), required with -store redis"},
		{Flag: "redis-vector-quant", Env: "ENGRAM_REDIS_VECTOR_QUANT", Group: Runtime, value: (*strV)(&c.Store.RedisVectorQuant),
			Usage: "how new Redis vector sets store vectors: q8 (int8), noquant (float32, exact cosine) or bin; a set keeps the one it was created with"},
		{Flag: "redis-replica-wait", Env: "ENGRAM_REDIS_REPLICA_WAIT", Group: Runtime, value: (*durV)(&c.Store.RedisReplicaWait),
			Usage: "how long a worker waits for a Redis replica to hold its writes before it acknowledges the event (a primary without replicas: not at all); 0: acknowledge at once (writes can be lost with a primary)"},
		{Flag: "subject-prefix", Env: "ENGRAM_SUBJECT_PREFIX", Group: Conn, value: (*strV)(&c.Events.SubjectPrefix),
			Usage: "first token(s) of every subject: <prefix>.in.<type>.<tenant>.<project>.<session>"},
		{Flag: "in-max-age", Env: "ENGRAM_IN_MAX_AGE", Group: Topology, value: (*durV)(&c.Events.InMaxAge),
			Usage: "retention by age of ENGRAM_IN (accepts d for days)"},
		{Flag: "in-max-bytes", Env: "ENGRAM_IN_MAX_BYTES", Group: Topology, value: (*bytesV)(&c.Events.InMaxBytes),
			Usage: "retention by size of ENGRAM_IN (K, M, G suffixes, powers of 1024); when full, publishes are refused, nothing is dropped"},
		{Flag: "in-max-msgs-per-subject", Env: "ENGRAM_IN_MAX_MSGS_PER_SUBJECT", Group: Topology, value: (*int64V)(&c.Events.InMaxMsgsPerSubject),
			Usage: "events ENGRAM_IN keeps per subject (one event type of one session) until consumed; over it that session's publishes are refused, not everyone's (-1: unlimited)"},
		{Flag: "max-event-bytes", Env: "ENGRAM_MAX_EVENT_BYTES", Group: Conn | Topology, value: (*bytesV)(&c.Events.MaxEventBytes),
			Usage: "largest input event body (JSON); bigger events are refused at publish by the client, engram publish and ENGRAM_IN (at most 64M)"},
		{Flag: "out-max-age", Env: "ENGRAM_OUT_MAX_AGE", Group: Topology, value: (*durV)(&c.Events.OutMaxAge),
			Usage: "retention by age of ENGRAM_OUT"},
		{Flag: "out-max-bytes", Env: "ENGRAM_OUT_MAX_BYTES", Group: Topology, value: (*bytesV)(&c.Events.OutMaxBytes),
			Usage: "retention by size of ENGRAM_OUT (oldest dropped first)"},
		{Flag: "dlq-max-age", Env: "ENGRAM_DLQ_MAX_AGE", Group: Topology, value: (*durV)(&c.Events.DLQMaxAge),
			Usage: "retention by age of ENGRAM_DLQ"},
		{Flag: "dlq-max-bytes", Env: "ENGRAM_DLQ_MAX_BYTES", Group: Topology, value: (*bytesV)(&c.Events.DLQMaxBytes),
			Usage: "retention by size of ENGRAM_DLQ"},
		{Flag: "stream-replicas", Env: "ENGRAM_STREAM_REPLICAS", Group: Topology, value: (*intV)(&c.Events.Replicas),
			Usage: "replicas of each stream, each consumer and the idle detector's ENGRAM_ACTIVITY bucket (1 for a single server, 3 on a NATS cluster of three)"},
		{Flag: "duplicate-window", Env: "ENGRAM_DUPLICATE_WINDOW", Group: Topology, value: (*durV)(&c.Events.DuplicateWindow),
			Usage: "window in which a repeated Nats-Msg-Id (event id) is dropped"},
		{Flag: "ack-wait", Env: "ENGRAM_ACK_WAIT", Group: Topology, value: (*durV)(&c.Events.AckWait),
			Usage: "override of every consumer's ack wait (0: each role's default: injector 10s, extractor 1m, consolidator 2m, compactor 1m, idle 30s)"},
		{Flag: "max-deliver", Env: "ENGRAM_MAX_DELIVER", Group: Topology, value: (*intV)(&c.Events.MaxDeliver),
			Usage: "override of deliveries before a message is dead-lettered (0: role default: injector 3, others 10)"},
		{Flag: "max-ack-pending", Env: "ENGRAM_MAX_ACK_PENDING", Group: Topology, value: (*intV)(&c.Events.MaxAckPending),
			Usage: "override of the unacknowledged messages a consumer allows across its replicas (0: role default)"},
		{Flag: "workers", Env: "ENGRAM_WORKERS", Group: Runtime, value: (*listV)(&c.Work.Workers),
			Usage: "worker roles this process runs, comma-separated (empty or all: every registered worker; none: no worker)"},
		{Flag: "concurrency", Env: "ENGRAM_CONCURRENCY", Group: Runtime, value: (*intV)(&c.Work.Concurrency),
			Usage: "messages each worker handles at once"},
		{Flag: "worker-concurrency", Env: "ENGRAM_WORKER_CONCURRENCY", Group: Runtime, value: (*mapV)(&c.Work.PerWorker),
			Usage: "per-role concurrency overrides, e.g. injector=8,extractor=2"},
		{Flag: "shutdown-timeout", Env: "ENGRAM_SHUTDOWN_TIMEOUT", Group: Runtime, value: (*durV)(&c.Work.ShutdownTimeout),
			Usage: "graceful shutdown: how long in-flight messages may take to finish"},
		{Flag: "idle", Env: "ENGRAM_IDLE", Group: Runtime | Topology, value: (*boolV)(&c.Idle.Enabled),
			Usage: "run the idle detector (publishes session_idle); false turns it off"},
		{Flag: "idle-quiet", Env: "ENGRAM_IDLE_QUIET", Group: Runtime, value: (*durV)(&c.Idle.Quiet),
			Usage: "how long a session is quiet before session_idle is published"},
		{Flag: "idle-sweep", Env: "ENGRAM_IDLE_SWEEP", Group: Runtime, value: (*durV)(&c.Idle.Sweep),
			Usage: "how often the idle detector checks sessions (0: quiet/30, between 1s and 1m)"},
		{Flag: "ollama-host", Env: "ENGRAM_OLLAMA_HOST", Group: Runtime, value: (*strV)(&c.LLM.Host),
			Usage: "Ollama base URL (empty: $OLLAMA_HOST, else http://127.0.0.1:11434)"},
		{Flag: "chat-model", Env: "ENGRAM_CHAT_MODEL", Group: Runtime, value: (*strV)(&c.ChatModel),
			Usage: "chat model of every role (extract, consolidate, summarize); the per-role settings override it"},
		{Flag: "extract-model", Env: "ENGRAM_EXTRACT_MODEL", Group: Runtime, value: (*strV)(&c.LLM.Extract.Name),
			Usage: "model of the extractor"},
		{Flag: "consolidate-model", Env: "ENGRAM_CONSOLIDATE_MODEL", Group: Runtime, value: (*strV)(&c.LLM.Consolidate.Name),
			Usage: "model of the consolidator"},
		{Flag: "summarize-model", Env: "ENGRAM_SUMMARIZE_MODEL", Group: Runtime, value: (*strV)(&c.LLM.Summarize.Name),
			Usage: "model of the compactor"},
		{Flag: "embed-model", Env: "ENGRAM_EMBED_MODEL", Group: Runtime, value: (*strV)(&c.LLM.Embed.Name),
			Usage: "Ollama embedding model (empty: the built-in hashing embedder)"},
		{Flag: "model-autopull", Env: "ENGRAM_MODEL_AUTOPULL", Group: Runtime, value: (*boolV)(&c.LLM.AutoPull),
			Usage: "pull a missing model once when a call needs it"},
		{Flag: "daily-token-budget", Env: "ENGRAM_DAILY_TOKEN_BUDGET", Group: Runtime, value: (*int64V)(&c.LLM.DailyTokenBudget),
			Usage: "model tokens one project may spend per UTC day (0: no budget)"},
		{Flag: "inject-min-confidence", Env: "ENGRAM_INJECT_MIN_CONFIDENCE", Group: Runtime, value: (*floatV)(&c.Inject.MinConfidence),
			Usage: "injector: memories under this confidence are never injected"},
		{Flag: "inject-hits", Env: "ENGRAM_INJECT_HITS", Group: Runtime, value: (*intV)(&c.Inject.Hits),
			Usage: "injector: hits asked of the ranker"},
		{Flag: "inject-max-standing", Env: "ENGRAM_INJECT_MAX_STANDING", Group: Runtime, value: (*intV)(&c.Inject.MaxStanding),
			Usage: "injector: standing instructions per block"},
		{Flag: "inject-line-chars", Env: "ENGRAM_INJECT_LINE_CHARS", Group: Runtime, value: (*intV)(&c.Inject.LineChars),
			Usage: "injector: characters of memory text per line"},
		{Flag: "inject-relative-floor", Env: "ENGRAM_INJECT_RELATIVE_FLOOR", Group: Runtime, value: (*floatV)(&c.Inject.RelativeFloor),
			Usage: "injector: recalled lines score at least this fraction of the best"},
		{Flag: "inject-max-recalled", Env: "ENGRAM_INJECT_MAX_RECALLED", Group: Runtime, value: (*intV)(&c.Inject.MaxRecalled),
			Usage: "injector: recalled lines at most"},
		{Flag: "inject-plateau-keep", Env: "ENGRAM_INJECT_PLATEAU_KEEP", Group: Runtime, value: (*intV)(&c.Inject.PlateauKeep),
			Usage: "injector: lines kept when the ranking reaches the ceiling without falling under the floor"},
		{Flag: "inject-min-query-chars", Env: "ENGRAM_INJECT_MIN_QUERY_CHARS", Group: Runtime, value: (*intV)(&c.Inject.MinQueryChars),
			Usage: "injector: text channels run for questions at least this long (anchor paths always)"},
		{Flag: "inject-auto-recall", Env: "ENGRAM_INJECT_AUTO_RECALL", Group: Runtime, value: (*boolV)(&c.Inject.AutoRecall),
			Usage: "injector: build memory blocks at all (false: no block is sent)"},
		{Flag: "redact-pii", Env: "ENGRAM_REDACT_PII", Group: Runtime, value: (*listV)(&c.RedactPII),
			Usage: "tenants whose memories, transcripts and summaries have e-mail addresses, phone numbers, IBANs and national ids redacted, comma-separated (default: the default tenant; *: all); empty: off"},
		{Flag: "cross-project", Env: "ENGRAM_CROSS_PROJECT", Group: Runtime, value: (*boolV)(&c.CrossProject),
			Usage: "memory may reach across a tenant's projects; false: a project sees only its own memories and its tenant's global ones, and no extracted memory is global or reaches anywhere"},
		{Flag: "inject-cross-project", Env: "ENGRAM_INJECT_CROSS_PROJECT", Group: Runtime, value: (*boolV)(&c.Inject.CrossProject),
			Usage: "injector: recall memories of the tenant's other projects whose reach is anywhere (off when ENGRAM_CROSS_PROJECT is)"},
		{Flag: "inject-disabled-projects", Env: "ENGRAM_INJECT_DISABLED_PROJECTS", Group: Runtime, value: (*listV)(&c.Inject.DisabledProjects),
			Usage: "injector: projects with memory off, comma-separated"},
		{Flag: "inject-briefing-ttl", Env: "ENGRAM_INJECT_BRIEFING_TTL", Group: Runtime, value: (*durV)(&c.Inject.BriefingTTL),
			Usage: "injector: a session gets the first-turn directive again after this long"},
		{Flag: "rank-fusion", Env: "ENGRAM_RANK_FUSION", Group: Runtime, value: (*strV)(&c.Inject.Ranking.Fusion),
			Usage: "retrieval: how channels combine: score (each channel's scores over its best, weighted) or rrf (weighted reciprocal rank); empty: the embedder's ranking"},
		{Flag: "rank-lexical", Env: "ENGRAM_RANK_LEXICAL", Group: Runtime, value: (*autoFloatV)(&c.Inject.Ranking.Lexical),
			Usage: "retrieval: weight of the BM25 channel (auto: the embedder's ranking)"},
		{Flag: "rank-vector", Env: "ENGRAM_RANK_VECTOR", Group: Runtime, value: (*autoFloatV)(&c.Inject.Ranking.Vector),
			Usage: "retrieval: weight of the vector channel (0: not searched; auto: 0 with the built-in hashing embedder, 1 with an embedding model)"},
		{Flag: "rank-feedback", Env: "ENGRAM_RANK_FEEDBACK", Group: Runtime, value: (*autoFloatV)(&c.Inject.Ranking.Feedback),
			Usage: "retrieval: weight of the pseudo-relevance feedback channel (0: off; auto: the embedder's ranking)"},
		{Flag: "rank-time", Env: "ENGRAM_RANK_TIME", Group: Runtime, value: (*autoFloatV)(&c.Inject.Ranking.Time),
			Usage: "retrieval: weight of the time channel: when a question names a span of the past (\"last Saturday\", \"two months ago\"), the lexical matches written within it (0: off; auto: the embedder's ranking)"},
		{Flag: "rank-prior", Env: "ENGRAM_RANK_PRIOR", Group: Runtime, value: (*autoFloatV)(&c.Inject.Ranking.Prior),
			Usage: "retrieval: how far the prior (feedback, recency, confidence) moves a score, 0 to 1 (auto: the embedder's ranking)"},
		{Flag: "extract-max-memories", Env: "ENGRAM_EXTRACT_MAX_MEMORIES", Group: Runtime, value: (*intV)(&c.Extract.MaxMemories),
			Usage: "extractor: new memories accepted from one model reply (at most 5)"},
		{Flag: "extract-same-cosine", Env: "ENGRAM_EXTRACT_SAME_COSINE", Group: Runtime, value: (*floatV)(&c.Extract.SameCosine),
			Usage: "extractor: a new memory this close to one written earlier in the span reinforces it instead"},
		{Flag: "extract-transcript-chars", Env: "ENGRAM_EXTRACT_TRANSCRIPT_CHARS", Group: Runtime, value: (*intV)(&c.Extract.TranscriptChars),
			Usage: "extractor: characters of transcript the model sees (the tail is kept)"},
		{Flag: "extract-related-limit", Env: "ENGRAM_EXTRACT_RELATED_LIMIT", Group: Runtime, value: (*intV)(&c.Extract.RelatedLimit),
			Usage: "extractor: related memories shown to the model"},
		{Flag: "extract-max-invalid", Env: "ENGRAM_EXTRACT_MAX_INVALID", Group: Runtime, value: (*intV)(&c.Extract.MaxInvalid),
			Usage: "extractor: invalid model replies (after the repair attempt) before a span is dead-lettered"},
		{Flag: "extract-invalid-delay", Env: "ENGRAM_EXTRACT_INVALID_DELAY", Group: Runtime, value: (*durV)(&c.Extract.InvalidDelay),
			Usage: "extractor: first retry delay after an invalid reply (doubles each time)"},
		{Flag: "extract-temperature", Env: "ENGRAM_EXTRACT_TEMPERATURE", Group: Runtime, value: (*floatV)(&c.Extract.Temperature),
			Usage: "extractor: sampling temperature of the extraction call"},
		{Flag: "extract-embed-batch", Env: "ENGRAM_EXTRACT_EMBED_BATCH", Group: Runtime, value: (*intV)(&c.Extract.EmbedBatch),
			Usage: "extractor: texts per embedding call"},
		{Flag: "mcp-addr", Env: "ENGRAM_MCP_ADDR", Group: Runtime, value: (*strV)(&c.MCP.Addr),
			Usage: "serve: address of the `memory` MCP tool's streamable HTTP endpoint, path /mcp (empty: off; needs ENGRAM_MCP_TOKENS)"},
		{Flag: "mcp-tokens", Env: "ENGRAM_MCP_TOKENS", Group: Runtime, value: (*strV)(&c.MCP.Tokens),
			Usage: "serve: bearer tokens file of the MCP endpoint, one \"token principal projects [tenant]\" a line (projects comma-separated or *; tenant optional; mode 600)"},
		{Flag: "mcp-sessions-per-token", Env: "ENGRAM_MCP_SESSIONS_PER_TOKEN", Group: Runtime, value: (*intV)(&c.MCP.SessionsPerToken),
			Usage: "serve: MCP sessions one token may hold open at once; a new one over it is refused (429) until one ends or idles out"},
		{Flag: "mcp-session-idle", Env: "ENGRAM_MCP_SESSION_IDLE", Group: Runtime, value: (*durV)(&c.MCP.SessionIdle),
			Usage: "serve: an MCP session idle this long is closed (engram mcp -remote pings every 5m)"},
		{Flag: "console-addr", Env: "ENGRAM_CONSOLE_ADDR", Group: Runtime, value: (*strV)(&c.Console.Addr),
			Usage: "address of the memory console (off: none); serve takes a free port when the default one is taken; worker binaries serve it only when this is set"},
		{Flag: "console-tokens", Env: "ENGRAM_CONSOLE_TOKENS", Group: Runtime, value: (*strV)(&c.Console.Tokens),
			Usage: "tokens file people log in to the console with, as ENGRAM_MCP_TOKENS (empty: ENGRAM_MCP_TOKENS; neither: only the operator)"},
		{Flag: "console-admin-token", Env: "ENGRAM_CONSOLE_ADMIN_TOKEN_FILE", Group: Runtime, value: (*strV)(&c.Console.AdminTokenFile),
			Usage: "file of the operator's console token (empty: <data>/console-admin.token, generated on first start)"},
		{Flag: "console-tls-cert", Env: "ENGRAM_CONSOLE_TLS_CERT", Group: Runtime, value: (*strV)(&c.Console.TLSCert),
			Usage: "certificate (PEM) to serve the console over HTTPS, with ENGRAM_CONSOLE_TLS_KEY (required off loopback)"},
		{Flag: "console-tls-key", Env: "ENGRAM_CONSOLE_TLS_KEY", Group: Runtime, value: (*strV)(&c.Console.TLSKey),
			Usage: "key (PEM) of the console's certificate"},
		{Flag: "log-format", Env: "ENGRAM_LOG_FORMAT", Group: Conn, value: (*strV)(&c.Log.Format),
			Usage: "log format: auto (console on a terminal, else JSON), json or console"},
		{Flag: "log-level", Env: "ENGRAM_LOG_LEVEL", Group: Conn, value: (*strV)(&c.Log.Level),
			Usage: "log level: debug, info, warn or error"},
	}
	s = append(s, c.compactSettings()...)
	s = append(s, c.consolidateSettings()...)
	s = append(s, c.securitySettings()...)
	for i := range s {
		s[i].Default = s[i].value.String()
	}
	return s
}

// Load applies the environment (lookup, usually os.LookupEnv) and then
// the flags in args to c for the settings of groups, and validates the
// result. fs gets the flags registered; its remaining arguments are
// fs.Args(). Every problem (bad variables, bad flags, invalid values) is
// reported in one joined error.
func (c *Config) Load(fs *flag.FlagSet, args []string, lookup func(string) (string, bool), groups Group) error {
	var errs []error
	set := map[string]bool{} // settings given by a variable or a flag, by variable name
	envOf := map[string]string{}
	for _, s := range c.Settings() {
		if s.Group&groups == 0 {
			continue
		}
		if v, ok := lookup(s.Env); ok {
			set[s.Env] = true
			if err := s.value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", s.Env, credurl.Redact(v), err))
			}
		}
		envOf[s.Flag] = s.Env
		fs.Var(s.value, s.Flag, s.Usage+" [$"+s.Env+"]")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		errs = append(errs, err)
	}
	fs.Visit(func(f *flag.Flag) { set[envOf[f.Name]] = true })
	// The chat model is every role's model unless the role's own setting is
	// given (in any order, by variable or flag).
	if c.ChatModel != "" {
		for env, name := range map[string]*string{"ENGRAM_EXTRACT_MODEL": &c.LLM.Extract.Name,
			"ENGRAM_CONSOLIDATE_MODEL": &c.LLM.Consolidate.Name, "ENGRAM_SUMMARIZE_MODEL": &c.LLM.Summarize.Name} {
			if !set[env] {
				*name = c.ChatModel
			}
		}
	}
	// The deployment's cross-project switch overrides its parts.
	if !c.CrossProject {
		if set["ENGRAM_INJECT_CROSS_PROJECT"] && c.Inject.CrossProject {
			errs = append(errs, errors.New("ENGRAM_INJECT_CROSS_PROJECT=true contradicts ENGRAM_CROSS_PROJECT=false"))
		}
		c.Inject.CrossProject = false
		c.Extract.CrossProject = false
	}
	if len(errs) > 0 {
		// Validate too, so the operator sees everything at once. A flag
		// parse error repeats the value given (a URL with its password).
		return credurl.Error(errors.Join(append(errs, c.Validate())...))
	}
	return c.Validate()
}

type strV string

func (v *strV) String() string     { return string(*v) }
func (v *strV) Set(s string) error { *v = strV(strings.TrimSpace(s)); return nil }

// secretV is a string setting that is never printed (flag defaults,
// errors).
type secretV string

func (v *secretV) String() string {
	if v == nil || *v == "" {
		return ""
	}
	return "xxxxx"
}
func (v *secretV) Set(s string) error { *v = secretV(strings.TrimSpace(s)); return nil }

// natsURLV is the NATS URL list, printed (flag help) with passwords
// redacted.
type natsURLV string

func (v *natsURLV) String() string {
	if v == nil {
		return ""
	}
	return credurl.Redact(string(*v))
}
func (v *natsURLV) Set(s string) error { *v = natsURLV(strings.TrimSpace(s)); return nil }

type intV int

func (v *intV) String() string { return strconv.Itoa(int(*v)) }
func (v *intV) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return errors.New("not an integer")
	}
	*v = intV(n)
	return nil
}

type floatV float64

func (v *floatV) String() string { return strconv.FormatFloat(float64(*v), 'g', -1, 64) }
func (v *floatV) Set(s string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return errors.New("not a number")
	}
	*v = floatV(f)
	return nil
}

// autoFloatV is a number or "auto" (stored as -1: decided later).
type autoFloatV float64

func (v *autoFloatV) String() string {
	if *v < 0 {
		return "auto"
	}
	return strconv.FormatFloat(float64(*v), 'g', -1, 64)
}
func (v *autoFloatV) Set(s string) error {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "auto") || s == "" {
		*v = -1
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return errors.New(`not a number >= 0 or "auto"`)
	}
	*v = autoFloatV(f)
	return nil
}

type int64V int64

func (v *int64V) String() string { return strconv.FormatInt(int64(*v), 10) }
func (v *int64V) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return errors.New("not an integer")
	}
	*v = int64V(n)
	return nil
}

type boolV bool

func (v *boolV) String() string   { return strconv.FormatBool(bool(*v)) }
func (v *boolV) IsBoolFlag() bool { return true }
func (v *boolV) Set(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "t", "true", "on", "yes":
		*v = true
	case "0", "f", "false", "off", "no":
		*v = false
	default:
		return errors.New("not a boolean (true/false, on/off)")
	}
	return nil
}

// durV is a time.Duration that also accepts a days suffix ("7d").
type durV time.Duration

func (v *durV) String() string { return formatDuration(time.Duration(*v)) }
func (v *durV) Set(s string) error {
	d, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*v = durV(d)
	return nil
}

// ParseDuration is time.ParseDuration plus whole days ("7d", "1d12h").
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 || n > 100000 {
			return 0, fmt.Errorf("not a duration (like 30s, 5m, 7d): %q", s)
		}
		days = time.Duration(n) * 24 * time.Hour
		s = s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("not a duration (like 30s, 5m, 7d): %q", s)
	}
	if days > 0 && (d < 0 || d > time.Duration(math.MaxInt64)-days) {
		return 0, fmt.Errorf("duration out of range: %q", s)
	}
	return days + d, nil
}

func formatDuration(d time.Duration) string {
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d >= time.Hour && d%time.Hour == 0:
		return strings.TrimSuffix(d.String(), "0m0s")
	case d >= time.Minute && d%time.Minute == 0:
		return strings.TrimSuffix(d.String(), "0s")
	}
	return d.String()
}

// bytesV is a byte count with optional K, M, G, T suffix (powers of 1024).
type bytesV int64

func (v *bytesV) String() string {
	n := int64(*v)
	for _, u := range []struct {
		s string
		m int64
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}

func (v *bytesV) Set(s string) error {
	s = strings.ToUpper(strings.TrimSpace(s))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I")
	mult := int64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			s = s[:len(s)-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("not a byte size (like 512M, 1G)")
	}
	*v = bytesV(n * mult)
	return nil
}

// listV is a comma-separated list.
type listV []string

func (v *listV) String() string { return strings.Join(*v, ",") }
func (v *listV) Set(s string) error {
	*v = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*v = append(*v, p)
		}
	}
	return nil
}

// mapV is role=n,role=n.
type mapV map[string]int

func (v *mapV) String() string {
	keys := make([]string, 0, len(*v))
	for k := range *v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Itoa((*v)[k])
	}
	return strings.Join(parts, ",")
}

func (v *mapV) Set(s string) error {
	m := map[string]int{}
	var errs []error
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		k, n, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			errs = append(errs, fmt.Errorf("%q: want role=n", p))
			continue
		}
		i, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil {
			errs = append(errs, fmt.Errorf("%q: %q is not an integer", p, n))
			continue
		}
		m[k] = i
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	*v = m
	return nil
}
