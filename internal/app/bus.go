package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/credurl"
	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/internal/natsembed"
	"github.com/engram-memory/engram/pkg/events"
)

// Bus is the process's NATS connection, and the embedded server when the
// process runs one.
type Bus struct {
	Conn     *nats.Conn
	JS       jetstream.JetStream
	Embedded *natsembed.Server // nil when connected to external servers
	// Guard watches the embedded server's JetStream store and restarts
	// JetStream once a store that failed (a full disk) has room again (nil
	// with external servers).
	Guard *natsembed.Guard
	URL   string // what clients connect to, without credentials
	// Role is the role this process connects as (natsauth.Roles).
	Role string
	// Granted is what the server lets this connection do (read at start).
	Granted natsauth.Granted
	// Credentials is the file of the embedded server's role passwords
	// (empty: external server, or authentication off).
	Credentials string
	// Insecure: the embedded server runs without authentication.
	Insecure bool

	stopTenants func() // ends the tenants file watch (embedded server)
	// lanes updates the injector's lanes to a tenants file that changed
	// (set once the connection is up).
	lanes atomic.Pointer[func(natsauth.Tenants)]
}

// ProcessRole is the NATS role of a process: admin for `engram serve` with
// its embedded server (it owns it) or running several roles; else the one
// worker role it runs (a worker binary, or serve -workers none running only
// the idle detector against an external NATS).
func ProcessRole(cfg config.Config, embed bool) string {
	if embed && cfg.Embedded() {
		return natsauth.RoleAdmin
	}
	roles := RunningRoles(cfg)
	if len(roles) == 1 {
		return roles[0]
	}
	return natsauth.RoleAdmin
}

// RunningRoles are the worker roles (and idle) cfg runs.
func RunningRoles(cfg config.Config) []string {
	var roles []string
	for _, r := range []string{events.ConsumerInjector, events.ConsumerExtractor, events.ConsumerConsolidator, events.ConsumerCompactor} {
		if cfg.Runs(r) {
			roles = append(roles, r)
		}
	}
	if cfg.Idle.Enabled {
		roles = append(roles, natsauth.RoleIdle)
	}
	return roles
}

// ClientAuth is how a client of cfg's NATS authenticates as role: the
// ENGRAM_NATS_* settings (or credentials in the URL) when given; else, for a
// local server and unless ENGRAM_INSECURE, role's password from the data
// dir's credentials (written by `engram serve`). from says which, for
// messages; it never holds a secret.
func ClientAuth(cfg config.Config, role string) (c natsauth.Client, from string, err error) {
	c = cfg.NATS.Client()
	url := cfg.ClientNATSURL()
	switch {
	case c.HasAuth():
		return c, c.Method(), nil
	case natsauth.URLHasAuth(url):
		return c, "the URL", nil
	case cfg.NATS.Insecure:
		return c, "none (insecure)", nil
	case !natsauth.IsLocal(url):
		return c, "none", nil
	}
	creds, err := natsauth.LoadCredentials(cfg.DataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return c, "none (no " + natsauth.CredentialsPath(cfg.DataDir) + ")", nil
	}
	if err != nil {
		return c, "", err
	}
	c.User, c.Password = role, creds.Users[role]
	return c, "user " + role + " of " + natsauth.CredentialsPath(cfg.DataDir), nil
}

// ConnectOptions are the nats.go options of a client of cfg connecting as
// role (authentication and TLS, see ClientAuth).
func ConnectOptions(cfg config.Config, role string) ([]nats.Option, string, error) {
	c, from, err := ClientAuth(cfg, role)
	if err != nil {
		return nil, from, err
	}
	o, err := c.Options()
	return o, from, err
}

// OpenBus connects to cfg.NATS.URL, or, when embed is set and the URL is
// empty, starts an embedded server with its store in the data dir and
// connects to it. name identifies the connection on the server.
//
// The embedded server requires the role users of natsauth (passwords
// generated into the data dir on first start) unless ENGRAM_INSECURE, and
// encrypts its store with the data dir's key. The connection then reads
// its own permissions and fails when it lacks one its roles need.
func OpenBus(ctx context.Context, cfg config.Config, embed bool, name string, log *zap.Logger) (*Bus, error) {
	b := &Bus{Role: ProcessRole(cfg, embed)}
	inbox := natsauth.InboxPrefix(b.Role)
	if b.Role == natsauth.RoleAdmin {
		inbox = natsauth.InboxPrefix("serve")
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.Timeout(cfg.NATS.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.CustomInboxPrefix(inbox),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS disconnected", zap.Error(err))
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS reconnected", zap.String("url", credurl.Redact(nc.ConnectedUrl())))
		}),
		// Permission violations and other server errors arrive here,
		// asynchronously: log them, never drop them.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			fields := []zap.Field{zap.Error(err)}
			if sub != nil {
				fields = append(fields, zap.String("subject", sub.Subject))
			}
			log.Error("NATS error", fields...)
		}),
	}
	var url, from string
	var roleUsers []*server.User
	if embed && cfg.Embedded() {
		eo := natsembed.Options{
			StoreDir: cfg.NATSStoreDir(),
			Listen:   cfg.NATS.Listen,
			Logger:   newNATSLogger(log),
		}
		eo.SyncAlways, eo.SyncInterval = cfg.NATS.SyncPolicy()
		if err := natsauth.EnsurePrivateDir(cfg.DataDir); err != nil {
			return nil, err
		}
		k, err := storeKey(cfg)
		if err != nil {
			return nil, err
		}
		key := k.Key
		switch {
		case k.Created:
			log.Info("generated the NATS store encryption key, outside the data dir: back it up apart from the data", zap.String("file", k.Path))
		case k.Moved:
			log.Warn("moved the NATS store encryption key out of the data dir (it sat beside the store it encrypts): back it up apart from the data",
				zap.String("from", k.MovedFrom), zap.String("to", k.Path))
		}
		if err := natsauth.CheckStoreKey(cfg.NATSStoreDir(), key); err != nil {
			return nil, err
		}
		eo.StoreKey = key
		if cfg.NATS.Insecure {
			log.Warn("NATS authentication is OFF (ENGRAM_INSECURE): anyone who reaches " + cfg.NATS.Listen + " reads and deletes every stream; for throwaway use only")
			from = "none (insecure)"
			b.Insecure = true
		} else {
			creds, created, err := natsauth.EnsureCredentials(cfg.DataDir)
			if err != nil {
				return nil, err
			}
			if created {
				log.Debug("generated NATS credentials", zap.String("file", natsauth.CredentialsPath(cfg.DataDir)))
			}
			tenants, err := natsauth.LoadTenants(cfg.DataDir)
			if err != nil {
				return nil, err
			}
			if roleUsers, err = natsauth.ServerUsers(cfg.Events.SubjectPrefix, creds.Users, natsauth.Tenants{}); err != nil {
				return nil, err
			}
			tenantUsers, err := natsauth.ServerUsers(cfg.Events.SubjectPrefix, nil, tenants)
			if err != nil {
				return nil, err
			}
			eo.Users = append(slices.Clone(roleUsers), tenantUsers...)
			if n := len(tenants.Hashes); n > 0 {
				log.Info("tenant platform credentials loaded", zap.Int("tenants", n), zap.String("file", natsauth.TenantsPath(cfg.DataDir)))
			}
			b.Credentials = natsauth.CredentialsPath(cfg.DataDir)
			opts = append(opts, nats.UserInfo(natsauth.RoleAdmin, creds.Users[natsauth.RoleAdmin]))
			from = "user admin (in-process)"
		}
		srv, err := natsembed.Start(eo)
		if err != nil {
			return nil, err
		}
		b.Embedded = srv
		b.Guard = srv.Guard(guardOptions(log.Named("nats-store"), b))
		if roleUsers != nil {
			b.stopTenants = watchTenants(cfg, srv, roleUsers, log, func(t natsauth.Tenants) {
				if f := b.lanes.Load(); f != nil {
					(*f)(t)
				}
			})
		}
		url = srv.ClientURL()
		opts = append(opts, nats.InProcessServer(srv.NATS()))
	} else {
		url = cfg.ClientNATSURL()
		auth, f, err := ConnectOptions(cfg, b.Role)
		if err != nil {
			return nil, fmt.Errorf("app: NATS credentials: %w", err)
		}
		from = f
		opts = append(opts, auth...)
	}
	b.URL = credurl.Redact(url)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		b.Close() // the embedded server, its guard and the tenants watch
		return nil, fmt.Errorf("app: connect to NATS at %s as %s (credentials: %s): %w", credurl.Redact(b.URL), b.Role, from, credurl.Error(err))
	}
	b.Conn = nc
	js, err := jetstream.New(nc)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("app: jetstream: %w", err)
	}
	b.JS = js
	// A change of the tenants file changes the injector's lanes too.
	ensure := func(t natsauth.Tenants) {
		if !b.MaySetup() {
			return
		}
		topo := cfg.Topology()
		topo.Lanes = t.Names()
		ctx, cancel := context.WithTimeout(context.Background(), cfg.NATS.ConnectTimeout+10*time.Second)
		defer cancel()
		if err := events.EnsureLanes(ctx, js, topo); err != nil {
			log.Error("injector lanes not updated to the tenants file", zap.Error(err))
		}
	}
	b.lanes.Store(&ensure)
	vctx, cancel := context.WithTimeout(ctx, cfg.NATS.ConnectTimeout)
	defer cancel()
	need := natsauth.Need{Roles: RunningRoles(cfg), Inbox: inbox, Prefix: cfg.Events.SubjectPrefix}
	b.Granted, err = natsauth.Verify(vctx, nc, need)
	switch {
	case errors.Is(err, natsauth.ErrCannotVerify):
		// An old server, or one whose operator denies the request: the
		// ErrorHandler above still reports every violation.
		log.Warn("cannot verify the NATS permissions at start", zap.Error(err))
		b.Granted = natsauth.Granted{}
	case err != nil:
		b.Close()
		return nil, fmt.Errorf("app: NATS at %s (credentials: %s): %w", b.URL, from, err)
	}
	return b, nil
}

// storeKey is the embedded store's key: the configured file, or the one
// in the key dir outside the data dir (generated on first start, moved
// there from the data dir of an older version).
func storeKey(cfg config.Config) (natsauth.StoreKey, error) {
	if cfg.NATS.StoreKeyFile != "" {
		k, err := natsauth.ReadKeyFile(cfg.NATS.StoreKeyFile)
		return natsauth.StoreKey{Key: k, Path: cfg.NATS.StoreKeyFile}, err
	}
	return natsauth.EnsureStoreKey(cfg.DataDir, cfg.NATSStoreDir(), cfg.NATS.StoreKeyDir)
}

// MaySetup reports whether the connection may create and update the
// streams (admin, setup); other roles only check that they exist.
func (b *Bus) MaySetup() bool {
	for _, s := range []string{events.StreamIn, events.StreamOut, events.StreamDLQ} {
		if !b.Granted.MayPublish("$JS.API.STREAM.UPDATE."+s) || !b.Granted.MayPublish("$JS.API.STREAM.CREATE."+s) {
			return false
		}
	}
	return true
}

// guardOptions log what the embedded store's guard sees. After a JetStream
// restart the connection reconnects: the consumers were loaded from their
// files, whose delivery counts may be behind, and a reconnect tells the
// runners not to trust a first delivery of what was stored before it.
func guardOptions(log *zap.Logger, b *Bus) natsembed.GuardOptions {
	return natsembed.GuardOptions{
		OnFailure: func(err error) {
			log.Error("the NATS store refuses writes (disk full?): events are refused until JetStream restarts; it restarts by itself once there is room",
				zap.Error(err))
		},
		OnRecovered: func(after time.Duration) {
			log.Info("the NATS store takes writes again (JetStream restarted)", zap.Duration("after", after))
			if b.Conn != nil {
				if err := b.Conn.ForceReconnect(); err != nil {
					log.Warn("reconnect after the JetStream restart failed", zap.Error(err))
				}
			}
		},
		OnRestartFailed: func(err error) {
			log.Warn("JetStream restarted but the store still fails; retrying", zap.Error(err))
		},
	}
}

// Check is the bus's readiness check: connected (and the embedded server
// running, its JetStream store taking writes: after a full disk the
// streams refuse every event until JetStream restarts, which the guard does
// once there is room; meanwhile the check fails with the reason, the free
// space and what the guard waits for).
func (b *Bus) Check() health.Check {
	return health.Check{Name: "nats", Run: func(ctx context.Context) error {
		if b.Embedded != nil {
			if err := b.Embedded.Ready(); err != nil {
				return err
			}
			if p := b.Guard.Status().Problem(); p != "" {
				return errors.New(p)
			}
		}
		if !b.Conn.IsConnected() {
			return fmt.Errorf("not connected (%s)", b.Conn.Status())
		}
		if _, err := b.JS.AccountInfo(ctx); err != nil {
			return fmt.Errorf("JetStream: %w", err)
		}
		return nil
	}}
}

// Close drains the connection and stops the embedded server.
func (b *Bus) Close() {
	if b.Conn != nil {
		if err := b.Conn.Drain(); err == nil {
			deadline := time.Now().Add(5 * time.Second)
			for !b.Conn.IsClosed() && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
		}
		b.Conn.Close()
	}
	if b.stopTenants != nil {
		b.stopTenants()
	}
	if b.Embedded != nil {
		b.Guard.Stop()
		b.Embedded.Shutdown()
	}
}

// TenantsPoll is how often `engram serve` looks for a change of the data
// dir's tenants file (engram tenant add, rotate, remove).
var TenantsPoll = 2 * time.Second

// watchTenants reloads the embedded server's tenant users whenever the
// tenants file changes, until the returned function is called (it waits
// for the watch to end).
func watchTenants(cfg config.Config, srv *natsembed.Server, roleUsers []*server.User, log *zap.Logger, changed func(natsauth.Tenants)) func() {
	path := natsauth.TenantsPath(cfg.DataDir)
	stamp := func() string {
		st, err := os.Stat(path)
		if err != nil {
			return ""
		}
		return st.ModTime().String() + "/" + strconv.FormatInt(st.Size(), 10)
	}
	last := stamp()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(TenantsPoll)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			now := stamp()
			if now == last {
				continue
			}
			tenants, err := natsauth.LoadTenants(cfg.DataDir)
			if err == nil {
				var us []*server.User
				if us, err = natsauth.ServerUsers(cfg.Events.SubjectPrefix, nil, tenants); err == nil {
					err = srv.ReloadUsers(append(slices.Clone(roleUsers), us...))
				}
			}
			if err != nil {
				log.Error("tenant credentials not reloaded", zap.String("file", path), zap.Error(err))
				continue // retried at the next tick
			}
			last = now
			log.Info("tenant credentials reloaded", zap.Int("tenants", len(tenants.Hashes)), zap.String("file", path))
			changed(tenants)
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(stop); <-done }) }
}

// CheckTopology checks that the streams of cfg exist (a worker whose role
// may not create them).
func CheckTopology(ctx context.Context, js jetstream.JetStream, cfg config.Config) (events.Topology, error) {
	topo := cfg.Topology()
	if err := topo.Validate(); err != nil {
		return topo, err
	}
	var errs []error
	for _, sc := range topo.StreamConfigs() {
		if _, err := js.Stream(ctx, sc.Name); err != nil {
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				err = fmt.Errorf("stream %s is missing: run `engram setup` (as the setup or admin user) first", sc.Name)
			}
			errs = append(errs, fmt.Errorf("app: topology: %w", err))
		}
	}
	return topo, errors.Join(errs...)
}

// EnsureTopology creates or updates the streams and consumers of cfg.
func EnsureTopology(ctx context.Context, js jetstream.JetStream, cfg config.Config) (events.Topology, error) {
	topo, err := TopologyWithLanes(cfg)
	if err != nil {
		return topo, err
	}
	if err := events.EnsureTopology(ctx, js, topo); err != nil {
		return topo, err
	}
	return topo, nil
}

// TopologyWithLanes is cfg's topology with an injector lane for each named
// tenant of the data dir's tenants file (events.EnsureLanes); none when
// NATS authentication is off (no tenant credentials, so nothing to tell
// tenants apart on the bus) or there are no named tenants.
func TopologyWithLanes(cfg config.Config) (events.Topology, error) {
	topo := cfg.Topology()
	if cfg.NATS.Insecure {
		return topo, nil
	}
	tenants, err := natsauth.LoadTenants(cfg.DataDir)
	if err != nil {
		return topo, err
	}
	topo.Lanes = tenants.Names()
	return topo, nil
}

// errNoStore is returned by OpenStore for a store kind that is not built in.
var errNoStore = errors.New("app: store backend not available")
