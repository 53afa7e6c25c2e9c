package runner

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/pkg/events"
)

// ResultLaned: the main consumer delivered an event that a lane this
// runner pulls delivers too (WithLanes): acked, the handler is not called
// (the lane's delivery is handled).
const ResultLaned Result = "laned"

// lane is one consumer the runner pulls: its own (main) or a lane.
type lane struct {
	name   string
	cons   jetstream.Consumer
	window int
	sem    chan struct{} // a slot per message held (queued or handled)
	ctx    context.Context
	stop   context.CancelFunc // lanes only
	// from maps each of the lane's filter subjects, as last seen, to the
	// stream sequence after which the lane delivers its events (the
	// stream's last sequence when the runner first saw the filter on
	// this lane); created is when the lane's consumer was created, so
	// that one deleted and made again is taken as new (laneSet.mu).
	from    map[string]uint64
	created time.Time
}

// release frees one of the lane's window slots.
func (l *lane) release() { <-l.sem }

// WithLanes makes the runner pull, besides its own consumer, the
// consumers named names that exist on its stream (looked up at start and
// every refresh; a lane deleted is dropped, one created is taken up), into
// the same queue and handlers. Each lane is filtered on subjects of the
// form Subjects.InTypeTenant (a type and a tenant): an event of such a
// subject that the runner's own consumer delivers is acknowledged without
// handling (ResultLaned) once a lane that covers it is pulled, if it was
// stored after the runner saw that lane cover it (the lane delivers
// everything stored since its filter names the tenant; what was stored
// before is handled from the main consumer, and may be handled twice: the
// lanes are for a handler that tolerates it, the injector). A flood in
// one lane then stays in that lane: the others are pulled at their own
// position in the stream. See events.EnsureLanes.
func WithLanes(names []string, refresh time.Duration) Option {
	return func(r *Runner) {
		r.lanes.names = slices.Clone(names)
		if r.lanes.names == nil {
			r.lanes.names = []string{}
		}
		r.lanes.every = refresh
		if r.lanes.every <= 0 {
			r.lanes.every = 5 * time.Second
		}
	}
}

// laneSet is the runner's lanes (WithLanes).
type laneSet struct {
	names []string // nil: no lanes
	every time.Duration

	mu      sync.Mutex
	running map[string]*lane
	// covered maps a filter subject of a running lane to the stream
	// sequence after which that lane delivers its events (the stream's last
	// sequence when the runner first saw the filter). Read at every
	// intake of the main consumer, replaced whole under mu.
	covered atomic.Pointer[map[string]uint64]
}

// laneKeeper looks the lanes up every refresh until the runner stops.
func (r *Runner) laneKeeper() {
	t := time.NewTicker(r.lanes.every)
	defer t.Stop()
	for {
		select {
		case <-r.pullCtx.Done():
			return
		case <-t.C:
		}
		r.lanes.refresh(r.pullCtx, r)
	}
}

// refresh starts a loop for each lane that exists and is not pulled yet,
// and records what every running lane covers.
func (s *laneSet) refresh(ctx context.Context, r *Runner) {
	ctx, cancel := context.WithTimeout(ctx, max(s.every, 5*time.Second))
	defer cancel()
	type found struct {
		cons    jetstream.Consumer
		filters []string
		window  int
		created time.Time
	}
	// One list of the stream's consumers (their configurations), then
	// the stream's last sequence: what is stored after it, a lane whose
	// filter names it (as listed) delivers.
	fail := func(err error) {
		if ctx.Err() == nil {
			r.log.Warn("lane lookup failed", zap.String("stream", r.cfg.Stream), zap.Error(err))
		}
	}
	st, err := r.js.Stream(ctx, r.cfg.Stream)
	if err != nil {
		fail(err)
		return
	}
	lister := st.ListConsumers(ctx)
	infos := map[string]*jetstream.ConsumerInfo{}
	for ci := range lister.Info() {
		if slices.Contains(s.names, ci.Name) {
			infos[ci.Name] = ci
		}
	}
	if err := lister.Err(); err != nil {
		fail(err)
		return
	}
	si, err := st.Info(ctx)
	if err != nil {
		fail(err)
		return
	}
	last := si.State.LastSeq
	seen := map[string]found{}
	var missing []*lane
	s.mu.Lock()
	for _, l := range s.running {
		if infos[l.name] == nil {
			missing = append(missing, l)
		}
	}
	s.mu.Unlock()
	for name, ci := range infos {
		f := found{filters: events.Filters(ci.Config), window: max(ci.Config.MaxAckPending, 1), created: ci.Created}
		s.mu.Lock()
		_, running := s.running[name]
		s.mu.Unlock()
		if !running {
			if f.cons, err = st.Consumer(ctx, name); err != nil {
				if !errors.Is(err, jetstream.ErrConsumerNotFound) {
					fail(err)
				}
				continue
			}
		}
		seen[name] = f
	}
	// A running lane the list left out: gone if the server says so.
	for _, l := range missing {
		if s.deleted(r, l, nil) {
			s.gone(r, l)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.pullCtx.Err() != nil {
		return
	}
	if s.running == nil {
		s.running = map[string]*lane{}
	}
	for name, f := range seen {
		l := s.running[name]
		if l == nil && f.cons != nil {
			l = &lane{name: name, cons: f.cons, window: f.window, sem: make(chan struct{}, f.window), created: f.created}
			l.ctx, l.stop = context.WithCancel(r.pullCtx)
			s.running[name] = l
			r.loops.Go(func() { r.loop(l) })
			r.log.Info("pulling lane", zap.String("lane", name), zap.Strings("filters", f.filters))
		}
		if l == nil {
			continue
		}
		if !l.created.Equal(f.created) {
			// Deleted and made again since the last look: it delivers
			// from its own start, which says nothing of what the old one
			// did not deliver; covered afresh from now.
			l.from, l.created = nil, f.created
		}
		from := map[string]uint64{}
		for _, fs := range f.filters {
			if v, ok := l.from[fs]; ok {
				from[fs] = v
			} else {
				from[fs] = last
			}
		}
		l.from = from
	}
	s.publish()
}

// publish recomputes covered from the running lanes (under mu): a filter
// two lanes hold is covered from the earlier of their sequences (a turn
// after it is delivered by at least one of them).
func (s *laneSet) publish() {
	covered := map[string]uint64{}
	for _, l := range s.running {
		for f, from := range l.from {
			if v, ok := covered[f]; !ok || from < v {
				covered[f] = from
			}
		}
	}
	old := s.covered.Load()
	if old == nil || !maps.Equal(*old, covered) {
		s.covered.Store(&covered)
	}
}

// gone drops a lane whose consumer no longer exists: the main consumer
// handles its events again (those it delivers from now on).
func (s *laneSet) gone(r *Runner, l *lane) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[l.name] != l {
		return
	}
	delete(s.running, l.name)
	l.stop()
	s.publish()
	r.log.Warn("lane gone: its tenants' turns are the injector consumer's again (what the lane had not delivered is lost with it)", zap.String("lane", l.name))
}

// delivers reports whether a running lane delivers the event of subject
// stored at seq (see WithLanes).
func (s *laneSet) delivers(r *Runner, subject string, seq uint64) bool {
	p := s.covered.Load()
	if p == nil || len(*p) == 0 {
		return false
	}
	key, ok := laneKey(r.cfg.Subjects, subject)
	if !ok {
		return false
	}
	from, ok := (*p)[key]
	return ok && seq > from
}

// laneKey is the lane filter an input subject
// (<prefix>.in.<type>.<tenant>.<project>.<session>) matches: its own
// tenant token, as sent, not decoded and encoded again (an escape the
// encoder would not write, %61 for a, matches no lane's literal filter).
// ok is false for a subject of another form (the older one without a
// tenant token, an output).
func laneKey(subj events.Subjects, subject string) (string, bool) {
	prefix := subj.InAll()
	prefix = prefix[:len(prefix)-1] // "<prefix>.in."
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok {
		return "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 4 {
		return "", false
	}
	return prefix + parts[0] + "." + parts[1] + ".*.*", true
}

// laned acknowledges an event of the main consumer that a lane delivers.
func (r *Runner) laned(d *delivery) {
	defer d.lane.release()
	o := Outcome{Worker: r.cfg.Consumer, Result: ResultLaned, Delivery: d.meta.NumDelivered}
	if err := d.msg.Ack(); err != nil {
		o.Err = err
		r.log.Debug("ack of a laned event failed", zap.Error(err))
	}
	r.obs.Delivered(o)
}

// deleted reports whether a lane no longer exists: err (its pull's, or
// nil) says so, or a look-up finds nothing.
func (s *laneSet) deleted(r *Runner, l *lane, err error) bool {
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
		return true
	}
	ctx, cancel := context.WithTimeout(l.ctx, 5*time.Second)
	defer cancel()
	_, cerr := r.js.Consumer(ctx, r.cfg.Stream, l.name)
	return errors.Is(cerr, jetstream.ErrConsumerNotFound)
}
