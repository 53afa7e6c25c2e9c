package runner

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/credurl"
	"github.com/engram-memory/engram/internal/runner/dlq"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// Handler processes one decoded event. nil acks it; see the package doc for
// what errors do. It must return when ctx is done.
type Handler func(ctx context.Context, ev events.Envelope) error

// Gate is a dependency the worker needs (model, store). While any gate is
// not ready the runner does not pull.
type Gate interface {
	Ready(ctx context.Context) error
}

// GateFunc adapts a function to Gate.
type GateFunc func(ctx context.Context) error

// Ready implements Gate.
func (f GateFunc) Ready(ctx context.Context) error { return f(ctx) }

// Processed keeps the processed-event records that make redelivery
// idempotent. memory.Store implements it.
type Processed interface {
	EventProcessed(ctx context.Context, p memory.ProjectRef, consumer, eventID string) (bool, error)
	MarkEventProcessed(ctx context.Context, p memory.ProjectRef, consumer, eventID string, ttl time.Duration) error
}

// Durable is a store that can say when its writes so far would survive
// the loss of one of its servers (the Redis store: on a replica, see
// redis.Store.Durable). It wraps memory.ErrUnavailable when they are not
// yet.
type Durable interface {
	Durable(ctx context.Context) error
}

// Failovers is a Durable store that counts the losses of a server its
// writes may have been on before they were durable (the Redis store: a
// cluster primary replaced by its promoted replica, redis.Store.Failovers).
// A handler that began before the count moved may have lost writes with
// that server: the runner runs it again (up to maxRedo times) before it
// acknowledges the event.
type Failovers interface {
	Failovers() uint64
}

// maxRedo bounds how many times a handler runs again for failovers during
// one delivery (each is a server lost while it ran).
const maxRedo = 3

// projectOf is where an event's processed record lives: its tenant's project.
func projectOf(ev events.Envelope) memory.ProjectRef {
	return memory.ProjectRef{Tenant: ev.TenantID, Project: ev.ProjectID}
}

// Result is what the runner did with a delivery.
type Result string

// The results.
const (
	ResultAcked        Result = "acked"         // handled
	ResultDuplicate    Result = "duplicate"     // already processed: acked without calling the handler
	ResultRetried      Result = "retried"       // transient failure: nak with delay
	ResultDeadLettered Result = "dead_lettered" // copied to the DLQ and terminated
	ResultInterrupted  Result = "interrupted"   // shutdown cut the handler short: nak, redelivered at once
	ResultExpired      Result = "expired"       // past its deadline on its first delivery (WithDeadline): acked, handler not called
	ResultWaiting      Result = "waiting"       // the handler said Wait: kept, handled again later, no delivery spent
	ResultUndurable    Result = "undurable"     // handled, but the store's writes are not durable yet (WithDurable): kept as a wait, acknowledged once they are
)

// Outcome describes one delivery, for metrics.
type Outcome struct {
	Worker   string
	Type     events.Type // empty when the event could not be decoded
	EventID  string
	Result   Result
	Delivery uint64        // 1 for the first delivery
	Latency  time.Duration // handler time (zero when it was not called)
	Delay    time.Duration // the nak delay, for ResultRetried
	Err      error         // the handler's (or the runner's) error, nil when acked
	// DeadLetterFailed: the event was to be dead-lettered but its letter
	// could not be stored (DLQ full or unreachable, and no parking or the
	// store refused it too); it was nak'ed with backoff instead (Result is
	// ResultRetried) and stays in the stream.
	DeadLetterFailed bool
	// Parked: the DLQ refused the letter and it was parked in the store
	// (WithParking; Result is ResultDeadLettered): the event is terminated,
	// the letter moves to the DLQ once it has room.
	Parked bool
}

// Observer receives what the runner does. The serve engineer adapts it to
// Prometheus. Calls come from many goroutines and must not block.
type Observer interface {
	// Delivered is called once per delivery.
	Delivered(o Outcome)
	// Paused is called when pulling pauses (cause set) or resumes (nil).
	Paused(worker string, cause error)
	// Captured is called for a message captured from the server's
	// max-deliveries advisory.
	Captured(worker string, l dlq.Letter)
}

type nopObserver struct{}

func (nopObserver) Delivered(Outcome)           {}
func (nopObserver) Paused(string, error)        {}
func (nopObserver) Captured(string, dlq.Letter) {}

// Compile-time checks.
var (
	_ Observer = nopObserver{}
	_ Gate     = GateFunc(nil)
)

// Config configures a runner.
type Config struct {
	Consumer string          // durable consumer name (events.ConsumerInjector, ...); required
	Stream   string          // stream of the consumer; default events.StreamIn
	Subjects events.Subjects // prefix of the events' subjects (checked against their bodies) and the DLQ subject
	// Concurrency is how many handlers run at once in this process; default 1.
	Concurrency int
	// MaxDeliver is the delivery on which a transient failure is
	// dead-lettered; a message delivered more often than this without a
	// result (the process died or the ack wait ran out each time) is
	// dead-lettered without calling the handler. The runner enforces it,
	// not the server: the topology's consumers have no server-side limit,
	// so that a message whose letter cannot be stored yet (DLQ full) is
	// redelivered until it can be, instead of leaving the consumer with no
	// letter. 0: take the consumer's server-side MaxDeliver (a consumer
	// made outside the topology); -1: unlimited.
	MaxDeliver int
	// BackoffBase and BackoffMax bound the transient redelivery delay:
	// base * 2^(delivery-1), at most max. Defaults 1s and 5m.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// UnavailableDelay is the nak delay of an Unavailable error; default 10s.
	UnavailableDelay time.Duration
	// GateInterval is how often gates are checked: while paused, and at most
	// this often while running; default 2s.
	GateInterval time.Duration
	// ProcessedTTL is how long processed-event records live; default 8 days
	// (longer than ENGRAM_IN keeps events).
	ProcessedTTL time.Duration
	// FetchWait bounds one pull request; default 5s.
	FetchWait time.Duration
	// HandlerTimeout bounds one handler call; default 15m. Past it the
	// handler's ctx is cancelled and the heartbeat stops (a stuck handler
	// cannot hold its message forever); the failure is transient.
	HandlerTimeout time.Duration
	// WaitMax caps the delay between two calls of a handler that said
	// Wait (the delay doubles from BackoffBase); default 15s. MaxWait bounds
	// a delivery's waits in all; past it a Wait is a transient failure;
	// default 1h.
	WaitMax time.Duration
	MaxWait time.Duration
	// ServerClockSkew is how far the NATS server's clock may run ahead of
	// this process's (firstDelivery); default 2s.
	ServerClockSkew time.Duration
	// CaptureMaxDeliveries watches the server's max-deliveries advisory;
	// default on (set DisableCapture to turn it off).
	DisableCapture bool
}

// ConfigFor returns the configuration of the named consumer of topo with
// the defaults for the rest.
func ConfigFor(topo events.Topology, consumer string) Config {
	c := Config{Consumer: consumer, Stream: topo.In.Name, Subjects: topo.Subjects()}
	if cc, ok := topo.Consumer(consumer); ok {
		c.MaxDeliver = cc.MaxDeliver
	}
	return c
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Stream == "" {
		c.Stream = events.StreamIn
	}
	if c.Concurrency == 0 {
		c.Concurrency = 1
	}
	def(&c.BackoffBase, time.Second)
	def(&c.BackoffMax, 5*time.Minute)
	def(&c.UnavailableDelay, 10*time.Second)
	def(&c.GateInterval, 2*time.Second)
	def(&c.ProcessedTTL, 8*24*time.Hour)
	def(&c.FetchWait, 5*time.Second)
	def(&c.HandlerTimeout, 15*time.Minute)
	def(&c.ServerClockSkew, 2*time.Second)
	def(&c.WaitMax, 15*time.Second)
	def(&c.MaxWait, time.Hour)
}

// Validate lists every problem of the configuration (after defaults).
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	bad := func(f string, a ...any) { errs = append(errs, fmt.Errorf("runner: "+f, a...)) }
	if c.Consumer == "" {
		bad("consumer name missing")
	}
	if err := events.ValidatePrefix(c.Subjects.Prefix); err != nil {
		errs = append(errs, fmt.Errorf("runner: %w", err))
	}
	if c.Concurrency < 1 {
		bad("concurrency %d: want >= 1", c.Concurrency)
	}
	if c.MaxDeliver < -1 {
		bad("max deliver %d: want > 0, 0 (the consumer's) or -1 (unlimited)", c.MaxDeliver)
	}
	for name, d := range map[string]time.Duration{"backoff base": c.BackoffBase, "backoff max": c.BackoffMax,
		"unavailable delay": c.UnavailableDelay, "gate interval": c.GateInterval,
		"processed ttl": c.ProcessedTTL, "fetch wait": c.FetchWait, "handler timeout": c.HandlerTimeout, "server clock skew": c.ServerClockSkew,
		"wait max": c.WaitMax, "max wait": c.MaxWait} {
		if d < 0 {
			bad("%s %v is negative", name, d)
		}
	}
	if c.BackoffMax < c.BackoffBase {
		bad("backoff max %v below backoff base %v", c.BackoffMax, c.BackoffBase)
	}
	if c.FetchWait > 0 && c.FetchWait < 100*time.Millisecond {
		bad("fetch wait %v: want at least 100ms", c.FetchWait)
	}
	return errors.Join(errs...)
}

// Backoff is the transient redelivery delay after the given delivery
// (1-based): base * 2^(delivery-1), capped at max.
func (c Config) Backoff(delivery uint64) time.Duration {
	c.setDefaults()
	d := c.BackoffBase
	for i := uint64(1); i < delivery && d < c.BackoffMax; i++ {
		d *= 2
	}
	return min(d, c.BackoffMax)
}

// Option adds a dependency to a runner.
type Option func(*Runner)

// WithLogger logs pauses, panics and failures to write the DLQ or to ack.
func WithLogger(l *zap.Logger) Option { return func(r *Runner) { r.log = l } }

// WithGates adds gates checked before pulling.
func WithGates(g ...Gate) Option { return func(r *Runner) { r.gates = append(r.gates, g...) } }

// WithProcessed enables processed-event records: an event already processed
// by this consumer is acked without calling the handler; a handled one is
// recorded.
func WithProcessed(p Processed) Option { return func(r *Runner) { r.processed = p } }

// WithDurable makes the runner acknowledge an event only once d says the
// store's writes are durable (see Durable): an event acknowledged while
// its effects could still be lost with a server is an event dropped. A
// handled event whose writes are not durable yet waits (Wait: no delivery
// spent) and is acknowledged, without calling the handler again, once
// they are.
//
// A d that also counts failovers (Failovers) gets a handler that ran while
// the count moved run again, as its writes may be gone with a server.
func WithDurable(d Durable) Option {
	return func(r *Runner) {
		r.durable = d
		r.failovers, _ = d.(Failovers)
	}
}

// WithObserver reports outcomes, pauses and captures.
func WithObserver(o Observer) Option { return func(r *Runner) { r.obs = o } }

// WithFairness makes the runner hold up to window messages (0: the
// consumer's MaxAckPending) instead of one per handler, and hand them to
// its handlers fairly across senders: round-robin over tenants, then their
// projects, then their sessions, oldest first within a session (see
// queue). A flood from one sender then waits behind everyone else's next
// event instead of the other way round. Messages held longer than a third
// of the ack wait are kept alive (InProgress).
func WithFairness(window int) Option {
	return func(r *Runner) { r.fair, r.window = true, window }
}

// WithDeadline gives the runner each event's deadline (zero: none): an
// event past it on its first delivery is acknowledged without calling the
// handler (ResultExpired), as soon as it is pulled or while it waits in
// the queue, before any store work; expired reports each (may be nil). A
// redelivery goes to the handler even when late: an earlier delivery may
// have done part of the work. The injector's deadline is the turn's reply
// deadline: a platform that went on without memory needs no block.
func WithDeadline(deadline func(events.Envelope) time.Time, expired func(events.Envelope)) Option {
	return func(r *Runner) { r.deadline, r.onExpired = deadline, expired }
}

// WithParking stores dead letters through p (one per process): a letter
// the DLQ refuses is parked in the store and the event terminated, so a
// poison event never holds the consumer's ack-pending slots while the DLQ
// is full or unreachable. Without it such an event is nak'ed with backoff
// and stays in the stream (holding its slot) until the DLQ takes its
// letter.
func WithParking(p *dlq.Parking) Option { return func(r *Runner) { r.parking = p } }

// Runner pulls one durable consumer and runs a handler on each message.
type Runner struct {
	js         jetstream.JetStream
	cfg        Config
	h          Handler
	log        *zap.Logger
	gates      []Gate
	processed  Processed
	durable    Durable   // WithDurable: acknowledge only once the store's writes are durable
	failovers  Failovers // the durable store's failover count, when it keeps one
	obs        Observer
	dlq        *dlq.Writer
	parking    *dlq.Parking
	fair       bool
	window     int // messages held at once (queued + handled); 0 until Start
	deadline   func(events.Envelope) time.Time
	onExpired  func(events.Envelope)
	queue      *queue
	keeperDone chan struct{}
	// Deliveries whose handler said Wait, until they are due again (the
	// keeper queues them; they hold no window slot meanwhile).
	waitMu  sync.Mutex
	waiting []*delivery
	// The connection's reconnects as last seen, and when they were seen
	// to change (firstDelivery).
	epochMu    sync.Mutex
	reconnects uint64
	epoch      time.Time

	ackWait    time.Duration
	maxDeliver int
	watcher    *dlq.Watcher

	// main is the runner's consumer; lanes (WithLanes) are more
	// consumers feeding the same queue and handlers.
	main       *lane
	lanes      laneSet
	pullCtx    context.Context
	stopPull   context.CancelFunc
	handlerCtx context.Context
	cancelWork context.CancelFunc
	loops      sync.WaitGroup // the pull loops: main's and the lanes'
	// Handlers run on Concurrency long-lived workers rather than a
	// goroutine per message: a handler's call chain (store client, JSON)
	// outgrows a new goroutine's stack, and a worker keeps the stack it
	// grew (on a Redis turn of the injector benchmark, stack growth fell
	// from 5.2% to 3.8% of the process' CPU). The loop puts what it pulls
	// in queue; workers take from it. Stop closes the queue once the loop
	// has ended, naks what no worker took, and waits for the workers.
	workers sync.WaitGroup

	mu          sync.Mutex
	started     bool
	stopped     bool
	paused      bool
	pauseCause  error
	holdUntil   time.Time // Unavailable: do not resume before
	cancelFetch map[*lane]context.CancelFunc
	lastGateOK  time.Time
	stopOnce    sync.Once
	stopErr     error
	runningWork int
}

// New returns a runner of h on cfg.Consumer. Start begins pulling.
func New(js jetstream.JetStream, cfg Config, h Handler, opts ...Option) (*Runner, error) {
	if js == nil || h == nil {
		return nil, errors.New("runner: nil JetStream or handler")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	r := &Runner{js: js, cfg: cfg, h: h, log: zap.NewNop(), obs: nopObserver{}}
	for _, o := range opts {
		o(r)
	}
	r.log = r.log.With(zap.String("worker", cfg.Consumer))
	if r.parking != nil {
		r.dlq = r.parking.Writer()
	} else {
		r.dlq = dlq.NewWriter(js, cfg.Subjects)
	}
	return r, nil
}

// Start looks the consumer up (it must exist: events.EnsureTopology), starts
// the max-deliveries watcher, the handler workers and the pull loop, and
// returns.
func (r *Runner) Start(ctx context.Context) error {
	r.mu.Lock()
	if r.started || r.stopped {
		r.mu.Unlock()
		return errors.New("runner: already started or stopped")
	}
	r.started = true
	r.mu.Unlock()
	if err := r.start(ctx); err != nil {
		r.mu.Lock()
		r.started = false
		r.mu.Unlock()
		return err
	}
	return nil
}

func (r *Runner) start(ctx context.Context) error {
	cons, err := r.js.Consumer(ctx, r.cfg.Stream, r.cfg.Consumer)
	if err != nil {
		return fmt.Errorf("runner: consumer %s on %s: %w", r.cfg.Consumer, r.cfg.Stream, err)
	}
	info := cons.CachedInfo()
	r.main = &lane{name: r.cfg.Consumer, cons: cons}
	r.ackWait = info.Config.AckWait
	if r.ackWait <= 0 {
		r.ackWait = 30 * time.Second // the server's default
	}
	r.maxDeliver = r.cfg.MaxDeliver
	if r.maxDeliver == 0 {
		r.maxDeliver = info.Config.MaxDeliver
	}
	// The advisory only comes from a server-side limit, which the
	// topology's consumers do not set (see Config.MaxDeliver).
	if !r.cfg.DisableCapture && info.Config.MaxDeliver > 0 {
		w, err := dlq.Watch(r.js.Conn(), r.js, r.dlq, r.cfg.Stream, r.cfg.Consumer,
			func(l dlq.Letter) {
				r.log.Warn("message exhausted its deliveries; captured into the DLQ",
					zap.Uint64("stream_seq", l.Sequence), zap.String("subject", l.Subject))
				r.obs.Captured(r.cfg.Consumer, l)
			},
			func(err error) { r.log.Error("max-deliveries capture failed", zap.Error(err)) })
		if err != nil {
			return err
		}
		r.watcher = w
	}
	switch {
	case !r.fair:
		r.window = r.cfg.Concurrency // pull only for a free handler
	case r.window <= 0:
		r.window = info.Config.MaxAckPending
	}
	r.window = max(r.window, r.cfg.Concurrency)
	r.main.window = r.window
	r.main.sem = make(chan struct{}, r.window)
	r.queue = newQueue(r.fair)
	r.reconnects, r.epoch = r.js.Conn().Stats().Reconnects, time.Now()
	r.pullCtx, r.stopPull = context.WithCancel(context.Background())
	r.handlerCtx, r.cancelWork = context.WithCancel(context.Background())
	r.main.ctx = r.pullCtx
	for range r.cfg.Concurrency {
		r.workers.Go(func() {
			for {
				d, ok := r.queue.pop()
				if !ok {
					return
				}
				if d.expired(time.Now()) {
					r.expire(d)
				} else {
					r.handle(d)
				}
				r.queue.release(d)
			}
		})
	}
	r.keeperDone = make(chan struct{})
	go r.keeper()
	r.loops.Go(func() { r.loop(r.main) })
	if r.lanes.names != nil {
		r.lanes.refresh(ctx, r)
		r.loops.Go(r.laneKeeper)
	}
	return nil
}

// keeper drops queued events that pass their deadline and keeps alive the
// ones that wait long, until the loop ends.
func (r *Runner) keeper() {
	defer close(r.keeperDone)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	keepAlive := max(r.ackWait/3, 10*time.Millisecond)
	lastAlive := time.Now()
	for {
		select {
		case <-r.pullCtx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		r.noteReconnects(now)
		if r.deadline != nil {
			for _, d := range r.queue.purge(now) {
				r.expire(d)
			}
		}
		r.requeueDue(now)
		if now.Sub(lastAlive) >= keepAlive/2 {
			lastAlive = now
			stale := append(r.queue.stale(now.Add(-keepAlive), now), r.staleWaiting(now.Add(-keepAlive), now)...)
			for _, d := range stale {
				if err := d.msg.InProgress(); err != nil {
					r.log.Debug("in-progress of a held message failed", zap.Error(err))
				}
			}
		}
	}
}

// wait keeps a delivery whose handler said Wait; its slot is freed (by
// handle) and it comes back slotless when the keeper queues it again.
func (r *Runner) wait(d *delivery, herr error, o *Outcome) {
	now := time.Now()
	if d.waitSince.IsZero() {
		d.waitSince = now
	}
	// Its handler ran: past its deadline it is no longer work nobody did
	// (an injector's recorded turn waits to publish its answer), so the
	// keeper must hand it back, not drop it as expired.
	d.first = false
	d.waits++
	delay := r.cfg.BackoffBase
	for i := 1; i < d.waits && delay < r.cfg.WaitMax; i++ {
		delay *= 2
	}
	delay = min(delay, r.cfg.WaitMax)
	// d.queued stays the time of its last keep-alive (or its pull): the
	// keeper sends InProgress once it is a third of the ack wait old.
	// Setting it to now here, without an InProgress, kept a delivery that
	// waits at most WaitMax (15 s) between calls from ever looking stale
	// to the keeper under a longer ack wait (the compactor's minute), and
	// the server redelivered it after its ack wait: a second copy, a
	// delivery spent (TestLongWaitIsKeptAlive).
	d.due, d.slotless = now.Add(delay), true
	o.Result, o.Delay = ResultWaiting, delay
	lvl := zap.DebugLevel
	if waited := now.Sub(d.waitSince); waited >= time.Minute && waited-delay < time.Minute {
		lvl = zap.WarnLevel // once, when the wait passes a minute
	}
	if ce := r.log.Check(lvl, "event waits"); ce != nil {
		ce.Write(zap.String("event_id", o.EventID), zap.Uint64("stream_seq", d.meta.Sequence.Stream),
			zap.Duration("waited", now.Sub(d.waitSince)), zap.Duration("next", delay), zap.Error(herr))
	}
	r.waitMu.Lock()
	r.waiting = append(r.waiting, d)
	r.waitMu.Unlock()
}

// requeueDue queues the waiting deliveries that are due. They hold no
// window slot (slotless): the window bounds what is pulled, and a waiting
// message was pulled already (the consumer's max ack pending still bounds
// everything held).
func (r *Runner) requeueDue(now time.Time) {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	keep := r.waiting[:0]
	for _, d := range r.waiting {
		if now.Before(d.due) {
			keep = append(keep, d)
			continue
		}
		r.queue.push(d)
	}
	clear(r.waiting[len(keep):])
	r.waiting = keep
}

// staleWaiting returns the waiting deliveries last kept alive before
// cutoff, marked kept alive at now.
func (r *Runner) staleWaiting(cutoff, now time.Time) []*delivery {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	var out []*delivery
	for _, d := range r.waiting {
		if d.queued.Before(cutoff) {
			d.queued = now
			out = append(out, d)
		}
	}
	return out
}

// expire acknowledges an event past its deadline on its first delivery
// without calling the handler, and frees its slot.
func (r *Runner) expire(d *delivery) {
	if !d.slotless {
		defer d.lane.release()
	}
	o := Outcome{Worker: r.cfg.Consumer, Type: d.ev.Type, EventID: d.ev.ID, Result: ResultExpired, Delivery: d.meta.NumDelivered}
	if err := d.msg.Ack(); err != nil {
		o.Err = fmt.Errorf("runner: ack: %w", err)
		r.log.Warn("ack failed", zap.Error(err), zap.String("event_id", d.ev.ID))
	}
	if r.onExpired != nil {
		r.onExpired(d.ev)
	}
	r.obs.Delivered(o)
}

// Stop stops pulling and waits for the handlers in flight until ctx is
// done; then it cancels their context and waits for them to return (the
// interrupted messages are nak'ed for immediate redelivery). It returns
// ctx's error when the deadline cut handlers short.
func (r *Runner) Stop(ctx context.Context) error {
	r.stopOnce.Do(func() {
		r.mu.Lock()
		started := r.started
		r.stopped = true
		r.mu.Unlock()
		if !started {
			return
		}
		r.stopPull()
		r.loops.Wait()
		if r.keeperDone != nil {
			<-r.keeperDone
		}
		// Nothing more is queued. What no worker took yet goes back to
		// the stream at once, for another replica (or the next start).
		for _, d := range r.queue.drain() {
			if err := d.msg.Nak(); err != nil {
				r.log.Debug("nak of a queued message failed", zap.Error(err))
			}
			if !d.slotless {
				d.lane.release()
			}
		}
		r.waitMu.Lock()
		for _, d := range r.waiting { // they hold no slot
			if err := d.msg.Nak(); err != nil {
				r.log.Debug("nak of a waiting message failed", zap.Error(err))
			}
		}
		r.waiting = nil
		r.waitMu.Unlock()
		r.queue.close()
		done := make(chan struct{})
		go func() { r.workers.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			r.stopErr = fmt.Errorf("runner %s: stop: handlers cut short: %w", r.cfg.Consumer, ctx.Err())
			r.cancelWork()
			<-done
		}
		r.cancelWork()
		if r.watcher != nil {
			r.watcher.Stop()
		}
	})
	return r.stopErr
}

// Status is a snapshot of the runner.
type Status struct {
	Running  bool
	Paused   bool
	Cause    error // why paused
	InFlight int   // handlers running
	Queued   int   // pulled, waiting for a handler (WithFairness)
	Waiting  int   // held after their handler said Wait
}

// Status returns the runner's state (for readiness and `engram status`).
func (r *Runner) Status() Status {
	queued := 0
	if r.queue != nil {
		queued = r.queue.len()
	}
	r.waitMu.Lock()
	waiting := len(r.waiting)
	r.waitMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	return Status{Running: r.started && !r.stopped, Paused: r.paused, Cause: r.pauseCause, InFlight: r.runningWork,
		Queued: queued, Waiting: waiting}
}

// loop pulls while the gates are ready and a handler slot is free.
func (r *Runner) loop(l *lane) {
	for l.ctx.Err() == nil {
		// At least one free slot, then every other free one; the gates are
		// checked after a slot frees (a handler may just have paused us).
		select {
		case l.sem <- struct{}{}:
		case <-l.ctx.Done():
			return
		}
		if !r.waitReady() || l.ctx.Err() != nil {
			l.release()
			return
		}
		n := 1
	fill:
		for n < min(l.window, maxFetch) {
			select {
			case l.sem <- struct{}{}:
				n++
			default:
				break fill
			}
		}
		got, err := r.fetch(l, n)
		for i := got; i < n; i++ {
			l.release()
		}
		if err != nil && l.ctx.Err() == nil {
			// A lane's pull fails: is the lane gone? A pull to a deleted
			// consumer waiting on the server gets "consumer deleted", a
			// new one only "no responders": ask.
			if l != r.main && r.lanes.deleted(r, l, err) {
				r.lanes.gone(r, l) // its tenants are the main consumer's again
				return
			}
			r.log.Warn("pull failed", zap.String("consumer", l.name), zap.Error(err))
			r.sleep(time.Second)
		}
	}
}

// maxFetch caps one pull request. The server sends a request's messages
// back to back on the process's connection, and the connection carries
// every consumer's: a request for 16,384 (the injector's window) under a
// flood put up to 5 MB of one tenant's turns in front of another tenant's
// lane delivery, whose reply then waited for the client to read through
// them. Smaller requests interleave the consumers on the connection; the
// window, not the request, bounds what is held.
const maxFetch = 256

// fetch pulls up to n messages and hands each to a worker. It returns how
// many it handed over.
//
// The pull request expires on the server (after about 90% of FetchWait),
// and the client reads its answers until the server says so (a 408 status,
// which follows every message of the request on the connection): the
// fetch's context has no deadline, only the stop and a pause cancel it.
// With a deadline (FetchWait) the client gave up on its own clock, 10%
// after the server's expiry, and a message the server had delivered to
// the request just before was dropped with the subscription: it stayed
// pending on the server, unseen, until the consumer's ack wait ran out,
// and each such loss spent a delivery. A process starved of CPU for a
// moment at a request's end lost one so (most likely what kept the
// TypeScript client's test waiting 60 s, the compactor's ack wait, for a
// compaction, with nothing in serve's log). Measured in this package's harness
// with GOMAXPROCS=1 and busy goroutines: at FetchWait 100 ms 29 of 100
// events lost deliveries before, 0 after; at FetchWait 5 s with 40 busy
// goroutines 4 of 25 before, 0 of 25 after. TestPullWaitsForTheServersExpiry.
// The library's own guard still applies: a pull that gets nothing for its
// expiry plus a second (counted from its start or its last message) ends,
// so a client that reads a message more than a second late can still drop
// it (with the deadline, half a second late was enough at FetchWait 5 s,
// and 10 ms at the 100 ms of the measurement above).
func (r *Runner) fetch(l *lane, n int) (int, error) {
	fctx, cancel := context.WithCancel(l.ctx)
	defer cancel()
	r.mu.Lock()
	if r.cancelFetch == nil {
		r.cancelFetch = map[*lane]context.CancelFunc{}
	}
	r.cancelFetch[l] = cancel // a pause ends the pull request early
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.cancelFetch, l)
		r.mu.Unlock()
	}()
	// The request's expiry comes from a context with FetchWait's deadline
	// (FetchContext sets it from a deadline; FetchMaxWait cannot be
	// combined with a context); the second FetchContext replaces the
	// context and keeps that expiry, since fctx has no deadline.
	expiry, stopExpiry := context.WithTimeout(context.Background(), r.cfg.FetchWait)
	defer stopExpiry()
	batch, err := l.cons.Fetch(n, jetstream.FetchContext(expiry), jetstream.FetchContext(fctx))
	if err != nil {
		if fctx.Err() != nil {
			return 0, nil
		}
		return 0, err
	}
	got := 0
	for msg := range batch.Messages() {
		got++
		r.intake(l, msg)
	}
	if err := batch.Error(); err != nil && fctx.Err() == nil &&
		!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) &&
		!errors.Is(err, jetstream.ErrNoMessages) {
		return got, err
	}
	return got, nil
}

// waitReady blocks while paused or a gate is not ready. It returns false
// when the runner stops.
func (r *Runner) waitReady() bool {
	for {
		if r.pullCtx.Err() != nil {
			return false
		}
		r.mu.Lock()
		hold := time.Until(r.holdUntil)
		needCheck := r.paused || time.Since(r.lastGateOK) >= r.cfg.GateInterval
		r.mu.Unlock()
		if hold > 0 {
			if !r.sleep(hold) {
				return false
			}
			continue
		}
		if !needCheck {
			return true
		}
		err := r.checkGates()
		if err == nil {
			r.setPaused(nil)
			return true
		}
		r.setPaused(err)
		if !r.sleep(r.cfg.GateInterval) {
			return false
		}
	}
}

func (r *Runner) checkGates() error {
	if len(r.gates) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(r.pullCtx, max(r.cfg.GateInterval, time.Second))
	defer cancel()
	var errs []error
	for _, g := range r.gates {
		if err := g.Ready(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// setPaused records a pause (cause != nil) or a resume, reporting
// transitions once.
func (r *Runner) setPaused(cause error) {
	r.mu.Lock()
	was := r.paused
	r.paused = cause != nil
	r.pauseCause = cause
	if cause == nil {
		r.lastGateOK = time.Now()
	}
	r.mu.Unlock()
	switch {
	case cause != nil && !was:
		r.log.Warn("dependency unavailable; pausing", zap.Error(cause))
		r.obs.Paused(r.cfg.Consumer, cause)
	case cause == nil && was:
		r.log.Info("dependencies ready; resuming")
		r.obs.Paused(r.cfg.Consumer, nil)
	}
}

// pauseFor is called when a handler reports Unavailable: pull nothing for
// at least the gate interval, then resume only when the gates are ready.
func (r *Runner) pauseFor(cause error) {
	r.mu.Lock()
	r.holdUntil = time.Now().Add(r.cfg.GateInterval)
	for _, cancel := range r.cancelFetch {
		cancel()
	}
	r.mu.Unlock()
	r.setPaused(cause)
}

// sleep waits d or until the runner stops (false).
func (r *Runner) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.pullCtx.Done():
		return false
	}
}

// intake queues a pulled message. When the runner schedules fairly or
// knows deadlines it decodes the message first (the sender and the
// deadline are in the body), and an event already past its deadline is
// acknowledged at once: a flood of late turns costs a decode and an ack
// each, no store work and no place in the queue.
func (r *Runner) intake(l *lane, msg jetstream.Msg) {
	d := &delivery{msg: msg, lane: l}
	d.meta, d.metaErr = msg.Metadata()
	if l == r.main && d.metaErr == nil && r.lanes.delivers(r, msg.Subject(), d.meta.Sequence.Stream) {
		r.laned(d)
		return
	}
	d.queued, d.from = time.Now(), r.senderOf(msg.Subject())
	if d.metaErr == nil && (r.fair || r.deadline != nil) {
		d.first = r.firstDelivery(d.meta, d.queued)
		r.decode(d)
		if d.evErr == nil && r.deadline != nil {
			d.deadline = r.deadline(d.ev)
			if d.expired(d.queued) {
				r.expire(d)
				return
			}
		}
	}
	r.queue.push(d)
}

// firstDelivery reports whether nothing can have been done for a message
// yet: its first delivery, stored after this connection's latest
// (re)connect. The delivery count alone is not enough: a server that
// restarts (kill -9, or the embedded store's recovery, which forces a
// reconnect) may have lost its consumer state and deliver a message handled
// before as a first delivery; the chaos suite saw a turn whose block was
// recorded before a NATS kill come back with delivery count 1 and, dropped
// as late, never get its injection_ready. Every server restart makes this
// connection reconnect, so a message stored after the latest (re)connect
// (Config.ServerClockSkew later, for the server's clock) was delivered only
// by the server that counts its deliveries now; what was stored before the
// runner started goes to the handler too. Called from the loop goroutine
// only.
func (r *Runner) firstDelivery(meta *jetstream.MsgMetadata, now time.Time) bool {
	if meta.NumDelivered != 1 {
		return false
	}
	epoch := r.noteReconnects(now)
	return meta.Timestamp.After(epoch.Add(r.cfg.ServerClockSkew))
}

// noteReconnects moves the epoch to now when the connection reconnected
// since the last look, and returns it. The keeper looks every 50 ms, so the
// epoch follows a reconnect closely even while nothing is pulled.
func (r *Runner) noteReconnects(now time.Time) time.Time {
	n := r.js.Conn().Stats().Reconnects
	r.epochMu.Lock()
	defer r.epochMu.Unlock()
	if n != r.reconnects {
		r.reconnects, r.epoch = n, now
	}
	return r.epoch
}

// senderOf is the tenant, project and session a subject names; a subject
// that does not parse is a sender of its own.
func (r *Runner) senderOf(subject string) sender {
	a, err := r.cfg.Subjects.Parse(subject)
	if err != nil {
		return sender{"\x00unparsable"}
	}
	return sender{a.TenantID, a.ProjectID, a.SessionID}
}

// decode reads the event and checks it against its subject.
func (r *Runner) decode(d *delivery) {
	d.decoded = true
	d.ev, d.evErr = events.Decode(d.msg.Data())
	if d.evErr == nil {
		// The subject is what the bus's permissions vouch for; the body
		// must say the same (type, project, session).
		d.evErr = r.cfg.Subjects.Check(d.msg.Subject(), d.ev)
	}
}

// handle runs one message to its outcome and frees its slot.
func (r *Runner) handle(d *delivery) {
	if !d.slotless {
		defer d.lane.release()
	}
	r.mu.Lock()
	r.runningWork++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.runningWork--
		r.mu.Unlock()
	}()

	msg := d.msg
	o := Outcome{Worker: r.cfg.Consumer}
	meta, err := d.meta, d.metaErr
	if err != nil {
		// Not a JetStream message: nothing to ack.
		o.Result, o.Err = ResultRetried, fmt.Errorf("runner: message metadata: %w", err)
		r.log.Error("message without JetStream metadata", zap.Error(err))
		r.obs.Delivered(o)
		return
	}
	o.Delivery = meta.NumDelivered

	if !d.decoded {
		r.decode(d)
	}
	ev, err := d.ev, d.evErr
	if err != nil {
		o.Err = err
		r.deadLetter(msg, meta, "invalid event: "+err.Error(), &o)
		r.obs.Delivered(o)
		return
	}
	o.Type, o.EventID = ev.Type, ev.ID
	if meta.NumDelivered > 1 && d.waits == 0 {
		// A redelivery: after a nak, an ack wait that ran out or a server
		// restart. At debug, so that a delay no other line explains (a
		// delivery lost on its way, a kept message whose ack wait ran out)
		// shows in a debug log.
		if ce := r.log.Check(zap.DebugLevel, "event delivered again"); ce != nil {
			ce.Write(zap.String("event_id", ev.ID), zap.Uint64("stream_seq", meta.Sequence.Stream), zap.Uint64("delivery", meta.NumDelivered))
		}
	}

	ctx := r.handlerCtx
	var digest string
	if r.processed != nil {
		if digest, err = digestOf(ev); err != nil {
			o.Err = err
			r.deadLetter(msg, meta, "invalid event: "+err.Error(), &o)
			r.obs.Delivered(o)
			return
		}
		// Bounded as mark is: it runs before the handler's heartbeats,
		// on the handler context, which has no deadline.
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		state, owed, err := r.lookup(lctx, ev.ID, digest, projectOf(ev), r.failovers != nil && !d.redoPending)
		cancel()
		if err != nil {
			o.Err = fmt.Errorf("runner: processed-event lookup: %w", err)
			r.retry(msg, meta, o.Err, &o)
			r.obs.Delivered(o)
			return
		}
		if state == seenOther {
			// Acknowledging it would drop a turn nobody handled.
			o.Err = fmt.Errorf("runner: event id %q reused: this consumer handled an event with that id and other content", ev.ID)
			r.deadLetter(msg, meta, fmt.Sprintf("event id reused with other content: %s handled an event with id %q before, "+
				"and this one differs (a publisher must give every event its own id; republish this one with a new id)",
				r.cfg.Consumer, ev.ID), &o)
			r.obs.Delivered(o)
			return
		}
		if owed > 0 {
			// A run again for a failover is owed and not done: noted by an
			// earlier delivery that went back to the stream before it
			// succeeded (its worker stopped, its wait ran past MaxWait),
			// or by this one while it waited for durability. It is this
			// delivery's now: the next failover's is not noted yet
			// (noteOwed), and the count starts again when it runs.
			d.redone, d.redoPending, d.owedNoted, d.counted = owed, true, false, false
			r.log.Warn("a run again for a store failover is owed: handled again",
				zap.String("event_id", ev.ID), zap.Int("time", owed))
		}
		if state == seenSame {
			stop := r.keepAlive(d, ev.ID)
			undurable := r.notDurable(d, &o)
			stop()
			if undurable {
				r.obs.Delivered(o)
				return
			}
			if !d.redoPending && !r.lostWrites(d) {
				o.Result = ResultDuplicate
				r.ackDuplicate(msg, meta, ev, &o)
				r.obs.Delivered(o)
				return
			}
			// Handled by this delivery, then waited for durability, and
			// a failover came meanwhile: handled again below.
		}
	}

	if r.maxDeliver > 0 && meta.NumDelivered > uint64(r.maxDeliver) {
		// Earlier deliveries ended without a result (crash, ack wait), or
		// their letter could not be stored: give up now, letter first. (A
		// processed event whose ack was lost was acked above.)
		o.Err = fmt.Errorf("runner: delivered %d times, limit %d", meta.NumDelivered, r.maxDeliver)
		r.deadLetter(msg, meta, fmt.Sprintf("max deliveries exceeded: delivered %d times (limit %d) without a result",
			meta.NumDelivered, r.maxDeliver), &o)
		r.obs.Delivered(o)
		return
	}

run:
	if r.failovers != nil {
		d.failovers, d.counted = r.failovers.Failovers(), true
	}
	start := time.Now()
	herr := r.call(ctx, d, ev)
	o.Latency = time.Since(start)
	o.Err = herr

	switch {
	case herr == nil:
		o.Result = ResultAcked
		// The handler's heartbeat has stopped; the processed record and
		// Durable can take longer than what is left of the ack wait.
		stop := r.keepAlive(d, ev.ID)
		if r.processed != nil {
			mctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := r.mark(mctx, ev.ID, digest, projectOf(ev)); err != nil {
				// The effects are done; a redelivery would rely on the
				// handler's own idempotency. Ack anyway.
				o.Err = fmt.Errorf("runner: mark processed: %w", err)
				r.log.Warn("could not record processed event", zap.Error(err), zap.String("event_id", ev.ID))
			}
			cancel()
		}
		undurable := r.notDurable(d, &o)
		stop()
		if undurable {
			break
		}
		if r.lostWrites(d) {
			goto run
		}
		r.redone(d)
		if err := msg.Ack(); err != nil {
			o.Err = fmt.Errorf("runner: ack: %w", err)
			r.log.Warn("ack failed", zap.Error(err), zap.String("event_id", ev.ID))
		}
	case IsPermanent(herr):
		r.deadLetter(msg, meta, herr.Error(), &o)
	case r.handlerCtx.Err() != nil && errors.Is(herr, context.Canceled):
		o.Result = ResultInterrupted
		if err := msg.Nak(); err != nil {
			r.log.Warn("nak failed", zap.Error(err), zap.String("event_id", ev.ID))
		}
	case (IsWait(herr) || d.redoPending) && (d.waitSince.IsZero() || time.Since(d.waitSince) < r.cfg.MaxWait) && r.pullCtx.Err() == nil:
		// A handler run again for a failover that fails waits here, as
		// the same delivery: back on the stream, its processed record
		// (from the first run) would get it acknowledged as handled.
		r.wait(d, herr, &o)
	default:
		r.retry(msg, meta, herr, &o)
	}
	r.obs.Delivered(o)
}

// notDurable reports whether the store's writes are not durable yet
// (WithDurable), in which case the delivery was kept waiting (or, when the
// runner stops or it has waited Config.MaxWait, nak'ed) and o says so: it
// comes back as a handled event (processed records) or, without them,
// through the handler again, and is acknowledged once they are.
func (r *Runner) notDurable(d *delivery, o *Outcome) bool {
	if r.durable == nil {
		return false
	}
	// Bounded by a third of the ack wait: the handler's heartbeat has
	// stopped, and the message must not be delivered again meanwhile.
	ctx, cancel := context.WithTimeout(context.Background(), min(durableTimeout, max(r.ackWait/3, time.Second)))
	err := r.durable.Durable(ctx)
	cancel()
	if err == nil {
		return false
	}
	err = fmt.Errorf("runner: the store's writes are not durable yet: %w", err)
	o.Err = err
	// A failover seen here (the store counts it when it lists its
	// primaries, which Durable does) calls for a run again once the
	// store is durable; recorded as owed now, since the delivery may
	// go back to the stream meanwhile (a stop, MaxWait).
	r.noteOwed(d)
	if (d.waitSince.IsZero() || time.Since(d.waitSince) < r.cfg.MaxWait) && r.pullCtx.Err() == nil {
		r.wait(d, err, o)
	} else {
		// Stopping, or waited MaxWait: back to the stream, never to the
		// dead letters (its handling is done; only its durability is not).
		o.Delay = r.cfg.UnavailableDelay
		if nerr := d.msg.NakWithDelay(o.Delay); nerr != nil {
			r.log.Warn("nak failed", zap.Error(nerr), zap.String("event_id", o.EventID))
		}
		r.log.Warn("event handled, its writes not durable yet: delivered again later", zap.String("event_id", o.EventID),
			zap.Duration("delay", o.Delay), zap.Error(err))
	}
	o.Result = ResultUndurable
	return true
}

// durableTimeout bounds a Durable call (the Redis store's own wait is
// shorter: DefaultReplicaWait).
const durableTimeout = 30 * time.Second

// lostWrites reports whether a failover the durable store counted came
// after d's handler began (so its writes may be gone with a server) and d
// may still run again for it (maxRedo); it notes the run to come
// (d.redoPending, until a run of the handler succeeds and is durable).
func (r *Runner) lostWrites(d *delivery) bool {
	if !d.counted || r.failovers.Failovers() == d.failovers {
		d.redoPending = false
		return false
	}
	if d.redone >= maxRedo {
		r.log.Warn("store failovers while the event was handled: acknowledged without handling it again",
			zap.String("event_id", d.ev.ID), zap.Int("handled again", d.redone))
		return false
	}
	r.noteOwed(d) // owed even if this worker stops before the run again succeeds (processed.go)
	d.redone++
	d.redoPending, d.owedNoted = true, false
	r.log.Warn("a store server was replaced while the event was handled: handled again (its writes may be lost with it)",
		zap.String("event_id", d.ev.ID), zap.Int("time", d.redone))
	return true
}

// noteOwed records the run again that a failover counted since d's
// handler began calls for (the (d.redone+1)-th) as owed, once, when the
// runner keeps processed records.
func (r *Runner) noteOwed(d *delivery) {
	if r.processed == nil || r.failovers == nil || !d.counted || d.owedNoted || d.redone >= maxRedo ||
		r.failovers.Failovers() == d.failovers {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.markRedo(ctx, d.ev.ID, d.redone+1, projectOf(d.ev), false); err != nil {
		r.log.Warn("could not record the run again owed for a failover", zap.Error(err), zap.String("event_id", d.ev.ID))
		return
	}
	d.owedNoted = true
}

// redone records that d's last run again for failovers succeeded (before
// its acknowledgement: a redelivery then owes none).
func (r *Runner) redone(d *delivery) {
	if d.redone == 0 || r.processed == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.markRedo(ctx, d.ev.ID, d.redone, projectOf(d.ev), true); err != nil {
		r.log.Warn("could not record the run again for a failover as done", zap.Error(err), zap.String("event_id", d.ev.ID))
	}
}

// keepAlive keeps d from being delivered again while the work after its
// handler runs (the processed record, Durable: up to 10 s and a third of
// the ack wait): an InProgress a third of the ack wait after its last
// keep-alive (d.queued: its pull, the keeper's or the handler's
// heartbeat), then every third, until stop is called. A quick step sends
// none. Before it, a redelivery in that gap did the work again.
func (r *Runner) keepAlive(d *delivery, id string) (stop func()) {
	every := max(r.ackWait/3, 10*time.Millisecond)
	done, stopped := make(chan struct{}), make(chan struct{})
	t := time.NewTimer(time.Until(d.queued.Add(every)))
	go func() {
		defer close(stopped)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if err := d.msg.InProgress(); err != nil {
				r.log.Warn("in-progress heartbeat failed", zap.Error(err), zap.String("event_id", id))
			}
			t.Reset(every)
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// call runs the handler with a heartbeat (noted in d.queued) and turns a
// panic into an error.
func (r *Runner) call(ctx context.Context, d *delivery, ev events.Envelope) (err error) {
	msg := d.msg
	ctx, cancel := context.WithTimeout(ctx, r.cfg.HandlerTimeout)
	defer cancel()
	hbDone := make(chan struct{})
	hbStopped := make(chan struct{})
	go func() {
		defer close(hbStopped)
		t := time.NewTicker(max(r.ackWait/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-hbDone:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if err := msg.InProgress(); err != nil {
					r.log.Warn("in-progress heartbeat failed", zap.Error(err), zap.String("event_id", ev.ID))
				} else {
					d.queued = time.Now()
				}
			}
		}
	}()
	defer func() {
		close(hbDone)
		<-hbStopped
	}()
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Value: v, Stack: debug.Stack()}
			r.log.Error("handler panicked", zap.Any("panic", v), zap.ByteString("stack", pe.Stack),
				zap.String("event_id", ev.ID))
			err = pe
		}
	}()
	return r.h(ctx, ev)
}

// ackDuplicate acks an event this consumer already handled. A first
// delivery is acked like any other. A redelivery of a handled event means
// an earlier ack did not take (lost with a connection, or refused by a
// server whose state went back after a restart): its ack waits for the
// server's confirmation, and one that is not confirmed is logged as an
// error, so that a processed event the server keeps redelivering is never
// silent; past the delivery limit each one is logged too.
func (r *Runner) ackDuplicate(msg jetstream.Msg, meta *jetstream.MsgMetadata, ev events.Envelope, o *Outcome) {
	fields := []zap.Field{zap.String("event_id", ev.ID), zap.Uint64("stream_seq", meta.Sequence.Stream),
		zap.Uint64("delivery", meta.NumDelivered)}
	if meta.NumDelivered <= 1 {
		if err := msg.Ack(); err != nil {
			o.Err = fmt.Errorf("runner: ack: %w", err)
			r.log.Warn("ack failed", append(fields, zap.Error(err))...)
		}
		return
	}
	if r.maxDeliver > 0 && meta.NumDelivered > uint64(r.maxDeliver) {
		r.log.Warn("an event already handled is delivered again past the delivery limit: its earlier acks did not take; acking it again",
			append(fields, zap.Int("limit", r.maxDeliver))...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := msg.DoubleAck(ctx); err != nil {
		o.Err = fmt.Errorf("runner: ack not confirmed: %w", err)
		r.log.Error("the server did not confirm the ack of an event already handled: it will deliver it again", append(fields, zap.Error(err))...)
	}
}

// retry naks a transient failure with its delay, or dead-letters it on the
// last allowed delivery.
func (r *Runner) retry(msg jetstream.Msg, meta *jetstream.MsgMetadata, herr error, o *Outcome) {
	if r.maxDeliver > 0 && meta.NumDelivered >= uint64(r.maxDeliver) {
		r.deadLetter(msg, meta, fmt.Sprintf("failed on the last allowed delivery (%d): %v", meta.NumDelivered, herr), o)
		return
	}
	delay := r.cfg.Backoff(meta.NumDelivered)
	var ra *retryAfterError
	switch {
	case errors.As(herr, &ra):
		delay = ra.delay
	case IsUnavailable(herr):
		delay = r.cfg.UnavailableDelay
		r.pauseFor(herr)
	}
	o.Result, o.Delay = ResultRetried, delay
	// A retry is silent while it is young and short: an event that keeps
	// failing, or waits long, is logged, so that events held in the
	// consumer's ack-pending set (a nak'ed event stays there until its
	// redelivery) always have a line that says why.
	lvl := zap.DebugLevel
	if meta.NumDelivered >= 3 || delay >= 30*time.Second {
		lvl = zap.WarnLevel
	}
	if ce := r.log.Check(lvl, "event retried"); ce != nil {
		ce.Write(zap.String("event_id", o.EventID), zap.Uint64("stream_seq", meta.Sequence.Stream),
			zap.Uint64("delivery", meta.NumDelivered), zap.Int("limit", r.maxDeliver), zap.Duration("delay", delay), zap.Error(herr))
	}
	if err := msg.NakWithDelay(delay); err != nil {
		r.log.Warn("nak failed", zap.Error(err), zap.String("event_id", o.EventID))
	}
}

// deadLetter copies the message to the DLQ and terminates it, in that
// order: Term only once the DLQ has acknowledged the letter. If the letter
// cannot be stored (DLQ full, unreachable) the message is nak'ed with
// backoff instead and stays in the stream (the consumer has no server-side
// delivery limit), so it is dead-lettered on a later delivery, never lost.
// The reason (a handler's error) is stored and shown by `engram dlq` with
// URL credentials masked (credurl).
func (r *Runner) deadLetter(msg jetstream.Msg, meta *jetstream.MsgMetadata, reason string, o *Outcome) {
	reason = credurl.Redact(reason)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := dlq.Letter{
		Consumer:   r.cfg.Consumer,
		Reason:     reason,
		Subject:    msg.Subject(),
		Stream:     meta.Stream,
		Sequence:   meta.Sequence.Stream,
		Deliveries: meta.NumDelivered,
		MsgID:      msg.Headers().Get(jetstream.MsgIDHeader),
		Header:     msg.Headers(),
		Data:       msg.Data(),
	}
	var err error
	if r.parking != nil {
		failovers := memory.FailoversOf(r.durable)
		o.Parked, err = r.parking.Put(ctx, l)
		if err == nil && o.Parked && r.durable != nil {
			// The letter is in the store: it must be durable there
			// before its event is terminated (a failover or a power loss
			// would take both; a failover while it was parked, too:
			// memory.ConfirmDurable).
			if derr := memory.ConfirmDurable(ctx, r.durable, failovers); derr != nil {
				err = fmt.Errorf("runner: the parked letter is not durable yet: %w", derr)
			}
		}
	} else {
		err = r.dlq.Put(ctx, l)
	}
	if err != nil {
		delay := r.cfg.Backoff(meta.NumDelivered)
		o.Result, o.Delay, o.DeadLetterFailed = ResultRetried, delay, true
		o.Err = errors.Join(o.Err, err)
		r.log.Error("could not dead-letter; will retry", zap.Error(err), zap.String("reason", reason),
			zap.Uint64("stream_seq", meta.Sequence.Stream))
		if err := msg.NakWithDelay(delay); err != nil {
			r.log.Warn("nak failed", zap.Error(err))
		}
		return
	}
	o.Result = ResultDeadLettered
	what := "event dead-lettered"
	if o.Parked {
		what = "event dead-lettered; ENGRAM_DLQ refuses letters, so its letter is parked in the store until it has room"
	}
	r.log.Warn(what, zap.String("reason", reason), zap.Uint64("stream_seq", meta.Sequence.Stream),
		zap.Uint64("delivery", meta.NumDelivered), zap.String("event_id", o.EventID))
	if err := msg.TermWithReason(clipReason(reason)); err != nil {
		r.log.Warn("term failed", zap.Error(err))
	}
}

func clipReason(s string) string {
	const n = 256
	if len(s) <= n {
		return s
	}
	for i := n; i > 0; i-- {
		if s[i]&0xC0 != 0x80 {
			return s[:i]
		}
	}
	return s[:n]
}
