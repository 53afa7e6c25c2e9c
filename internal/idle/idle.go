package idle

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/pkg/events"
)

// DefaultBucket is the key-value bucket of the activity state.
const DefaultBucket = "ENGRAM_ACTIVITY"

// ConsumerName is the durable consumer the detector reads ENGRAM_IN with.
const ConsumerName = "idle"

// ErrInvalidSession is returned by Observe for an empty project or session.
var ErrInvalidSession = errors.New("idle: project and session are required")

// Clock tells the time. The detector reads it for "now" in sweeps; tests
// pass a controllable one.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Publisher publishes an event; *events.Client is one.
type Publisher interface {
	Publish(ctx context.Context, e events.Envelope) error
}

var _ Publisher = (*events.Client)(nil)

// Options configure a Detector.
type Options struct {
	// Quiet is how long a session must be quiet (required, > 0).
	Quiet time.Duration
	// Sweep is how often Run checks sessions (default Quiet/30 within [1s, 1m]).
	Sweep time.Duration
	// Bucket is the key-value bucket (default ENGRAM_ACTIVITY).
	Bucket string
	// Replicas of the bucket (default 1).
	Replicas int
	// Storage of the bucket (default file).
	Storage jetstream.StorageType
	// TTL drops a session's state after that long without a write (default
	// the larger of 7 days and 4*Quiet).
	TTL time.Duration
	// ClaimTTL is how long a replica's claim on a session holds before
	// another replica may take over (default 1m).
	ClaimTTL time.Duration
	// Owner names this replica in claims (default random).
	Owner string
	// Clock (default the system clock).
	Clock Clock
	// OnError receives the errors of Run's background work (may be nil).
	OnError func(error)
	// OnPublished is called after this replica published a session_idle
	// (may be nil; metrics).
	OnPublished func(project, session string, lastActivity time.Time)
}

// Detector tracks session activity and publishes session_idle.
type Detector struct {
	o   Options
	kv  jetstream.KeyValue
	pub Publisher
}

// New opens (creating if needed) the activity bucket and returns a
// detector that publishes with pub.
func New(ctx context.Context, js jetstream.JetStream, pub Publisher, o Options) (*Detector, error) {
	if o.Quiet <= 0 {
		return nil, fmt.Errorf("idle: quiet period %v must be positive", o.Quiet)
	}
	if pub == nil {
		return nil, errors.New("idle: nil publisher")
	}
	if o.Sweep <= 0 {
		o.Sweep = min(max(o.Quiet/30, time.Second), time.Minute)
	}
	if o.Bucket == "" {
		o.Bucket = DefaultBucket
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.TTL <= 0 {
		o.TTL = max(7*24*time.Hour, 4*o.Quiet)
	}
	if o.ClaimTTL <= 0 {
		o.ClaimTTL = time.Minute
	}
	if o.Owner == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		o.Owner = hex.EncodeToString(b[:])
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      o.Bucket,
		Description: "Engram idle detector: last activity per session",
		History:     1,
		TTL:         o.TTL,
		Storage:     o.Storage,
		Replicas:    o.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("idle: activity bucket %s: %w", o.Bucket, err)
	}
	return &Detector{o: o, kv: retriedKV{kv}, pub: pub}, nil
}

// retriedKV is the activity bucket with each read and write bounded and
// sent again when unanswered (events.Retried): a request or its reply lost
// to a NATS node's death is otherwise waited for until the caller's
// context ends, a handler's 15 minutes. A write repeated after its first
// attempt was applied meets a revision mismatch or an existing key, which
// the callers already take as "read again and merge".
type retriedKV struct{ jetstream.KeyValue }

func (k retriedKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	return events.Retried(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return k.KeyValue.Get(ctx, key) })
}

func (k retriedKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	return events.Retried(ctx, func(ctx context.Context) (uint64, error) { return k.KeyValue.Create(ctx, key, value, opts...) })
}

func (k retriedKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	return events.Retried(ctx, func(ctx context.Context) (uint64, error) { return k.KeyValue.Update(ctx, key, value, revision) })
}

// ConsumerConfig is the detector's durable consumer on ENGRAM_IN: the input
// types that mean activity (not session_idle itself). Add it to a
// topology's Consumers before events.EnsureTopology (config.Topology does
// when the detector is on).
func ConsumerConfig() events.ConsumerConfig {
	return events.ConsumerConfig{
		Name:          ConsumerName,
		Types:         []events.Type{events.TypeTurnStarted, events.TypeTurnEnded, events.TypeTokensReported},
		AckWait:       30 * time.Second,
		MaxDeliver:    -1, // a store outage must not lose activity; nothing here is poison
		MaxAckPending: 512,
	}
}

// state is the value of one session's key.
type state struct {
	Tenant  string    `json:"tenant,omitempty"` // "": the default tenant
	Project string    `json:"project"`
	Session string    `json:"session"`
	Last    time.Time `json:"last"`
	IdleFor time.Time `json:"idle_for,omitzero"`
	Claim   *claim    `json:"claim,omitempty"`
}

type claim struct {
	For   time.Time `json:"for"`
	Owner string    `json:"owner"`
	At    time.Time `json:"at"`
}

// Key is the bucket key of a session: base64url of the project and the
// session, dot-separated (valid key characters, reversible), after the
// base64url of the tenant for any tenant but the default one (whose keys
// are as they were before tenants): the same project and session ids of
// two tenants are two sessions.
func Key(tenant, project, session string) string {
	k := base64.RawURLEncoding.EncodeToString([]byte(project)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(session))
	if tenant != "" {
		k = "t." + base64.RawURLEncoding.EncodeToString([]byte(tenant)) + "." + k
	}
	return k
}

// Observe records activity of a session at time at. Older activity than
// what is recorded is ignored. Safe for concurrent use by many replicas.
func (d *Detector) Observe(ctx context.Context, tenant, project, session string, at time.Time) error {
	if project == "" || session == "" {
		return ErrInvalidSession
	}
	key := Key(tenant, project, session)
	at = at.UTC()
	for {
		e, err := d.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			data, _ := json.Marshal(state{Tenant: tenant, Project: project, Session: session, Last: at})
			_, err = d.kv.Create(ctx, key, data)
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue // another replica created it: read and merge
			}
			if err != nil {
				return fmt.Errorf("idle: observe %s: %w", key, err)
			}
			return nil
		case err != nil:
			return fmt.Errorf("idle: observe %s: %w", key, err)
		}
		var st state
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			st = state{} // unreadable state: start over for this session
		}
		if !at.After(st.Last) && st.Project != "" {
			return nil
		}
		st.Tenant, st.Project, st.Session, st.Last = tenant, project, session, at
		data, _ := json.Marshal(st)
		_, err = d.kv.Update(ctx, key, data, e.Revision())
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("idle: observe %s: %w", key, err)
		}
		return nil
	}
}

// Sweep publishes session_idle for every session quiet for the quiet period
// with activity since its last idle event, and returns how many this
// replica published. Errors of single sessions are joined; the sweep goes
// on with the others.
func (d *Detector) Sweep(ctx context.Context) (int, error) {
	w, err := d.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return 0, nil
		}
		return 0, fmt.Errorf("idle: sweep: %w", err)
	}
	var entries []jetstream.KeyValueEntry
	func() {
		defer func() { _ = w.Stop() }()
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok || e == nil {
					return
				}
				entries = append(entries, e)
			case <-ctx.Done():
				return
			}
		}
	}()
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	var errs []error
	n := 0
	for _, e := range entries {
		ok, err := d.sweepOne(ctx, e)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			n++
		}
	}
	return n, errors.Join(errs...)
}

func (d *Detector) sweepOne(ctx context.Context, e jetstream.KeyValueEntry) (bool, error) {
	var st state
	if err := json.Unmarshal(e.Value(), &st); err != nil || st.Project == "" || st.Session == "" {
		return false, nil // not ours to fix; the next Observe rewrites it
	}
	now := d.o.Clock.Now()
	if !st.Last.After(st.IdleFor) || now.Sub(st.Last) < d.o.Quiet {
		return false, nil
	}
	if c := st.Claim; c != nil && c.For.Equal(st.Last) && now.Sub(c.At) < d.o.ClaimTTL {
		// Another replica, or another sweep of this one, is on it: a
		// claim holds for its owner too, or two sweeps of one replica
		// would both claim (each seeing its own owner) before the first
		// records idle_for. A claim whose publish failed is retried once
		// it expires.
		return false, nil
	}
	activity := st.Last
	st.Claim = &claim{For: activity, Owner: d.o.Owner, At: now.UTC()}
	data, _ := json.Marshal(st)
	_, err := d.kv.Update(ctx, e.Key(), data, e.Revision())
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return false, nil // new activity or another replica's claim: not this sweep
	}
	if err != nil {
		return false, fmt.Errorf("idle: claim %s: %w", e.Key(), err)
	}

	ev := events.NewSessionIdle(events.Ref{TenantID: st.Tenant, ProjectID: st.Project, SessionID: st.Session},
		events.SessionIdle{LastActivity: activity})
	ev.ID = EventID(st.Tenant, st.Project, st.Session, activity)
	ev.OccurredAt = now.UTC()
	if err := d.pub.Publish(ctx, ev); err != nil {
		// The claim expires after ClaimTTL and the session is tried again;
		// the event id keeps a retried publish from being stored twice.
		return false, fmt.Errorf("idle: publish session_idle for %s: %w", e.Key(), err)
	}
	if d.o.OnPublished != nil {
		d.o.OnPublished(st.Project, st.Session, activity)
	}
	return true, d.markPublished(ctx, e.Key(), activity)
}

// markPublished records that an idle event was published for activity,
// merging with whatever changed since the claim (new activity stays).
func (d *Detector) markPublished(ctx context.Context, key string, activity time.Time) error {
	for attempt := 0; ; attempt++ {
		e, err := d.kv.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("idle: mark %s: %w", key, err)
		}
		var st state
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			return fmt.Errorf("idle: mark %s: %w", key, err)
		}
		if activity.After(st.IdleFor) {
			st.IdleFor = activity
		}
		if st.Claim != nil && !st.Claim.For.After(activity) {
			st.Claim = nil
		}
		data, _ := json.Marshal(st)
		_, err = d.kv.Update(ctx, key, data, e.Revision())
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) || ctx.Err() != nil || attempt >= 20 {
			return fmt.Errorf("idle: mark %s: %w", key, err)
		}
	}
}

// EventID is the id of the session_idle event for a session's activity at
// a time: the same inputs always give the same id, so replicas and retries
// publish one event (Nats-Msg-Id de-duplication). The default tenant's
// ids are those from before tenants.
func EventID(tenant, project, session string, activity time.Time) string {
	h := sha256.New()
	parts := []string{project, session, activity.UTC().Format(time.RFC3339Nano)}
	if tenant != "" {
		parts = append(parts, tenant)
	}
	for _, s := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:]) // length-prefixed: no two inputs share an encoding
		h.Write([]byte(s))
	}
	return "idle-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// Handle records the activity of one ENGRAM_IN message: the project and
// session of its body. A message that is not a valid input event, whose
// subject does not match its body (events.Subjects.Check) or that is a
// session_idle is ignored (nil): the workers' runners dead-letter the
// invalid ones, and activity is never credited to a session the body does
// not name.
func (d *Detector) Handle(ctx context.Context, subjects events.Subjects, msg jetstream.Msg) error {
	ev, err := events.Decode(msg.Data())
	if err != nil || !ev.Type.IsInput() || ev.Type == events.TypeSessionIdle || ev.ProjectID == "" || ev.SessionID == "" {
		return nil
	}
	if subjects.Check(msg.Subject(), ev) != nil {
		return nil
	}
	at := d.o.Clock.Now()
	if md, err := msg.Metadata(); err == nil && !md.Timestamp.IsZero() {
		at = md.Timestamp
	}
	return d.Observe(ctx, ev.TenantID, ev.ProjectID, ev.SessionID, at)
}

// Run consumes activity from cons and sweeps every Options.Sweep until ctx
// is done; then it stops consuming, waits for its goroutines and returns
// nil. Background errors go to Options.OnError.
func (d *Detector) Run(ctx context.Context, cons jetstream.Consumer, subjects events.Subjects) error {
	report := func(err error) {
		if err != nil && d.o.OnError != nil && ctx.Err() == nil {
			d.o.OnError(err)
		}
	}
	var wg sync.WaitGroup
	var cc jetstream.ConsumeContext
	if cons != nil {
		var err error
		cc, err = cons.Consume(func(msg jetstream.Msg) {
			if err := d.Handle(ctx, subjects, msg); err != nil {
				report(err)
				_ = msg.NakWithDelay(time.Second)
				return
			}
			_ = msg.Ack()
		}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { report(err) }))
		if err != nil {
			return fmt.Errorf("idle: consume: %w", err)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(d.o.Sweep)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_, err := d.Sweep(ctx)
				report(err)
			}
		}
	}()
	<-ctx.Done()
	if cc != nil {
		cc.Stop()
		<-cc.Closed()
	}
	wg.Wait()
	return nil
}
