package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream names of the default topology.
const (
	StreamIn  = "ENGRAM_IN"
	StreamOut = "ENGRAM_OUT"
	StreamDLQ = "ENGRAM_DLQ"
)

// Durable consumer names of the worker roles (on ENGRAM_IN).
const (
	ConsumerInjector     = "injector"
	ConsumerExtractor    = "extractor"
	ConsumerConsolidator = "consolidator"
	ConsumerCompactor    = "compactor"
	// ConsumerTranscript stores each turn_ended's transcript, which needs
	// no model, so that a model outage (which pauses the extractor
	// consumer) does not hold it back. The extractor role runs it
	// (ConsumerConfig.Role); it is no role of its own.
	ConsumerTranscript = "transcript"
)

// StreamConfig is what an operator may tune of one stream.
type StreamConfig struct {
	Name       string
	MaxAge     time.Duration // retention by age; 0: unlimited
	MaxBytes   int64         // retention by size; -1: unlimited
	Duplicates time.Duration // Nats-Msg-Id duplicate window
	Replicas   int           // 1 for a single server, 3 for a cluster
	Storage    jetstream.StorageType
	// Discard: DiscardNew refuses publishes when the stream is full (the
	// publisher sees the error, nothing is silently dropped); DiscardOld
	// drops the oldest messages.
	Discard jetstream.DiscardPolicy
	// Retention: jetstream.InterestPolicy (ENGRAM_IN) removes a message
	// once every consumer whose filter matches it has acked it;
	// jetstream.LimitsPolicy keeps it until MaxAge or MaxBytes. Work-queue
	// retention is not supported (it allows one consumer per subject).
	Retention jetstream.RetentionPolicy
	// MaxMsgsPerSubject bounds the messages kept per subject (ENGRAM_IN:
	// per event type and session); with DiscardNew a publish over it is
	// refused for that subject only, so one busy session cannot fill the
	// stream for everyone. -1: unlimited.
	MaxMsgsPerSubject int64
}

// ConsumerConfig is one durable pull consumer on ENGRAM_IN.
type ConsumerConfig struct {
	Name string // durable name, also the DLQ subject token and the processed-record key
	// Role is the worker role whose processes run the consumer (their
	// ENGRAM_WORKERS name and NATS user); "": Name (WorkerRole).
	Role    string
	Types   []Type // input types it receives (subject filter)
	AckWait time.Duration
	// MaxDeliver is the delivery on which the runner dead-letters a
	// message that still fails; -1: unlimited. It is enforced by the
	// runner (internal/runner), not the server: the JetStream consumer has
	// no delivery limit, so a message whose letter cannot be stored yet is
	// redelivered rather than dropped.
	MaxDeliver    int
	MaxAckPending int // messages in flight across all replicas
}

// Defaults of the limits that keep ENGRAM_IN usable for everyone.
const (
	// DefaultMaxEventBytes is the documented maximum size of an input
	// event's JSON body: 512 KiB. The client refuses a bigger one at
	// publish (ErrEventTooLarge) and ENGRAM_IN refuses it too (its
	// MaxMsgSize is MaxEventBytes + MaxHeaderBytes). At half the server's
	// default 1 MiB payload, the dead letter of any valid-size event fits
	// whole.
	DefaultMaxEventBytes = 512 << 10
	// MaxHeaderBytes is the room ENGRAM_IN allows for an event's headers
	// on top of its body.
	MaxHeaderBytes = 16 << 10
	// DefaultMaxMsgsPerSubject bounds the events kept per subject (one
	// event type of one session) in ENGRAM_IN: 1000.
	DefaultMaxMsgsPerSubject = 1000
	// DefaultInjectorWindow is the injector's max ack pending: 16384. The
	// injector's runner holds that many turn_started at once and serves
	// their senders in turn (internal/runner WithFairness), so a flood
	// from one tenant waits behind the others' turns as long as its turns
	// still within their reply deadline fit in it.
	DefaultInjectorWindow = 16384
)

// Topology is the whole JetStream layout: subject prefix, three streams and
// the worker consumers. DefaultTopology gives working values.
type Topology struct {
	Prefix string // subject prefix, see Subjects
	// MaxEventBytes is the maximum size of an input event's body (see
	// DefaultMaxEventBytes); ENGRAM_IN's MaxMsgSize is MaxEventBytes +
	// MaxHeaderBytes. -1: only the server's maximum payload.
	MaxEventBytes int
	In            StreamConfig
	Out           StreamConfig
	DLQ           StreamConfig
	Consumers     []ConsumerConfig
	// Lanes are the named tenants that get an injector lane (EnsureLanes;
	// the default tenant gets one whenever any does). Empty: no lanes.
	Lanes []string
}

// DefaultTopology returns the defaults: file storage, one replica, a
// two-minute duplicate window; ENGRAM_IN keeps a message until every
// consumer that should see it has acked it (interest retention), at most a
// week, 1 GiB and DefaultMaxMsgsPerSubject per subject, refusing publishes
// when full; ENGRAM_OUT keeps a day (256 MiB), ENGRAM_DLQ 30 days (256 MiB);
// one consumer per worker role, and the extractor's transcript consumer;
// events up to DefaultMaxEventBytes.
func DefaultTopology() Topology {
	stream := func(name string, age time.Duration, bytes int64, discard jetstream.DiscardPolicy) StreamConfig {
		return StreamConfig{Name: name, MaxAge: age, MaxBytes: bytes, Duplicates: 2 * time.Minute,
			Replicas: 1, Storage: jetstream.FileStorage, Discard: discard,
			Retention: jetstream.LimitsPolicy, MaxMsgsPerSubject: -1}
	}
	in := stream(StreamIn, 7*24*time.Hour, 1<<30, jetstream.DiscardNew)
	in.Retention, in.MaxMsgsPerSubject = jetstream.InterestPolicy, DefaultMaxMsgsPerSubject
	return Topology{
		Prefix:        DefaultPrefix,
		MaxEventBytes: DefaultMaxEventBytes,
		In:            in,
		Out:           stream(StreamOut, 24*time.Hour, 256<<20, jetstream.DiscardOld),
		DLQ:           stream(StreamDLQ, 30*24*time.Hour, 256<<20, jetstream.DiscardNew),
		Consumers: []ConsumerConfig{
			// A late injection is useless: few deliveries, short ack wait.
			{Name: ConsumerInjector, Types: []Type{TypeTurnStarted}, AckWait: 10 * time.Second, MaxDeliver: 3, MaxAckPending: DefaultInjectorWindow},
			{Name: ConsumerExtractor, Types: []Type{TypeTurnEnded}, AckWait: time.Minute, MaxDeliver: 10, MaxAckPending: 64},
			{Name: ConsumerConsolidator, Types: []Type{TypeSessionIdle}, AckWait: 2 * time.Minute, MaxDeliver: 10, MaxAckPending: 16},
			{Name: ConsumerCompactor, Types: []Type{TypeTokensReported}, AckWait: time.Minute, MaxDeliver: 10, MaxAckPending: 64},
			// The extractor's model-free part: a store write per event.
			{Name: ConsumerTranscript, Role: ConsumerExtractor, Types: []Type{TypeTurnEnded}, AckWait: 30 * time.Second, MaxDeliver: 10, MaxAckPending: 64},
		},
	}
}

// Subjects returns the subject builder of the topology's prefix.
func (t Topology) Subjects() Subjects { return Subjects{Prefix: t.Prefix} }

// Consumer returns the consumer named name.
func (t Topology) Consumer(name string) (ConsumerConfig, bool) {
	for _, c := range t.Consumers {
		if c.Name == name {
			return c, true
		}
	}
	return ConsumerConfig{}, false
}

// WorkerRole is the worker role that runs c: Role, or Name when Role is
// empty.
func (c ConsumerConfig) WorkerRole() string {
	if c.Role != "" {
		return c.Role
	}
	return c.Name
}

// Roles lists the worker roles that run t's consumers (WorkerRole), each
// once, in the consumers' order.
func (t Topology) Roles() []string {
	var roles []string
	for _, c := range t.Consumers {
		if r := c.WorkerRole(); !slices.Contains(roles, r) {
			roles = append(roles, r)
		}
	}
	return roles
}

// Validate reports every problem of the topology at once (joined errors).
func (t Topology) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("topology: "+format, args...)) }
	if err := ValidatePrefix(t.Prefix); err != nil {
		errs = append(errs, fmt.Errorf("topology: %w", err))
	}
	names := map[string]bool{}
	for _, s := range []struct {
		role string
		c    StreamConfig
	}{{"in", t.In}, {"out", t.Out}, {"dlq", t.DLQ}} {
		c := s.c
		switch {
		case c.Name == "":
			bad("stream %s: name missing", s.role)
		case !validName(c.Name):
			bad("stream %s: name %q must not hold spaces, '.', '*', '>', '/' or '\\'", s.role, c.Name)
		case names[c.Name]:
			bad("stream %s: name %q used twice", s.role, c.Name)
		}
		names[c.Name] = true
		if c.MaxAge < 0 {
			bad("stream %s: max age %v is negative", s.role, c.MaxAge)
		}
		if c.MaxBytes == 0 || c.MaxBytes < -1 {
			bad("stream %s: max bytes %d: want > 0 or -1 (unlimited)", s.role, c.MaxBytes)
		}
		if c.Duplicates <= 0 {
			bad("stream %s: duplicate window %v must be positive", s.role, c.Duplicates)
		} else if c.MaxAge > 0 && c.Duplicates > c.MaxAge {
			bad("stream %s: duplicate window %v exceeds max age %v", s.role, c.Duplicates, c.MaxAge)
		}
		if c.Replicas < 1 || c.Replicas > 5 {
			bad("stream %s: replicas %d: want 1..5", s.role, c.Replicas)
		}
		if c.Storage != jetstream.FileStorage && c.Storage != jetstream.MemoryStorage {
			bad("stream %s: unknown storage %d", s.role, c.Storage)
		}
		if c.Discard != jetstream.DiscardOld && c.Discard != jetstream.DiscardNew {
			bad("stream %s: unknown discard policy %d", s.role, c.Discard)
		}
		if c.Retention != jetstream.LimitsPolicy && c.Retention != jetstream.InterestPolicy {
			bad("stream %s: retention %v: want limits or interest", s.role, c.Retention)
		}
		if c.MaxMsgsPerSubject == 0 || c.MaxMsgsPerSubject < -1 {
			bad("stream %s: max messages per subject %d: want > 0 or -1 (unlimited)", s.role, c.MaxMsgsPerSubject)
		}
	}
	if t.MaxEventBytes == 0 || t.MaxEventBytes < -1 {
		bad("max event bytes %d: want > 0 or -1 (the server's maximum payload)", t.MaxEventBytes)
	} else if t.MaxEventBytes > 64<<20 {
		bad("max event bytes %d: want at most 64 MiB (the server's largest payload)", t.MaxEventBytes)
	}
	if t.Out.Retention == jetstream.InterestPolicy || t.DLQ.Retention == jetstream.InterestPolicy {
		// Nobody consumes them durably: interest retention would drop
		// every message at once.
		bad("streams out and dlq need limits retention")
	}
	if t.In.Retention == jetstream.InterestPolicy {
		// An input type no consumer filters would be dropped at publish.
		covered := map[Type]bool{}
		for _, c := range t.Consumers {
			for _, ty := range c.Types {
				covered[ty] = true
			}
		}
		for _, ty := range InputTypes {
			if !covered[ty] {
				bad("stream in has interest retention but no consumer receives %s: those events would be dropped at publish", ty)
			}
		}
	}
	if len(t.Consumers) == 0 {
		bad("no consumers")
	}
	seen := map[string]bool{}
	for i, c := range t.Consumers {
		id := fmt.Sprintf("consumer %d (%s)", i, c.Name)
		switch {
		case c.Name == "":
			bad("consumer %d: name missing", i)
		case !validName(c.Name):
			bad("%s: name must not hold spaces, '.', '*', '>', '/' or '\\'", id)
		case seen[c.Name]:
			bad("%s: name used twice", id)
		}
		seen[c.Name] = true
		if c.Role != "" && !validName(c.Role) {
			bad("%s: role must not hold spaces, '.', '*', '>', '/' or '\\'", id)
		}
		if len(c.Types) == 0 {
			bad("%s: no input types", id)
		}
		for _, ty := range c.Types {
			if !ty.IsInput() {
				bad("%s: %q is not an input type", id, string(ty))
			}
		}
		if c.AckWait < time.Second {
			bad("%s: ack wait %v: want at least 1s", id, c.AckWait)
		}
		if c.MaxDeliver == 0 || c.MaxDeliver < -1 {
			bad("%s: max deliver %d: want > 0 or -1 (unlimited)", id, c.MaxDeliver)
		}
		if c.MaxAckPending < 1 {
			bad("%s: max ack pending %d: want > 0", id, c.MaxAckPending)
		}
	}
	return errors.Join(errs...)
}

func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\r', '\n', '.', '*', '>', '/', '\\', 0:
			return false
		}
	}
	return true
}

// StreamConfigs returns the JetStream configurations of the three streams.
func (t Topology) StreamConfigs() []jetstream.StreamConfig {
	subj := t.Subjects()
	mk := func(c StreamConfig, subject, desc string) jetstream.StreamConfig {
		sc := jetstream.StreamConfig{
			Name:              c.Name,
			Description:       desc,
			Subjects:          []string{subject},
			Retention:         c.Retention,
			MaxAge:            c.MaxAge,
			MaxBytes:          c.MaxBytes,
			MaxMsgs:           -1,
			MaxMsgsPerSubject: c.MaxMsgsPerSubject,
			MaxMsgSize:        -1,
			Discard:           c.Discard,
			Duplicates:        c.Duplicates,
			Replicas:          c.Replicas,
			Storage:           c.Storage,
			AllowDirect:       true,
		}
		if sc.MaxMsgsPerSubject == 0 {
			sc.MaxMsgsPerSubject = -1
		}
		// Refuse for the full subject only, not for the whole stream.
		sc.DiscardNewPerSubject = sc.Discard == jetstream.DiscardNew && sc.MaxMsgsPerSubject > 0
		return sc
	}
	in := mk(t.In, "", "Engram input events from chat platforms")
	// One subject pattern per input type: a publish of an unknown type,
	// of an output type, or of the form before tenants matches no stream
	// and fails at the publisher instead of being stored and dropped.
	in.Subjects = subj.InStreams()
	if t.MaxEventBytes > 0 {
		in.MaxMsgSize = int32(t.MaxEventBytes + MaxHeaderBytes)
	}
	return []jetstream.StreamConfig{
		in,
		mk(t.Out, subj.OutAll(), "Engram output events from workers"),
		mk(t.DLQ, subj.DLQAll(), "Engram dead letters"),
	}
}

// JetStreamConsumerConfig returns the JetStream configuration of c: a durable
// pull consumer with explicit ack, filtered on c's input types.
func (t Topology) JetStreamConsumerConfig(c ConsumerConfig) jetstream.ConsumerConfig {
	subj := t.Subjects()
	cc := jetstream.ConsumerConfig{
		Durable:       c.Name,
		Description:   "Engram worker " + c.Name,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		// No server-side limit: the runner enforces c.MaxDeliver, and
		// dead-letters before it terminates. A server limit would drop a
		// message whose letter could not be stored (DLQ full) after its
		// last delivery.
		MaxDeliver:    -1,
		MaxAckPending: c.MaxAckPending,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
		Replicas:      t.In.Replicas,
	}
	if len(c.Types) == 1 {
		cc.FilterSubject = subj.InType(c.Types[0])
	} else {
		for _, ty := range c.Types {
			cc.FilterSubjects = append(cc.FilterSubjects, subj.InType(ty))
		}
	}
	return cc
}

// EnsureOptions change what EnsureTopology may do.
type EnsureOptions struct {
	// Frozen names streams that are created when missing but never
	// updated: a difference is reported in Ensured.NotApplied instead.
	// The setup role's connection has ENGRAM_DLQ frozen (it may not update
	// it: shrinking its limits would delete dead letters).
	Frozen []string
}

// Ensured is what EnsureTopology did not do.
type Ensured struct {
	// NotApplied lists, one line each, the changes of frozen streams that
	// wait for a connection allowed to make them (admin).
	NotApplied []string
}

// EnsureTopology validates t, then creates or updates the three streams and
// every consumer. It is idempotent: run it at every start and from
// `engram setup`. A stream whose configuration is already the wanted one
// is not updated (no request).
//
// It migrates an existing stream without losing a message:
//   - Retention (ENGRAM_IN of an older setup has limits retention): a new
//     stream is created, and an existing one updated, with its current
//     retention first; the consumers are created or updated; only then is
//     the retention switched. Switched to interest, the server removes what
//     every consumer matching a message has acked and keeps the rest; with
//     no consumer yet it would drop everything, hence the order. (The
//     server switches limits <-> interest in place since nats-server 2.10.)
//   - MaxMsgsPerSubject lowered: the server would delete a subject's
//     oldest messages over the new limit, acked or not. While a subject
//     holds more than the new limit the stream keeps its old one; a later
//     start applies it (no error: the stream works under its old limit,
//     which `engram status` shows).
//   - Subjects (ENGRAM_IN of a version before tenants stored <prefix>.in.>):
//     the stream's subjects become one pattern per input type with the
//     tenant token. The server keeps the messages already stored under the
//     old form, and the consumers (filtered <prefix>.in.<type>.>) still
//     deliver them; a worker takes one as the default tenant's when its
//     body names no tenant (Subjects.Check), else dead-letters it.
func EnsureTopology(ctx context.Context, js jetstream.JetStream, t Topology) error {
	_, err := EnsureTopologyWith(ctx, js, t, EnsureOptions{})
	return err
}

// EnsureTopologyWith is EnsureTopology with options.
func EnsureTopologyWith(ctx context.Context, js jetstream.JetStream, t Topology, o EnsureOptions) (Ensured, error) {
	var done Ensured
	if err := t.Validate(); err != nil {
		return done, err
	}
	var switches []jetstream.StreamConfig
	for _, sc := range t.StreamConfigs() {
		want := sc
		st, err := js.Stream(ctx, sc.Name)
		var old *jetstream.StreamConfig
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			sc.Retention = jetstream.LimitsPolicy
		case err != nil:
			return done, fmt.Errorf("events: ensure stream %s: %w", sc.Name, err)
		default:
			cfg := st.CachedInfo().Config
			old = &cfg
			sc.Retention = old.Retention
			if lowered(old.MaxMsgsPerSubject, sc.MaxMsgsPerSubject) {
				over, err := subjectOver(ctx, st, sc.MaxMsgsPerSubject)
				if err != nil {
					return done, fmt.Errorf("events: ensure stream %s: %w", sc.Name, err)
				}
				if over {
					sc.MaxMsgsPerSubject = old.MaxMsgsPerSubject
					sc.DiscardNewPerSubject = old.DiscardNewPerSubject
					want.MaxMsgsPerSubject, want.DiscardNewPerSubject = sc.MaxMsgsPerSubject, sc.DiscardNewPerSubject
				}
			}
		}
		switch {
		case old == nil:
			_, err := js.CreateStream(ctx, sc)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				// Created meanwhile by another process starting too.
				_, err = js.UpdateStream(ctx, sc)
			}
			if err != nil {
				return done, fmt.Errorf("events: create stream %s: %w", sc.Name, err)
			}
		case sameStream(*old, sc):
		case slices.Contains(o.Frozen, sc.Name):
			done.NotApplied = append(done.NotApplied, fmt.Sprintf("stream %s: %s (this connection may not update it; run `engram setup` as admin)",
				sc.Name, strings.Join(streamDiff(*old, sc), ", ")))
			continue
		default:
			if _, err := js.UpdateStream(ctx, sc); err != nil {
				return done, fmt.Errorf("events: update stream %s: %w", sc.Name, err)
			}
		}
		if sc.Retention != want.Retention {
			switches = append(switches, want)
		}
	}
	for _, c := range t.Consumers {
		if _, err := js.CreateOrUpdateConsumer(ctx, t.In.Name, t.JetStreamConsumerConfig(c)); err != nil {
			return done, fmt.Errorf("events: ensure consumer %s on %s: %w", c.Name, t.In.Name, err)
		}
	}
	if err := EnsureLanes(ctx, js, t); err != nil {
		return done, err
	}
	for _, sc := range switches {
		if _, err := js.UpdateStream(ctx, sc); err != nil {
			return done, fmt.Errorf("events: switch stream %s to %v retention (needs nats-server 2.10 or later): %w", sc.Name, sc.Retention, err)
		}
	}
	return done, nil
}

// sameStream reports whether a stream's configuration has every setting
// EnsureTopology sets as want has it.
func sameStream(old, want jetstream.StreamConfig) bool { return len(streamDiff(old, want)) == 0 }

// streamDiff names the settings of want that old has otherwise.
func streamDiff(old, want jetstream.StreamConfig) []string {
	var d []string
	diff := func(name string, a, b any) {
		if a != b {
			d = append(d, fmt.Sprintf("%s %v -> %v", name, a, b))
		}
	}
	if !slices.Equal(old.Subjects, want.Subjects) {
		d = append(d, fmt.Sprintf("subjects %v -> %v", old.Subjects, want.Subjects))
	}
	diff("description", old.Description, want.Description)
	diff("retention", old.Retention, want.Retention)
	diff("max age", old.MaxAge, want.MaxAge)
	diff("max bytes", old.MaxBytes, want.MaxBytes)
	diff("max messages", old.MaxMsgs, want.MaxMsgs)
	diff("max per subject", old.MaxMsgsPerSubject, want.MaxMsgsPerSubject)
	diff("max message size", old.MaxMsgSize, want.MaxMsgSize)
	diff("discard", old.Discard, want.Discard)
	diff("discard new per subject", old.DiscardNewPerSubject, want.DiscardNewPerSubject)
	diff("duplicate window", old.Duplicates, want.Duplicates)
	diff("replicas", old.Replicas, want.Replicas)
	diff("storage", old.Storage, want.Storage)
	diff("allow direct", old.AllowDirect, want.AllowDirect)
	return d
}

// lowered reports whether a per-subject limit goes from old to a stricter
// new one (-1 and 0 are unlimited).
func lowered(old, new int64) bool {
	if new <= 0 {
		return false
	}
	return old <= 0 || new < old
}

// subjectOver reports whether a subject of st holds more than limit
// messages.
func subjectOver(ctx context.Context, st jetstream.Stream, limit int64) (bool, error) {
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		return false, fmt.Errorf("subject counts: %w", err)
	}
	for _, n := range info.State.Subjects {
		if int64(n) > limit {
			return true, nil
		}
	}
	return false, nil
}
