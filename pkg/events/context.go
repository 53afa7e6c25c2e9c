package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
)

// DefaultContextTimeout is how long Client.Context waits for one page.
const DefaultContextTimeout = 5 * time.Second

// ContextQueue is the queue group the context service subscribes in, so
// that any number of replicas answer each request once.
const ContextQueue = "engram-context"

// ErrContextUnavailable is returned by Client.Context when no service
// answered (none running, or no answer in time) or the service failed. The
// platform should then send the conversation it has (its own full history).
var ErrContextUnavailable = errors.New("events: context unavailable")

// Context is what a platform sends its model after the system prompt and
// the memory block: Block (when not empty) as one message, then Messages in
// order. It is rebuilt from the store at every call, so it always reflects
// the latest compaction.
type Context struct {
	// Block is the reference-only preamble, the summary of the compacted
	// turns and the end marker, ready to send as one message; empty when
	// the conversation has not been compacted.
	Block string
	// Summary is the summary alone (inside Block).
	Summary string
	// UpTo is the last transcript message id the summary covers (0: none).
	UpTo int64
	// Messages are the stored transcript messages after the summary's
	// boundary, oldest first, tool calls and their results intact. A turn
	// Engram has not stored yet (turn_ended is stored by the extractor) is
	// not among them: the platform appends its own messages of the turns
	// after the last TurnID here.
	Messages []ContextMessage
	// Tokens estimates Block plus Messages (characters / 4).
	Tokens int64
}

// ContextMessage is one stored transcript message with its store id and
// turn id.
type ContextMessage struct {
	ID     int64  `json:"id"`
	TurnID string `json:"turn_id,omitempty"`
	Message
}

// ContextRequest is the body of a context request (JSON). The tenant,
// project and session are in the subject (Subjects.ContextAPI), which the
// bus's permissions vouch for.
type ContextRequest struct {
	// TenantID, when set, must be the subject's tenant (a request whose
	// body names another tenant is refused); it may be left out.
	TenantID string `json:"tenant_id,omitempty"`
	// AfterID asks for the next page: messages with a larger id only, and
	// no block. 0: the first page (block and the first messages).
	AfterID int64 `json:"after_id,omitempty"`
}

// ContextReply is the body of a context reply (JSON). A reply is at most
// the connection's max payload: when the messages do not fit, More is set
// and the client asks again with AfterID = LastID.
type ContextReply struct {
	Version  int              `json:"version"`
	Block    string           `json:"block,omitempty"`
	Summary  string           `json:"summary,omitempty"`
	UpTo     int64            `json:"up_to,omitempty"`
	Messages []ContextMessage `json:"messages,omitempty"`
	Tokens   int64            `json:"tokens,omitempty"` // the whole context, on the first page
	LastID   int64            `json:"last_id,omitempty"`
	More     bool             `json:"more,omitempty"`
	Error    string           `json:"error,omitempty"`
}

// ContextAPI is the request subject of a session's context:
// <prefix>.api.context.<tenant>.<project>.<session>. It is core NATS
// request/reply, outside every stream.
func (s Subjects) ContextAPI(tenant, project, session string) string {
	return s.prefix() + ".api.context." + EncodeToken(tenant) + "." + EncodeToken(project) + "." + EncodeToken(session)
}

// ContextAPIAll matches every context request subject (the service's
// subscription).
func (s Subjects) ContextAPIAll() string { return s.prefix() + ".api.context.*.*.*" }

// ContextAPITenant matches the context request subjects of one tenant (its
// platform's publish permission).
func (s Subjects) ContextAPITenant(tenant string) string {
	return s.prefix() + ".api.context." + EncodeToken(tenant) + ".>"
}

// ParseContextAPI reads the tenant, project and session back from a
// context request subject.
func (s Subjects) ParseContextAPI(subject string) (Ref, error) {
	pre := s.prefix() + ".api.context."
	rest, ok := strings.CutPrefix(subject, pre)
	toks := strings.Split(rest, ".")
	if !ok || len(toks) != 3 {
		return Ref{}, fmt.Errorf("%w: %q is not %s<tenant>.<project>.<session>", ErrInvalidSubject, subject, pre)
	}
	var ids [3]string
	for i, tok := range toks {
		id, err := DecodeToken(tok)
		if err != nil {
			return Ref{}, err
		}
		ids[i] = id
	}
	return Ref{TenantID: ids[0], ProjectID: ids[1], SessionID: ids[2]}, nil
}

// WithContextTimeout sets how long Context waits for each page (default 5 s).
func WithContextTimeout(d time.Duration) ClientOption {
	return func(c *Client) { c.contextTimeout = d }
}

// Context asks the context service (the compactor) for what the platform
// sends next for a session: the summary block and the messages after it.
// Each page waits at most the context timeout (and never past ctx). No
// service, no answer in time or a failed service is ErrContextUnavailable:
// send the conversation as the platform has it.
func (c *Client) Context(ctx context.Context, ref Ref) (Context, error) {
	if ref.ProjectID == "" || ref.SessionID == "" {
		return Context{}, fmt.Errorf("events: context: project and session are required")
	}
	subj := c.subjects.ContextAPI(ref.TenantID, ref.ProjectID, ref.SessionID)
	var out Context
	req := ContextRequest{TenantID: ref.TenantID}
	for page := 0; ; page++ {
		body, err := json.Marshal(req)
		if err != nil {
			return Context{}, err
		}
		pctx, cancel := context.WithTimeout(ctx, c.contextTimeout)
		m, err := c.request(pctx, ref.TenantID, subj, body)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return Context{}, fmt.Errorf("events: context: %w", ctx.Err())
			}
			if errors.Is(err, nats.ErrNoResponders) {
				return Context{}, fmt.Errorf("%w: no context service answers %s (is the compactor running?)", ErrContextUnavailable, subj)
			}
			return Context{}, fmt.Errorf("%w: %s: %w", ErrContextUnavailable, subj, err)
		}
		var r ContextReply
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return Context{}, fmt.Errorf("%w: undecodable reply: %w", ErrContextUnavailable, err)
		}
		if r.Error != "" {
			return Context{}, fmt.Errorf("%w: %s", ErrContextUnavailable, r.Error)
		}
		if page == 0 {
			out.Block, out.Summary, out.UpTo, out.Tokens = r.Block, r.Summary, r.UpTo, r.Tokens
		}
		out.Messages = append(out.Messages, r.Messages...)
		if !r.More {
			return out, nil
		}
		if r.LastID <= req.AfterID {
			return Context{}, fmt.Errorf("%w: the service's paging did not advance (last id %d)", ErrContextUnavailable, r.LastID)
		}
		req.AfterID = r.LastID
	}
}

// request sends one request of tenant with a reply subject under the
// tenant's inbox (inboxFor) and waits for the answer: the service answers
// a tenant only there.
func (c *Client) request(ctx context.Context, tenant, subj string, body []byte) (*nats.Msg, error) {
	if c.ownInbox(tenant, c.nc.NewInbox()) {
		// The connection's inbox is the tenant's: its shared
		// request/reply subscription serves.
		return c.nc.RequestWithContext(ctx, subj, body)
	}
	inbox := c.inboxFor(tenant)
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := sub.AutoUnsubscribe(1); err != nil {
		return nil, err
	}
	m := nats.NewMsg(subj)
	m.Reply, m.Data = inbox, body
	// A header makes the server answer "no responders" at once when no
	// service listens.
	m.Header.Set(HeaderVersion, strconv.Itoa(SchemaVersion))
	if err := c.nc.PublishMsg(m); err != nil {
		return nil, err
	}
	return sub.NextMsgWithContext(ctx)
}

// ContextFunc builds the context of a session. For req.AfterID 0 it
// returns the block and the messages after the summary's boundary; for a
// later page, the messages after req.AfterID (no block). It may return
// more messages than fit one reply: ServeContext pages them.
type ContextFunc func(ctx context.Context, ref Ref, req ContextRequest) (ContextReply, error)

// ContextService answers context requests until Stop.
type ContextService struct {
	sub    *nats.Subscription
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool // set by Stop: no request starts after it
	wg     sync.WaitGroup
}

// ServeContext answers context requests with fn, in the ContextQueue queue
// group (replicas share the requests). At most concurrency requests run at
// once (<= 0: 8), each bounded by timeout (<= 0: 10 s). A failing fn
// answers with the error in ContextReply.Error. A request whose reply
// subject is not an inbox of the subject's tenant (CheckReplyFor: the
// client's reply prefixes, WithReplyPrefixes, for the default tenant) is
// not answered. Stop ends it.
func (c *Client) ServeContext(fn ContextFunc, concurrency int, timeout time.Duration) (*ContextService, error) {
	if fn == nil {
		return nil, errors.New("events: serve context: nil function")
	}
	if concurrency <= 0 {
		concurrency = 8
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	base, cancel := context.WithCancel(context.Background())
	s := &ContextService{cancel: cancel}
	sem := make(chan struct{}, concurrency)
	maxPayload := int(c.nc.MaxPayload())
	sub, err := c.nc.QueueSubscribe(c.subjects.ContextAPIAll(), ContextQueue, func(m *nats.Msg) {
		if m.Reply == "" {
			return // not a request
		}
		// A subject that does not parse is answered (with the error) as
		// the default tenant's.
		if ref, _ := c.subjects.ParseContextAPI(m.Subject); CheckReplyFor(ref.TenantID, m.Reply, c.replyPrefixes) != nil {
			// An answer would land outside the inboxes of the subject's
			// tenant (another tenant's inbox, another service's subjects,
			// a stream): nobody to answer.
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		s.wg.Add(1)
		s.mu.Unlock()
		select {
		case sem <- struct{}{}:
		case <-base.Done():
			s.wg.Done()
			return
		}
		go func() {
			defer s.wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(base, timeout)
			defer cancel()
			_ = m.Respond(c.answerContext(ctx, fn, m, maxPayload))
		}()
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("events: serve context: subscribe: %w", err)
	}
	// Registered on the server when ServeContext returns: a request sent
	// right after (from another connection) finds the service.
	if err := c.nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		cancel()
		return nil, fmt.Errorf("events: serve context: subscribe: %w", err)
	}
	s.sub = sub
	return s, nil
}

// Stop unsubscribes, cancels the requests in flight and waits for them.
func (s *ContextService) Stop() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	err := s.sub.Unsubscribe()
	s.cancel()
	s.wg.Wait()
	if err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
		return fmt.Errorf("events: stop context service: %w", err)
	}
	return nil
}

func (c *Client) answerContext(ctx context.Context, fn ContextFunc, m *nats.Msg, maxPayload int) []byte {
	fail := func(err error) []byte {
		b, _ := json.Marshal(ContextReply{Version: SchemaVersion, Error: err.Error()})
		return b
	}
	ref, err := c.subjects.ParseContextAPI(m.Subject)
	if err != nil {
		return fail(err)
	}
	var req ContextRequest
	if len(strings.TrimSpace(string(m.Data))) > 0 {
		if err := json.Unmarshal(m.Data, &req); err != nil {
			return fail(fmt.Errorf("events: context request: %w", err))
		}
	}
	if req.AfterID < 0 {
		return fail(errors.New("events: context request: negative after_id"))
	}
	var p problems
	p.id("tenant", ref.TenantID, false)
	p.id("project", ref.ProjectID, true)
	p.id("session", ref.SessionID, true)
	if err := p.err(); err != nil {
		// The ids an event may not have (a NUL, a newline, over 256
		// bytes) are no session's.
		return fail(fmt.Errorf("events: context request: %w", err))
	}
	if req.TenantID != "" && req.TenantID != ref.TenantID {
		return fail(fmt.Errorf("events: context request: tenant_id %q is not the subject's tenant %q", req.TenantID, ref.TenantID))
	}
	req.TenantID = ref.TenantID
	r, err := fn(ctx, ref, req)
	if err != nil {
		return fail(err)
	}
	r.Version = SchemaVersion
	b, err := fitContext(r, maxPayload)
	if err != nil {
		return fail(err)
	}
	return b
}

// fitContext encodes r within limit bytes: the messages that do not fit are
// left for the next page (More, LastID). A single message too large for a
// reply of its own keeps the head and tail of its content.
func fitContext(r ContextReply, limit int) ([]byte, error) {
	limit -= 1024 // room for the reply's headers
	b, err := json.Marshal(r)
	if err != nil || len(b) <= limit {
		return b, err
	}
	all := r.Messages
	// The largest prefix that fits (encoded sizes grow with the prefix).
	lo, hi := 0, len(all) // all[:lo] fits (lo = 0: maybe only the block)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		r.Messages, r.More, r.LastID = all[:mid], true, all[mid-1].ID
		if b, err := json.Marshal(r); err == nil && len(b) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	n := lo
	if n == 0 && len(all) > 0 {
		// The first message alone is too large: cut its content (by the
		// ratio of the limit to its encoded size, which escaping inflates)
		// until it fits.
		m := all[0]
		r.LastID, r.More = m.ID, len(all) > 1
		content := m.Content
		for range 8 {
			r.Messages = []ContextMessage{m}
			b, err := json.Marshal(r)
			if err != nil || len(b) <= limit {
				return b, err
			}
			keep := int(float64(len(m.Content)) * float64(limit-1024) / float64(len(b)) * 0.95)
			m.Content = cutMiddle(content, keep)
		}
		return nil, fmt.Errorf("events: context message %d does not fit a reply of %d bytes", m.ID, limit)
	}
	r.Messages, r.More = all[:n], n < len(all)
	if n > 0 {
		r.LastID = all[n-1].ID
	}
	if !r.More {
		r.LastID = 0
	}
	return json.Marshal(r)
}

// cutMiddle keeps about keep bytes of s: its head and its tail, with a note
// of what was cut in between.
func cutMiddle(s string, keep int) string {
	if len(s) <= keep {
		return s
	}
	head := keep * 3 / 4
	tail := keep - head
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	t := len(s) - tail
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return s[:head] + fmt.Sprintf("\n[... %d bytes cut to fit the reply ...]\n", t-head) + s[t:]
}
