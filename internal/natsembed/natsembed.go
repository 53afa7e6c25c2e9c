package natsembed

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ErrNotReady is returned by Start when the server did not accept
// connections within Options.ReadyTimeout.
var ErrNotReady = errors.New("natsembed: server not ready")

// Logger receives the server's log lines. It is the nats-server logger
// interface; see the app package for a zap adapter.
type Logger = server.Logger

// Options configure the embedded server.
type Options struct {
	// StoreDir is the JetStream file store folder; created if missing.
	StoreDir string
	// Listen is host:port for clients. Port -1 picks a random free port;
	// empty means 127.0.0.1:4222.
	Listen string
	// ServerName names the server (default "engram").
	ServerName string
	// ReadyTimeout bounds the wait for the server to accept connections
	// (default 10s).
	ReadyTimeout time.Duration
	// MaxStore caps the JetStream file store in bytes (0: server default).
	MaxStore int64
	// Users, when not empty, are the only clients the server accepts
	// (user/password, each with its permissions); empty: no
	// authentication (tests, -insecure).
	Users []*server.User
	// ConfigFile, when set, is a nats-server configuration file read
	// first (e.g. deploy/nats/accounts.conf, whose accounts and users then
	// apply); the other options override what it says of them.
	ConfigFile string
	// StoreKey, when set, encrypts the JetStream file store (ChaCha20-
	// Poly1305). An existing plaintext store is converted when the server
	// starts with a key; a store encrypted with another key cannot be read.
	StoreKey string
	// SyncInterval is how often the JetStream files are synced to disk
	// (0: the server's default, two minutes); SyncAlways syncs after every
	// write. A message acknowledged to its publisher is in the operating
	// system's cache until then: it survives the process, not a power
	// loss.
	SyncInterval time.Duration
	SyncAlways   bool
	// Logger, if set, receives the server's messages; Debug and Trace turn
	// on its verbose levels.
	Logger       Logger
	Debug, Trace bool
}

// Server is a running embedded NATS server.
type Server struct {
	ns       *server.Server
	opts     *server.Options // as started, for ReloadUsers
	storeDir string
}

// Start starts the server and waits until it accepts connections.
func Start(o Options) (*Server, error) {
	if o.StoreDir == "" {
		return nil, errors.New("natsembed: store dir is required")
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:4222"
	}
	if o.ServerName == "" {
		o.ServerName = "engram"
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 10 * time.Second
	}
	host, portStr, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("natsembed: listen address %q: %w", o.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < -1 || port > 65535 {
		return nil, fmt.Errorf("natsembed: listen address %q: bad port", o.Listen)
	}
	if port == 0 {
		port = -1 // nats-server treats 0 as "default port"; we mean random.
	}
	if port > 0 {
		// Fail at once with the OS's reason (address in use, permission)
		// rather than after ReadyTimeout.
		ln, err := net.Listen("tcp", net.JoinHostPort(host, portStr))
		if err != nil {
			return nil, fmt.Errorf("%w: listen %s: %w", ErrNotReady, o.Listen, err)
		}
		_ = ln.Close()
	}
	if err := os.MkdirAll(o.StoreDir, 0o700); err != nil {
		return nil, fmt.Errorf("natsembed: store dir: %w", err)
	}
	if err := os.Chmod(o.StoreDir, 0o700); err != nil {
		return nil, fmt.Errorf("natsembed: store dir: %w", err)
	}
	opts := &server.Options{}
	if o.ConfigFile != "" {
		fo, err := server.ProcessConfigFile(o.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("natsembed: config file: %w", err)
		}
		opts = fo
	}
	opts.ServerName = o.ServerName
	opts.Host, opts.Port = host, port
	opts.JetStream, opts.StoreDir, opts.JetStreamMaxStore = true, o.StoreDir, o.MaxStore
	opts.NoSigs, opts.NoLog, opts.Debug, opts.Trace = true, o.Logger == nil, o.Debug, o.Trace
	opts.DisableShortFirstPing = true
	if o.SyncInterval > 0 {
		opts.SyncInterval = o.SyncInterval
	}
	opts.SyncAlways = o.SyncAlways
	if len(o.Users) > 0 {
		opts.Users = o.Users
	}
	if o.StoreKey != "" {
		opts.JetStreamKey = o.StoreKey
		opts.JetStreamCipher = server.ChaCha
	}
	base := opts.Clone()
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsembed: new server: %w", err)
	}
	if o.Logger != nil {
		ns.SetLogger(o.Logger, o.Debug, o.Trace)
	}
	ns.Start()
	if !ns.ReadyForConnections(o.ReadyTimeout) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("%w within %s on %s", ErrNotReady, o.ReadyTimeout, o.Listen)
	}
	if !ns.JetStreamEnabled() {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("%w: JetStream did not start (store %s)", ErrNotReady, o.StoreDir)
	}
	return &Server{ns: ns, opts: base, storeDir: o.StoreDir}, nil
}

// ReloadUsers replaces the users the server accepts (Options.Users) while
// it runs: a client whose user is gone or whose password changed is
// disconnected, the others stay connected.
func (s *Server) ReloadUsers(users []*server.User) error {
	o := s.opts.Clone()
	o.Users = users
	if err := s.ns.ReloadOptions(o); err != nil {
		return fmt.Errorf("natsembed: reload users: %w", err)
	}
	return nil
}

// ClientURL is the nats:// URL clients connect to (the real port when the
// server was started on a random one).
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ns.Addr() }

// Ready reports whether the server accepts connections and runs JetStream.
// It is cheap; health checks call it.
func (s *Server) Ready() error {
	if !s.ns.Running() {
		return errors.New("natsembed: server not running")
	}
	if !s.ns.JetStreamEnabled() {
		return errors.New("natsembed: JetStream disabled")
	}
	return nil
}

// NATS returns the underlying server for in-process connections
// (nats.InProcessServer) and introspection.
func (s *Server) NATS() *server.Server { return s.ns }

// Shutdown stops the server and waits until it has stopped; JetStream
// state is flushed to the store dir. Calling it twice is harmless.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}
