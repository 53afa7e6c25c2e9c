package runner

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
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
	// filters are the lane's filter subjects as last seen (laneSet.mu).
	filters []string
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
	for name, ci := range infos {
		filters := slices.Clone(ci.Config.FilterSubjects)
		if ci.Config.FilterSubject != "" {
			filters = append(filters, ci.Config.FilterSubject)
		}
		f := found{filters: filters, window: max(ci.Config.MaxAckPending, 1)}
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.pullCtx.Err() != nil {
		return
	}
	if s.running == nil {
		s.running = map[string]*lane{}
	}
	old := map[string]uint64{}
	if p := s.covered.Load(); p != nil {
		old = *p
	}
	covered := map[string]uint64{}
	for name, f := range seen {
		l := s.running[name]
		if l == nil && f.cons != nil {
			l = &lane{name: name, cons: f.cons, window: f.window, sem: make(chan struct{}, f.window)}
			l.ctx, l.stop = context.WithCancel(r.pullCtx)
			s.running[name] = l
			r.loops.Go(func() { r.loop(l) })
			r.log.Info("pulling lane", zap.String("lane", name), zap.Strings("filters", f.filters))
		}
		if l != nil {
			l.filters = f.filters
		}
	}
	for _, l := range s.running {
		for _, f := range l.filters {
			if from, ok := old[f]; ok {
				covered[f] = from
			} else {
				covered[f] = last
			}
		}
	}
	if !maps.Equal(old, covered) {
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
	old := map[string]uint64{}
	if p := s.covered.Load(); p != nil {
		old = *p
	}
	covered := map[string]uint64{}
	for _, o := range s.running {
		for _, f := range o.filters {
			if from, ok := old[f]; ok {
				covered[f] = from
			}
		}
	}
	s.covered.Store(&covered)
	r.log.Info("lane gone", zap.String("lane", l.name))
}

// delivers reports whether a running lane delivers the event of subject
// stored at seq (see WithLanes).
func (s *laneSet) delivers(r *Runner, subject string, seq uint64) bool {
	p := s.covered.Load()
	if p == nil || len(*p) == 0 {
		return false
	}
	a, err := r.cfg.Subjects.Parse(subject)
	if err != nil || a.Output || a.Legacy {
		return false
	}
	from, ok := (*p)[r.cfg.Subjects.InTypeTenant(a.Type, a.TenantID)]
	return ok && seq > from
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
