package erase

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/idle"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// Bus is where the scope's copies on the bus are: the event streams and
// the idle detector's activity bucket. The connection needs the admin's
// rights (reading and deleting any stream's messages).
type Bus struct {
	JS       jetstream.JetStream
	Subjects events.Subjects
	// Streams are the event streams (ENGRAM_IN, ENGRAM_OUT, ENGRAM_DLQ by
	// default); a stream that does not exist is skipped.
	Streams []string
	// Bucket is the activity bucket (idle.DefaultBucket); "" none.
	Bucket string
	// Attempt bounds one request to the streams (0: 5 s); an unanswered
	// one is sent again (events.RetriedWithin): an erasure runs under a
	// 30-minute deadline, and a reply lost to a NATS node's death held
	// the erase service (and every request queued behind it) that long.
	Attempt time.Duration
}

// retried runs one stream request of an erasure, bounded and sent again
// when unanswered.
func retried[T any](ctx context.Context, b *Bus, call func(context.Context) (T, error)) (T, error) {
	attempt := b.Attempt
	if attempt <= 0 {
		attempt = 5 * time.Second
	}
	return events.RetriedWithin(ctx, attempt, call)
}

// stream looks the stream name up.
func (b *Bus) stream(ctx context.Context, name string) (jetstream.Stream, error) {
	return retried(ctx, b, func(ctx context.Context) (jetstream.Stream, error) { return b.JS.Stream(ctx, name) })
}

// NewBus is the Bus of a topology, with the default activity bucket.
func NewBus(js jetstream.JetStream, topo events.Topology) *Bus {
	return &Bus{JS: js, Subjects: events.Subjects{Prefix: topo.Prefix},
		Streams: []string{topo.In.Name, topo.Out.Name, topo.DLQ.Name}, Bucket: idle.DefaultBucket}
}

// kvStream is the stream behind the activity bucket.
func (b *Bus) kvStream() string { return "KV_" + b.Bucket }

func (b *Bus) all() []string {
	out := append([]string(nil), b.Streams...)
	if b.Bucket != "" {
		out = append(out, b.kvStream())
	}
	return out
}

// erase deletes, with JetStream's secure delete (the message is
// overwritten in the store's files), every message of the scope in each
// stream from the sequences in from (nil: all), and returns how many per
// stream and where to start next time.
func (b *Bus) erase(ctx context.Context, sc Scope, from map[string]uint64, seen memory.Seen) (map[string]int, map[string]uint64, error) {
	counts := map[string]int{}
	next := map[string]uint64{}
	for name, seq := range from {
		next[name] = seq
	}
	for _, name := range b.all() {
		st, err := b.stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return counts, next, fmt.Errorf("%s: %w", name, err)
		}
		counts[name] += 0 // searched: listed even when nothing was the scope's
		var seqs []uint64
		subjects := map[string]int{}
		last, err := b.scanStream(ctx, st, max(from[name], 1), func(m jetstream.Msg, seq uint64) {
			if b.holds(sc, name, m) {
				seqs = append(seqs, seq)
				subjects[m.Subject()]++
				bodyTexts(m.Data(), seen)
			}
		})
		if err != nil {
			return counts, next, fmt.Errorf("%s: %w", name, err)
		}
		if last > 0 {
			next[name] = last + 1
		}
		if b.Bucket != "" && name == b.kvStream() {
			// A key-value bucket's stream denies message deletes: each
			// key's revisions are purged (no delete marker left).
			for subj, n := range subjects {
				_, err := retried(ctx, b, func(ctx context.Context) (struct{}, error) {
					return struct{}{}, st.Purge(ctx, jetstream.WithPurgeSubject(subj))
				})
				if err != nil {
					return counts, next, fmt.Errorf("%s: purge %s: %w", name, subj, err)
				}
				counts[name] += n
			}
			continue
		}
		for _, seq := range seqs {
			unanswered := false
			_, err := retried(ctx, b, func(actx context.Context) (struct{}, error) {
				err := st.SecureDeleteMsg(actx, seq)
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					unanswered = true
				}
				return struct{}{}, err
			})
			if gone(err) {
				if unanswered {
					counts[name]++ // the attempt whose reply was lost deleted it
				}
				continue // removed meanwhile (acknowledged by every consumer, or aged out)
			}
			if err != nil {
				return counts, next, fmt.Errorf("%s: secure delete of message %d: %w", name, seq, err)
			}
			counts[name]++
		}
	}
	return counts, next, nil
}

// scanAll reads every message of every stream for a verification; it
// returns what it read, as lines for the receipt.
func (b *Bus) scanAll(ctx context.Context, sc Scope, fn func(where, keptBy string, data []byte)) ([]string, error) {
	var out []string
	for _, name := range b.all() {
		st, err := b.stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			out = append(out, fmt.Sprintf("stream %s: does not exist", name))
			continue
		}
		if err != nil {
			return out, fmt.Errorf("%s: %w", name, err)
		}
		n := 0
		_, err = b.scanStream(ctx, st, 1, func(m jetstream.Msg, seq uint64) {
			n++
			keptBy := ""
			if !b.holds(sc, name, m) {
				keptBy = "a message of another scope (the same text)"
			}
			where := fmt.Sprintf("stream %s message %d", name, seq)
			var raw []byte
			raw = append(raw, m.Subject()...)
			for k, vs := range m.Headers() {
				raw = append(append(raw, '\n'), k...)
				for _, v := range vs {
					raw = append(append(raw, '\n'), v...)
				}
			}
			raw = append(append(raw, '\n'), m.Data()...)
			fn(where, keptBy, raw)
		})
		if err != nil {
			return out, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, fmt.Sprintf("stream %s: %d messages (subjects, headers, bodies)", name, n))
	}
	return out, nil
}

// gone reports whether a delete failed because the message is not in the
// stream any more. The server says "sequence N not found" (10043), which
// jetstream passes on as text inside ErrMsgDeleteUnsuccessful, not as
// ErrMsgNotFound (which this code waited for alone, so a message removed
// between the scan and its delete, every consumer having acknowledged it,
// failed the whole erasure).
func gone(err error) bool {
	return errors.Is(err, jetstream.ErrMsgNotFound) ||
		errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) && strings.Contains(err.Error(), "err_code=10043")
}

// unansweredPull: a FetchNoWait that took this long got no answer (the
// library ends it a second after its zero expiry; an answer comes in
// milliseconds).
const unansweredPull = 900 * time.Millisecond

// maxSilentPulls: a scan fails (rather than ending as if complete) after
// this many unanswered pulls in a row.
var maxSilentPulls = 10

// scanStream calls fn with every message of st from sequence from to the
// stream's last at the start, through an ordered consumer, and returns
// that last sequence (0: the stream was empty).
func (b *Bus) scanStream(ctx context.Context, st jetstream.Stream, from uint64, fn func(m jetstream.Msg, seq uint64)) (uint64, error) {
	info, err := retried(ctx, b, func(ctx context.Context) (*jetstream.StreamInfo, error) { return st.Info(ctx) })
	if err != nil {
		return 0, err
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 || from > last {
		return last, nil
	}
	// A consumer created by an attempt whose reply was lost is removed by
	// the server after a minute without use.
	cons, err := retried(ctx, b, func(ctx context.Context) (jetstream.Consumer, error) {
		return st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: max(from, info.State.FirstSeq),
			InactiveThreshold: time.Minute,
		})
	})
	if err != nil {
		return 0, err
	}
	silent := 0 // pulls in a row that got no answer
	for {
		asked := time.Now()
		batch, err := cons.FetchNoWait(500)
		if err != nil {
			return 0, err
		}
		got := 0
		done := false
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil {
				return 0, err
			}
			seq := meta.Sequence.Stream
			if seq > last {
				done = true
				continue
			}
			fn(m, seq)
			if seq == last || meta.NumPending == 0 {
				done = true
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
			return 0, err
		}
		if got == 0 && time.Since(asked) >= unansweredPull && ctx.Err() == nil {
			if silent++; silent == maxSilentPulls {
				return 0, fmt.Errorf("%d pulls in a row got no answer: the stream is not reachable", silent)
			}
			// The server answers a pull that does not wait at once, with
			// messages or "none"; nothing for the library's whole wait is
			// a pull whose request or answer was lost with a NATS node,
			// not "nothing more": ask again rather than take the rest of
			// the stream as read (the erasure then missed the scope's
			// later messages, and its cursor moved past them).
			continue
		}
		silent = 0
		if done || got == 0 {
			return last, nil
		}
	}
}

// holds reports whether a message of stream name is the scope's: its
// subject (an event's), its original subject (a dead letter's header), its
// activity key (the bucket's) or its body (tenant_id, project_id,
// session_id) names a session or project the scope holds.
func (b *Bus) holds(sc Scope, name string, m jetstream.Msg) bool {
	in := func(ref memory.SessionRef) bool {
		if ref.Session == "" {
			return sc.HoldsProject(ref.ProjectRef())
		}
		return sc.HoldsSession(ref)
	}
	if b.Bucket != "" && name == b.kvStream() {
		ref, ok := activityKey(strings.TrimPrefix(m.Subject(), "$KV."+b.Bucket+"."))
		return ok && in(ref)
	}
	if ref, ok := b.subjectRef(m.Subject()); ok && in(ref) {
		return true
	}
	if h := m.Headers(); h != nil {
		if ref, ok := b.subjectRef(h.Get(events.HeaderDLQSubject)); ok && in(ref) {
			return true
		}
	}
	var body struct {
		Tenant  string `json:"tenant_id"`
		Project string `json:"project_id"`
		Session string `json:"session_id"`
	}
	if json.Unmarshal(m.Data(), &body) == nil && body.Project != "" {
		return in(memory.SessionRef{Tenant: body.Tenant, Project: body.Project, Session: body.Session})
	}
	return false
}

// subjectRef reads the tenant, project and session an event subject names.
func (b *Bus) subjectRef(subject string) (memory.SessionRef, bool) {
	if subject == "" {
		return memory.SessionRef{}, false
	}
	a, err := b.Subjects.Parse(subject)
	if err != nil {
		return memory.SessionRef{}, false
	}
	return addressRef(a)
}

// activityKey inverts idle.Key: [t.<tenant>.]<project>.<session>, each
// base64url.
func activityKey(key string) (memory.SessionRef, bool) {
	parts := strings.Split(key, ".")
	var ref memory.SessionRef
	dec := func(s string, into *string) bool {
		b, err := base64.RawURLEncoding.DecodeString(s)
		*into = string(b)
		return err == nil
	}
	switch {
	case len(parts) == 2:
		return ref, dec(parts[0], &ref.Project) && dec(parts[1], &ref.Session)
	case len(parts) == 4 && parts[0] == "t":
		return ref, dec(parts[1], &ref.Tenant) && dec(parts[2], &ref.Project) && dec(parts[3], &ref.Session)
	}
	return ref, false
}

// bodyTexts passes the strings of a JSON body to seen (a body that is not
// JSON: the whole body), but those every event of every scope has: its
// type, times, roles and statuses, the tenant and project ids (the
// project's kept sessions have them too; the scope's own ids are looked
// for anyway).
func bodyTexts(data []byte, seen memory.Seen) {
	if seen == nil || len(data) == 0 {
		return
	}
	var v any
	if json.Unmarshal(data, &v) != nil {
		seen(string(data))
		return
	}
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch x := v.(type) {
		case string:
			if commonKeys[key] || strings.HasSuffix(key, "_at") || events.Type(x).IsInput() || events.Type(x).IsOutput() {
				return
			}
			if _, err := time.Parse(time.RFC3339Nano, x); err == nil {
				return
			}
			seen(x)
		case []any:
			for _, e := range x {
				walk(key, e)
			}
		case map[string]any:
			for k, e := range x {
				walk(k, e)
			}
		}
	}
	walk("", v)
}

// commonKeys hold values that are not the scope's own text.
var commonKeys = map[string]bool{
	"type": true, "tenant_id": true, "project_id": true, "timestamp": true, "time": true, "role": true,
	"status": true, "model": true, "reason": true, "verdict": true, "kind": true, "scope": true,
}
