package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Message headers set on published events.
const (
	// HeaderMsgID is JetStream's de-duplication header; it carries the event id.
	HeaderMsgID = jetstream.MsgIDHeader
	// HeaderType carries the event type (for tools that do not decode bodies).
	HeaderType = "Engram-Type"
	// HeaderVersion carries the schema version.
	HeaderVersion = "Engram-Version"
)

// Headers of a dead letter in ENGRAM_DLQ (the body is the original message's
// body, byte for byte).
const (
	HeaderDLQReason     = "Engram-Dlq-Reason"     // why it was dead-lettered
	HeaderDLQConsumer   = "Engram-Dlq-Consumer"   // the consumer that gave up
	HeaderDLQSubject    = "Engram-Dlq-Subject"    // the original subject
	HeaderDLQStream     = "Engram-Dlq-Stream"     // the original stream
	HeaderDLQSequence   = "Engram-Dlq-Sequence"   // the original stream sequence
	HeaderDLQDeliveries = "Engram-Dlq-Deliveries" // deliveries made
	HeaderDLQMsgID      = "Engram-Dlq-Msg-Id"     // the original Nats-Msg-Id (the event id)
	HeaderDLQTime       = "Engram-Dlq-Time"       // when (RFC 3339, UTC)
	// HeaderDLQTruncated is set when the letter's body had to be cut to fit
	// the server's maximum payload: its value is the original body's size in
	// bytes (the letter keeps the first bytes; stream and sequence say where
	// the whole event was).
	HeaderDLQTruncated = "Engram-Dlq-Truncated"
)

// DefaultInjectTimeout is how long Inject waits for the memory block.
const DefaultInjectTimeout = 1500 * time.Millisecond

// DefaultPublishAttemptTimeout bounds one attempt of Publish: how long it
// waits for the stream's acknowledgement before it sends the event again
// (see Publish).
const DefaultPublishAttemptTimeout = 5 * time.Second

// ErrEventTooLarge is returned by Publish for an input event whose body is over
// the client's maximum event size (DefaultMaxEventBytes unless
// WithMaxEventBytes): nothing is sent. Shorten the event (a turn's
// messages) rather than raise the limit.
var ErrEventTooLarge = errors.New("events: event too large")

// ErrInjectTimeout is returned by Inject when no injection arrived in time.
// The platform should go on without memory.
var ErrInjectTimeout = errors.New("events: injection timed out")

// Client publishes Engram events for a chat platform (or a worker) and waits
// for injections. It is safe for concurrent use.
type Client struct {
	nc            *nats.Conn
	js            jetstream.JetStream
	subjects      Subjects
	injectTimeout time.Duration
	maxEvent      int // body bytes; <= 0: unlimited
	// publishAttempt bounds one publish request (Publish).
	publishAttempt time.Duration
	// contextTimeout bounds one page of Context (context.go).
	contextTimeout time.Duration
	replies        replies
	// replyPrefixes bound Respond and the context service's answers
	// (reply.go); empty: DefaultReplyPrefix.
	replyPrefixes []string
}

// replies routes answers to Inject's callers: one wildcard subscription
// per client and tenant (made on the tenant's first Inject) and a waiting
// channel per turn, instead of a subscription per turn (a SUB and an UNSUB
// on the server, and a 64k-slot channel per synchronous subscription in
// nats.go).
type replies struct {
	mu   sync.Mutex
	subs map[string]*replySub // by tenant
	seq  uint64
	wait map[string]chan *nats.Msg
}

// replySub is one tenant's reply subscription.
type replySub struct {
	sub    *nats.Subscription
	ended  chan struct{} // closed when sub ends (Close, a closed connection)
	prefix string        // "<inbox>.": a turn's reply subject is prefix + token
}

// inboxFor is a fresh inbox subject for a request of tenant: under
// TenantInbox(tenant) for a named tenant (the only inbox its answers may
// go to, see CheckReplyFor), else the connection's own inbox (which may
// have a custom prefix), unless that is one of Engram's reserved ones.
func (c *Client) inboxFor(tenant string) string {
	in := c.nc.NewInbox()
	if c.ownInbox(tenant, in) {
		return in
	}
	return TenantInbox(tenant) + "." + in[strings.LastIndexByte(in, '.')+1:]
}

// ownInbox reports whether in, an inbox of the connection, is one where an
// answer to tenant may go (CheckReplyFor): then the connection's own
// request/reply (one shared subscription) serves the tenant's requests.
func (c *Client) ownInbox(tenant, in string) bool {
	if tenant != "" {
		return underPrefix(in, TenantInbox(tenant))
	}
	return !underPrefix(in, TenantInboxRoot) && !underPrefix(in, EngramInboxRoot)
}

// await registers a waiter for a turn of tenant and returns its reply
// subject, its channel, a channel that ends when the subscription does,
// and the function that removes the waiter.
func (c *Client) await(tenant string) (string, <-chan *nats.Msg, <-chan struct{}, func(), error) {
	r := &c.replies
	r.mu.Lock()
	defer r.mu.Unlock()
	rs := r.subs[tenant]
	if rs == nil || !rs.sub.IsValid() {
		prefix := c.inboxFor(tenant) + "."
		sub, err := c.nc.Subscribe(prefix+"*", c.route)
		if err != nil {
			return "", nil, nil, nil, fmt.Errorf("events: inject: subscribe: %w", err)
		}
		ended := make(chan struct{})
		var once sync.Once
		sub.SetClosedHandler(func(string) { once.Do(func() { close(ended) }) })
		rs = &replySub{sub: sub, prefix: prefix, ended: ended}
		if r.subs == nil {
			r.subs = map[string]*replySub{}
		}
		r.subs[tenant] = rs
		if r.wait == nil {
			r.wait = map[string]chan *nats.Msg{}
		}
	}
	r.seq++
	token := strconv.FormatUint(r.seq, 36)
	// Room for a few strays (messages that are not the answer) besides it.
	ch := make(chan *nats.Msg, 8)
	r.wait[token] = ch
	return rs.prefix + token, ch, rs.ended, func() {
		r.mu.Lock()
		delete(r.wait, token)
		r.mu.Unlock()
	}, nil
}

// route hands a reply to its waiter; a reply nobody waits for (late, or a
// full channel of strays) is dropped.
func (c *Client) route(m *nats.Msg) {
	token := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	r := &c.replies
	r.mu.Lock()
	ch := r.wait[token]
	r.mu.Unlock()
	if ch != nil {
		select {
		case ch <- m:
		default:
		}
	}
}

// Close ends the client's reply subscriptions. It does not close the
// connection, which the caller owns; closing the connection ends the
// subscriptions too. Inject after Close subscribes again.
func (c *Client) Close() error {
	r := &c.replies
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for tenant, rs := range r.subs {
		delete(r.subs, tenant)
		if err := rs.sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("events: close: %w", errors.Join(errs...))
	}
	return nil
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithPrefix sets the subject prefix (default "engram").
func WithPrefix(prefix string) ClientOption {
	return func(c *Client) { c.subjects = Subjects{Prefix: prefix} }
}

// WithInjectTimeout sets how long Inject waits (default 1.5 s).
func WithInjectTimeout(d time.Duration) ClientOption {
	return func(c *Client) { c.injectTimeout = d }
}

// WithPublishAttemptTimeout sets how long one attempt of Publish waits for
// the stream's acknowledgement before it sends the event again (default
// DefaultPublishAttemptTimeout).
func WithPublishAttemptTimeout(d time.Duration) ClientOption {
	return func(c *Client) { c.publishAttempt = d }
}

// WithMaxEventBytes sets the largest event body Publish sends (default
// DefaultMaxEventBytes; -1: no client-side limit). Match the deployment's
// ENGRAM_MAX_EVENT_BYTES: ENGRAM_IN refuses bigger events anyway.
func WithMaxEventBytes(n int) ClientOption {
	return func(c *Client) { c.maxEvent = n }
}

// WithJetStream uses js instead of jetstream.New(nc) (e.g. with a domain).
func WithJetStream(js jetstream.JetStream) ClientOption {
	return func(c *Client) { c.js = js }
}

// NewClient returns a client on nc. The streams must exist (EnsureTopology,
// or a running `engram serve`).
func NewClient(nc *nats.Conn, opts ...ClientOption) (*Client, error) {
	if nc == nil {
		return nil, errors.New("events: NewClient: nil connection")
	}
	c := &Client{nc: nc, injectTimeout: DefaultInjectTimeout, contextTimeout: DefaultContextTimeout,
		maxEvent: DefaultMaxEventBytes, publishAttempt: DefaultPublishAttemptTimeout}
	for _, o := range opts {
		o(c)
	}
	if err := ValidatePrefix(c.subjects.Prefix); err != nil {
		return nil, err
	}
	if c.maxEvent == 0 || c.maxEvent < -1 {
		return nil, fmt.Errorf("events: max event bytes %d: want > 0 or -1", c.maxEvent)
	}
	if c.injectTimeout <= 0 {
		return nil, fmt.Errorf("events: inject timeout %v must be positive", c.injectTimeout)
	}
	if c.publishAttempt <= 0 {
		return nil, fmt.Errorf("events: publish attempt timeout %v must be positive", c.publishAttempt)
	}
	if c.contextTimeout <= 0 {
		return nil, fmt.Errorf("events: context timeout %v must be positive", c.contextTimeout)
	}
	for _, p := range c.replyPrefixes {
		if err := ValidateReplyPrefix(p, c.subjects.Prefix); err != nil {
			return nil, err
		}
	}
	if c.js == nil {
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, fmt.Errorf("events: jetstream: %w", err)
		}
		c.js = js
	}
	return c, nil
}

// Subjects returns the client's subject builder.
func (c *Client) Subjects() Subjects { return c.subjects }

// Msg builds the NATS message of an event: its subject, the JSON body and
// the headers (Nats-Msg-Id = event id, type, version). It validates e.
func (s Subjects) Msg(e Envelope) (*nats.Msg, error) {
	data, err := Encode(e)
	if err != nil {
		return nil, err
	}
	subj, err := s.For(e)
	if err != nil {
		return nil, err
	}
	m := nats.NewMsg(subj)
	m.Data = data
	m.Header.Set(HeaderMsgID, e.ID)
	m.Header.Set(HeaderType, string(e.Type))
	m.Header.Set(HeaderVersion, strconv.Itoa(e.Version))
	return m, nil
}

// Publish validates e and publishes it to JetStream on its subject, waiting
// for the stream's ack. Publishing the same event again (same id) within the
// duplicate window is a no-op for the stream. A body over the maximum
// event size is refused before sending (ErrEventTooLarge). When ENGRAM_IN
// refuses the event (full, or its subject holds the per-subject maximum)
// the error says so; the event was not stored.
//
// One attempt waits at most the publish attempt timeout
// (WithPublishAttemptTimeout) for the acknowledgement; unanswered, the
// event is sent again, with the same id, until ctx ends. A request or its
// acknowledgement can be lost for good when the server it went through is
// killed or the stream's leader changes under it (a NATS cluster losing a
// node): waiting for it until ctx ended held a worker's event, and its
// session's lease, for the handler's whole deadline (the chaos suite's
// clustered run). Any other error is returned at once.
func (c *Client) Publish(ctx context.Context, e Envelope) error {
	m, err := c.subjects.Msg(e)
	if err != nil {
		return err
	}
	if c.maxEvent > 0 && e.Type.IsInput() && len(m.Data) > c.maxEvent {
		return fmt.Errorf("%w: %s %s is %d bytes, the maximum is %d", ErrEventTooLarge, e.Type, e.ID, len(m.Data), c.maxEvent)
	}
	for {
		actx, cancel := context.WithTimeout(ctx, c.publishAttempt)
		_, err := c.js.PublishMsg(actx, m)
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			continue // the attempt went unanswered: send it again
		}
		return fmt.Errorf("events: publish %s %s: %w", e.Type, e.ID, err)
	}
}

// PublishTurnStarted publishes a turn_started event and returns it.
func (c *Client) PublishTurnStarted(ctx context.Context, ref Ref, p TurnStarted) (Envelope, error) {
	e := NewTurnStarted(ref, p)
	return e, c.Publish(ctx, e)
}

// PublishTurnEnded publishes a turn_ended event and returns it.
func (c *Client) PublishTurnEnded(ctx context.Context, ref Ref, p TurnEnded) (Envelope, error) {
	e := NewTurnEnded(ref, p)
	return e, c.Publish(ctx, e)
}

// PublishSessionIdle publishes a session_idle event and returns it.
func (c *Client) PublishSessionIdle(ctx context.Context, ref Ref, p SessionIdle) (Envelope, error) {
	e := NewSessionIdle(ref, p)
	return e, c.Publish(ctx, e)
}

// PublishTokensReported publishes a tokens_reported event and returns it.
func (c *Client) PublishTokensReported(ctx context.Context, ref Ref, p TokensReported) (Envelope, error) {
	e := NewTokensReported(ref, p)
	return e, c.Publish(ctx, e)
}

// Respond sends e (an injection_ready) as a core NATS message to a reply
// subject, e.g. TurnStarted.ReplyTo. It is what the injector calls. A
// subject that is not an inbox of e's tenant (CheckReplyFor: for the
// default tenant the client's reply prefixes, WithReplyPrefixes, default
// _INBOX.; for another tenant its TenantInbox) is refused with an error
// wrapping ErrInvalidSubject and CheckReplyFor's: nothing is sent.
func (c *Client) Respond(replyTo string, e Envelope) error {
	if err := CheckReplyFor(e.TenantID, replyTo, c.replyPrefixes); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSubject, err)
	}
	data, err := Encode(e)
	if err != nil {
		return err
	}
	if err := c.nc.Publish(replyTo, data); err != nil {
		return fmt.Errorf("events: respond to %s: %w", replyTo, err)
	}
	return nil
}

// Injection is the memory block for a turn.
type Injection struct {
	EventID string    // the id of the turn_started event that asked
	Block   string    // text to prepend to the prompt; may be empty
	NodeIDs []string  // the memories in the block
	Scores  []float64 // their retrieval scores (0 for standing instructions); may be empty
}

// Inject publishes turn_started for the turn with a unique reply subject and
// waits for the injector's answer, at most the inject timeout (and never past
// ctx). No answer in time is ErrInjectTimeout; the platform then runs the
// turn without memory. A cancelled ctx returns ctx's error. Any other error
// (no connection, no stream) should be treated the same way by the platform.
func (c *Client) Inject(ctx context.Context, ref Ref, p TurnStarted) (Injection, error) {
	deadline := time.Now().Add(c.injectTimeout)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	inbox, answers, ended, done, err := c.await(ref.TenantID)
	if err != nil {
		return Injection{}, err
	}
	defer done()

	p.ReplyTo = inbox
	if d, ok := wctx.Deadline(); ok {
		p.ReplyBy = d.UTC()
	}
	e := NewTurnStarted(ref, p)
	if err := c.Publish(wctx, e); err != nil {
		return Injection{}, c.injectErr(ctx, wctx, err)
	}
	for {
		var m *nats.Msg
		select {
		case m = <-answers:
		case <-ended:
			return Injection{}, fmt.Errorf("events: inject: the reply subscription ended (client closed or connection lost)")
		case <-wctx.Done():
			return Injection{}, c.injectErr(ctx, wctx, wctx.Err())
		}
		r, err := Decode(m.Data)
		if err != nil {
			continue // not ours to judge; keep waiting for a valid answer
		}
		ir, ok := r.Payload.(InjectionReady)
		if !ok || ir.InReplyTo != e.ID {
			continue
		}
		return Injection{EventID: e.ID, Block: ir.Block, NodeIDs: ir.NodeIDs, Scores: ir.Scores}, nil
	}
}

func (c *Client) injectErr(parent, wctx context.Context, err error) error {
	if parent.Err() != nil {
		return fmt.Errorf("events: inject: %w", parent.Err())
	}
	if wctx.Err() != nil {
		return fmt.Errorf("%w after %v", ErrInjectTimeout, c.injectTimeout)
	}
	return fmt.Errorf("events: inject: %w", err)
}
