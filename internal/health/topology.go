package health

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/pkg/events"
)

// FillWarn is the fill level (bytes stored over the stream's maximum) from
// which a stream is reported degraded: a stream that fills refuses
// publishes (ENGRAM_IN, ENGRAM_DLQ) or drops its oldest (ENGRAM_OUT).
const FillWarn = 0.8

// IdleAfter is how long a consumer with pending events must have had no
// delivery, no pull waiting and nothing in flight before it is reported as
// having no worker (a running worker always has a pull request waiting,
// except for the instant between two).
const IdleAfter = 10 * time.Second

// StreamState is what the server says of one stream of the topology.
type StreamState struct {
	Name              string
	Missing           bool
	Subjects          []string
	Retention         jetstream.RetentionPolicy
	Msgs, Bytes       uint64
	MaxBytes          int64 // -1: unlimited
	MaxMsgsPerSubject int64 // -1: unlimited
	FirstTime         time.Time
	LastTime          time.Time
}

// Fill is Bytes / MaxBytes, 0 when unlimited.
func (s StreamState) Fill() float64 {
	if s.MaxBytes <= 0 {
		return 0
	}
	return float64(s.Bytes) / float64(s.MaxBytes)
}

// ConsumerState is what the server says of one consumer of the topology
// (or one found on its input stream).
type ConsumerState struct {
	Name         string
	Stream       string
	Missing      bool // in the topology but not on the server
	Extra        bool // on the server but not in the topology (an operator's)
	Pending      uint64
	AckPending   int
	Redelivered  int
	Waiting      int // pull requests waiting: a running worker has one
	LastDelivery time.Time
	// NoWorker: events are pending, nothing is in flight, no pull request
	// is waiting and nothing was delivered for IdleAfter: no worker of
	// this role is running (or every one is paused).
	NoWorker bool
}

// TopologyState is the server's view of a topology.
type TopologyState struct {
	Streams   []StreamState
	Consumers []ConsumerState
}

// Inspect reads the topology's streams and consumers from the server. A
// missing stream or consumer is reported in the state, not as an error;
// the error is for a server that could not be asked. idleAfter is how long
// a consumer must look unworked to be NoWorker (0: IdleAfter).
func Inspect(ctx context.Context, js jetstream.JetStream, topo events.Topology, idleAfter time.Duration) (TopologyState, error) {
	if idleAfter <= 0 {
		idleAfter = IdleAfter
	}
	var st TopologyState
	var errs []error
	for _, name := range []string{topo.In.Name, topo.Out.Name, topo.DLQ.Name} {
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			st.Streams = append(st.Streams, StreamState{Name: name, Missing: true})
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("health: stream %s: %w", name, err))
			continue
		}
		si := s.CachedInfo()
		st.Streams = append(st.Streams, StreamState{Name: name, Subjects: si.Config.Subjects, Retention: si.Config.Retention,
			Msgs: si.State.Msgs, Bytes: si.State.Bytes, MaxBytes: si.Config.MaxBytes,
			MaxMsgsPerSubject: si.Config.MaxMsgsPerSubject, FirstTime: si.State.FirstTime, LastTime: si.State.LastTime})
		if name != topo.In.Name {
			continue
		}
		want := map[string]bool{}
		for _, c := range topo.Consumers {
			want[c.Name] = true
		}
		found := map[string]bool{}
		l := s.ListConsumers(ctx)
		for ci := range l.Info() {
			found[ci.Name] = true
			cs := ConsumerState{Name: ci.Name, Stream: name, Extra: !want[ci.Name], Pending: ci.NumPending,
				AckPending: ci.NumAckPending, Redelivered: ci.NumRedelivered, Waiting: ci.NumWaiting}
			if ci.Delivered.Last != nil {
				cs.LastDelivery = *ci.Delivered.Last
			}
			cs.NoWorker = cs.Pending > 0 && cs.AckPending == 0 && cs.Waiting == 0 &&
				(cs.LastDelivery.IsZero() || time.Since(cs.LastDelivery) >= idleAfter) &&
				time.Since(ci.Created) >= idleAfter
			st.Consumers = append(st.Consumers, cs)
		}
		if err := l.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
			errs = append(errs, fmt.Errorf("health: consumers of %s: %w", name, err))
			continue
		}
		for _, c := range topo.Consumers {
			if !found[c.Name] {
				st.Consumers = append(st.Consumers, ConsumerState{Name: c.Name, Stream: name, Missing: true})
			}
		}
	}
	return st, errors.Join(errs...)
}

// Problems lists what is wrong: failed (a stream or consumer is missing:
// workers cannot pull, publishes fail or, for a consumer, its events are
// never delivered) and degraded (a stream FillWarn full, events pending
// for a role no worker runs).
func (s TopologyState) Problems() (failed, degraded []string) {
	for _, st := range s.Streams {
		switch {
		case st.Missing:
			failed = append(failed, "stream "+st.Name+" missing (run engram setup)")
		case st.Fill() >= FillWarn:
			degraded = append(degraded, fmt.Sprintf("stream %s %.0f%% full (%d of %d bytes)", st.Name, 100*st.Fill(), st.Bytes, st.MaxBytes))
		}
	}
	for _, c := range s.Consumers {
		switch {
		case c.Missing:
			failed = append(failed, "consumer "+c.Name+" on "+c.Stream+" missing (run engram setup)")
		case c.NoWorker:
			degraded = append(degraded, fmt.Sprintf("consumer %s: %d events pending and no worker pulling (none running, or all paused)", c.Name, c.Pending))
		}
	}
	return failed, degraded
}

// TopologyCheck is the readiness check "topology": failed while a stream
// or consumer of topo is missing on the server (a deleted stream or
// consumer makes the process unready), degraded while a stream is
// FillWarn full or a consumer has events pending and no worker (idleAfter
// as in Inspect).
func TopologyCheck(js jetstream.JetStream, topo events.Topology, idleAfter time.Duration) Check {
	return Check{Name: "topology", Run: func(ctx context.Context) error {
		st, err := Inspect(ctx, js, topo, idleAfter)
		if err != nil {
			return err
		}
		failed, degraded := st.Problems()
		if len(failed) > 0 {
			return errors.New(strings.Join(append(failed, degraded...), "; "))
		}
		if len(degraded) > 0 {
			return Degraded(errors.New(strings.Join(degraded, "; ")))
		}
		return nil
	}}
}
