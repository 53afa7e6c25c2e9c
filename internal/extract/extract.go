package extract

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// Transcripts is the transcript side of the store.
type Transcripts interface {
	AppendTranscript(ctx context.Context, s memory.SessionRef, turnID string, msgs []memory.Message) ([]memory.Message, bool, error)
	Messages(ctx context.Context, s memory.SessionRef, afterID int64, limit int) ([]memory.Message, error)
}

// Injections are the records of what the injector put into each turn.
type Injections interface {
	PutInjection(ctx context.Context, s memory.SessionRef, turnID string, in memory.Injection, ttl time.Duration) error
	GetInjection(ctx context.Context, s memory.SessionRef, turnID string) (memory.Injection, error)
}

// KeepInjection is how long a turn's injection record is kept once the
// turn is finished (judged, or given up on): not deleted, so that a
// turn_started redelivered after that (its injection_ready publish failed
// in a NATS outage; the injector is paused) is still answered with the
// block its verdicts were applied to, and what was judged can be read
// back. A turn_started is redelivered within minutes; an hour bounds the
// store's cost to an hour of turns.
const KeepInjection = time.Hour

// Leases keep two replicas off one session's span.
type Leases interface {
	AcquireLease(ctx context.Context, s memory.SessionRef, name, owner string, ttl time.Duration) (bool, error)
	RenewLease(ctx context.Context, s memory.SessionRef, name, owner string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, s memory.SessionRef, name, owner string) error
}

// Records are the processed records that make redelivery idempotent.
type Records interface {
	EventProcessed(ctx context.Context, p memory.ProjectRef, consumer, eventID string) (bool, error)
	MarkEventProcessed(ctx context.Context, p memory.ProjectRef, consumer, eventID string, ttl time.Duration) error
}

// Writer writes memories, edges and feedback.
type Writer interface {
	Upsert(ctx context.Context, n memory.Node) (memory.UpsertResult, error)
	Link(ctx context.Context, e memory.Edge) (memory.Edge, error)
	ApplyFeedback(ctx context.Context, verdicts map[string]memory.Verdict) error
}

// Staler marks memories attached to changed paths stale.
type Staler interface {
	MarkStale(ctx context.Context, p memory.ProjectRef, paths []string) ([]string, error)
}

// Embeddings stores vectors and lists the memories that lack one.
type Embeddings interface {
	SetEmbedding(ctx context.Context, id, model string, vec []float32) error
	PendingEmbeddings(ctx context.Context, model string, limit int) ([]memory.Node, error)
}

// Store is everything the extractor needs of the memory store.
type Store interface {
	memory.RetrievalStore
	Transcripts
	Injections
	Leases
	Records
	Writer
	Staler
	Embeddings
}

// Chatter sends one chat call (llm.Client implements it).
type Chatter interface {
	Chat(ctx context.Context, req llm.Request) (llm.Response, error)
}

// Embedder turns texts into vectors (llm.Client's embedder and the hashing
// embedder implement it).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Model() string
}

// Publisher sends output events to ENGRAM_OUT.
type Publisher interface {
	Publish(ctx context.Context, e events.Envelope) error
}

var (
	_ Store   = memory.Store(nil)
	_ Chatter = llm.Chatter(nil)
	_ Chatter = (*llm.Client)(nil)
)

// Record names (the consumer field of the store's processed records) and the
// lease name.
const (
	LeaseName   = "extract"
	recTurn     = "extractor.turn"      // a turn's extraction is done (or given up)
	recFeedback = "extractor.feedback"  // a turn's verdicts were applied
	recWritten  = "extractor.written"   // a span's memories were written
	recInvalid  = "extractor.invalid"   // the k-th invalid reply for a span
	recInjected = "transcript.injected" // the platform says the turn carried memories
	recAwaiting = "extractor.awaiting"  // a span waits for the turn's injection record (for InjectionWait)
	recAwaited  = "extractor.awaited"   // a span started waiting for it
)

// Errors. The handler maps them onto the runner's delay, retry and
// dead-letter decisions.
var (
	// ErrInvalidReply: the model's reply was unusable after the repair
	// attempt. Found with errors.As as *InvalidReplyError.
	ErrInvalidReply = errors.New("extract: invalid model reply")
	// ErrLeaseLost: the session's lease expired while a span was worked on;
	// the work is redone by whoever holds it next (memory.ErrLeaseLost).
	ErrLeaseLost = memory.ErrLeaseLost
	// ErrInjectionPending: a turn of the span carried memories (the platform
	// says so: Turn.InjectedNodeIDs) and the injector's record of them is
	// not there yet. The injector answers the platform before it records
	// what it answered (the answer is on the turn's critical path, the
	// record is not); a store failover between the two (7 s in the
	// clustered chaos run) can hold the record back past the turn's end,
	// and the turn's feedback would be lost. The span waits for it (the
	// handler returns runner.Wait) Config.InjectionWait at most, from the
	// first time a span found it missing, on the store's clock (a record
	// kept TTL, not the platform's occurred_at); then it goes on without it
	// (the record of an injector killed between its answer and the record
	// never comes) and Result.Unjudged counts the turn.
	ErrInjectionPending = errors.New("extract: a turn's injection record is not written yet")
	// ErrBusy: another replica holds the session's lease and the turn is
	// not extracted yet. The handler returns it (transient: the runner's
	// backoff) rather than acknowledge: the holder usually folds the turn
	// into its next span (the retry then finds it done), but a holder that
	// dies may leave no other event to redo it.
	ErrBusy = errors.New("extract: another replica holds the session; the turn is retried until it is extracted")
)

// InvalidReplyError reports an unusable reply. Final is set once
// Config.MaxInvalid replies for the span were invalid: the span's turns are
// then marked done (their transcript stays stored) and the event should be
// dead-lettered with Reply attached.
type InvalidReplyError struct {
	Failures int
	Final    bool
	Delay    time.Duration // before the next attempt, when not final
	Reply    string        // the model's last reply, redacted and cut to 2,000 characters
	Err      error
}

func (e *InvalidReplyError) Error() string {
	s := fmt.Sprintf("extract: invalid model reply (%d failures", e.Failures)
	if e.Final {
		s += ", giving up on the span"
	}
	s += fmt.Sprintf("): %v", e.Err)
	if e.Reply != "" {
		s += "; last reply: " + oneLine(capChars(e.Reply, 600))
	}
	return s
}

// Unwrap returns both the sentinel and the cause.
func (e *InvalidReplyError) Unwrap() []error { return []error{ErrInvalidReply, e.Err} }

// Extractor stores turns and extracts memories from spans of turns.
type Extractor struct {
	store Store
	chat  Chatter
	emb   Embedder // nil: no vectors (the cosine rule and embedding are skipped)
	pub   Publisher
	cfg   Config
	now   func() time.Time

	kick chan struct{} // wakes the backlog embedder

	// unsettled holds the spans (spanKey) with writes not yet confirmed on
	// a replica (memory.Settle): an attempt that wrote and then failed,
	// in its writes or in Settle, leaves its span here, and the next
	// attempt waits for those writes before it records the span, whatever
	// it writes itself (the model may propose nothing the second time).
	unsettled sync.Map
}

// Option configures an Extractor.
type Option func(*Extractor)

// WithClock sets the clock (tests).
func WithClock(now func() time.Time) Option { return func(x *Extractor) { x.now = now } }

// New returns an extractor. emb may be nil; pub may be nil (no
// memory_changed events).
func New(store Store, chat Chatter, emb Embedder, pub Publisher, cfg Config, opts ...Option) (*Extractor, error) {
	var errs []error
	if store == nil {
		errs = append(errs, errors.New("extract: no store"))
	}
	if chat == nil {
		errs = append(errs, errors.New("extract: no chat model"))
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	x := &Extractor{store: store, chat: chat, emb: emb, pub: pub, cfg: cfg, now: time.Now, kick: make(chan struct{}, 1)}
	for _, o := range opts {
		o(x)
	}
	return x, nil
}

// Turn is one ended turn.
type Turn struct {
	EventID      string // the turn_ended event (cause of memory_changed)
	Tenant       string // "": the default tenant
	Project      string
	Session      string
	Turn         string
	Messages     []memory.Message
	ChangedPaths []string
	// InjectedNodeIDs are the memories the platform says the turn's prompt
	// carried (events.TurnEnded.InjectedNodeIDs): the turn then has, or
	// will have within InjectionWait, the injector's record.
	InjectedNodeIDs []string
}

// Result says what handling a turn did.
type Result struct {
	Appended bool            // the turn's messages were new
	Unjudged int             // turns that carried memories whose injection record never came (Config.InjectionWait)
	Spans    int             // extraction calls made (one per span)
	Skipped  int             // spans too short to extract
	Changes  []events.Change // memories written, reinforced, linked, judged, marked stale
	Busy     bool            // another replica holds the session and this turn is not extracted yet
}

func (x *Extractor) ref(tenant, project, session string) memory.SessionRef {
	return memory.SessionRef{Tenant: tenant, Project: project, Session: session}
}

// HandleTurn handles a turn whole, as one process that runs both parts
// would: StoreTurn, then ExtractTurn.
func (x *Extractor) HandleTurn(ctx context.Context, t Turn) (Result, error) {
	res, err := x.StoreTurn(ctx, t)
	if err != nil {
		return res, err
	}
	more, err := x.ExtractTurn(ctx, t)
	more.Appended = more.Appended || res.Appended
	more.Changes = append(res.Changes, more.Changes...)
	return more, err
}

// StoreTurn is the part of a turn that needs no model (the transcript
// consumer's, events.ConsumerTranscript): it appends the turn's transcript
// (once per turn id) and marks memories attached to changed paths stale,
// publishing memory_changed for them. The turn's judgement and extraction
// wait for ExtractTurn.
func (x *Extractor) StoreTurn(ctx context.Context, t Turn) (Result, error) {
	var res Result
	ref := x.ref(t.Tenant, t.Project, t.Session)
	_, appended, err := x.appendTurn(ctx, ref, t)
	if err != nil {
		return res, err
	}
	res.Appended = appended
	if paths := memory.NormalisePaths(t.ChangedPaths); len(paths) > 0 {
		ids, err := x.store.MarkStale(ctx, ref.ProjectRef(), paths)
		if err != nil {
			return res, fmt.Errorf("extract: mark stale: %w", err)
		}
		if len(ids) > 0 {
			changes := make([]events.Change, len(ids))
			for i, id := range ids {
				changes[i] = events.Change{ID: id, Kind: events.ChangeStale}
			}
			res.Changes = append(res.Changes, changes...)
			if err := x.publish(ctx, ref, t.EventID, "stale:"+t.EventID, changes); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// ExtractTurn is the part of a turn that needs the model (the extractor
// consumer's): it appends the turn's transcript if StoreTurn has not yet
// (the two consumers run independently; AppendTranscript is idempotent per
// turn id), then extracts every span of turns not yet extracted in the
// session, oldest first, holding the session's lease. When another replica
// holds the lease it returns at once, with Busy set unless the turn is
// already extracted: the holder looks for new turns after it lets go, so
// this turn is usually folded into its next span, and the handler retries
// a busy turn (ErrBusy) in case the holder dies first.
func (x *Extractor) ExtractTurn(ctx context.Context, t Turn) (Result, error) {
	var res Result
	ref := x.ref(t.Tenant, t.Project, t.Session)
	stored, appended, err := x.appendTurn(ctx, ref, t)
	if err != nil {
		return res, err
	}
	res.Appended = appended
	hint := int64(0)
	if len(stored) > 0 {
		hint = stored[0].ID
	}
	res, err = x.drain(ctx, ref, t.EventID, hint, res)
	if err == nil && res.Busy {
		done, err := x.store.EventProcessed(ctx, ref.ProjectRef(), recTurn, recordKey(t.Session, t.Turn))
		if err != nil {
			return res, fmt.Errorf("extract: read the record of turn %q: %w", t.Turn, err)
		}
		res.Busy = !done
	}
	return res, err
}

// appendTurn appends the turn's transcript (AppendTranscript: once per
// turn id), after marking a turn that carried memories (recInjected) so
// that a span holding the turn finds the mark.
func (x *Extractor) appendTurn(ctx context.Context, ref memory.SessionRef, t Turn) ([]memory.Message, bool, error) {
	if len(t.InjectedNodeIDs) > 0 {
		if err := x.store.MarkEventProcessed(ctx, ref.ProjectRef(), recInjected, recordKey(t.Session, t.Turn), x.cfg.RecordTTL); err != nil {
			return nil, false, fmt.Errorf("extract: mark turn %q injected: %w", t.Turn, err)
		}
	}
	stored, appended, err := x.store.AppendTranscript(ctx, ref, t.Turn, t.Messages)
	if err != nil {
		return nil, false, fmt.Errorf("extract: append transcript of turn %q: %w", t.Turn, err)
	}
	return stored, appended, nil
}

func (x *Extractor) drain(ctx context.Context, ref memory.SessionRef, cause string, hint int64, res Result) (Result, error) {
	var seen int64 // the newest message id looked at
	// turns is the most turns a span holds: Config.SpanTurns, halved
	// after a full reply (errSpanFull), and after a reply that was not
	// full as many as that reply's density says fit one reply
	// (nextSpanTurns): a backlog dense with memories is not asked again and
	// again in spans too long for one reply.
	turns := x.cfg.SpanTurns
	for {
		owner := memory.NewID()
		ok, err := x.store.AcquireLease(ctx, ref, LeaseName, owner, x.cfg.LeaseTTL)
		if err != nil {
			return res, fmt.Errorf("extract: acquire lease of %s: %w", ref, err)
		}
		if !ok {
			res.Busy = true
			return res, nil
		}
		leftover := false
		err = x.holding(ctx, ref, owner, func(ctx context.Context) error {
			span, newest, err := x.findSpan(ctx, ref, hint)
			if err != nil {
				return err
			}
			span = x.bound(span, turns)
			seen = max(seen, newest)
			for range x.cfg.MaxSpanLoops {
				if len(span) == 0 {
					return nil
				}
				changes, called, proposed, err := x.extractSpan(ctx, ref, cause, span, &res)
				if called {
					res.Spans++
				} else if err == nil {
					res.Skipped++
				}
				res.Changes = append(res.Changes, changes...)
				if errors.Is(err, errSpanFull) {
					// The reply was full: the span may hold more than one
					// reply can carry. Its first half is the next span.
					turns = max(1, len(span)/2)
					span = span[:turns]
					continue
				}
				if err != nil {
					return err
				}
				if called {
					turns = x.nextSpanTurns(len(span), proposed)
				}
				// Turns appended while this span was extracted come after
				// its last message and are not done: the next span.
				last := span[len(span)-1]
				end := last.Msgs[len(last.Msgs)-1].ID
				msgs, err := x.store.Messages(ctx, ref, end, 0)
				if err != nil {
					return fmt.Errorf("extract: read transcript of %s: %w", ref, err)
				}
				seen = max(seen, end)
				if n := len(msgs); n > 0 {
					seen = max(seen, msgs[n-1].ID)
				}
				span = x.bound(groupTurns(msgs), turns)
			}
			leftover = len(span) > 0
			return nil
		})
		if err != nil {
			return res, err
		}
		if leftover {
			continue
		}
		// A turn appended while we held the lease saw it held and left the
		// work to us: look again now that it is released.
		more, err := x.store.Messages(ctx, ref, seen, 1)
		if err != nil {
			return res, fmt.Errorf("extract: read transcript of %s: %w", ref, err)
		}
		if len(more) == 0 {
			return res, nil
		}
		hint = more[0].ID
	}
}

// holding runs fn with the lease held and renewed (memory.HoldLease); fn's
// context ends when the lease is lost. The lease is released afterwards.
// fn's own errors come back as they are (they say "extract:" already);
// the lease's (lost, not released) are wrapped.
func (x *Extractor) holding(ctx context.Context, ref memory.SessionRef, owner string, fn func(context.Context) error) error {
	var own error
	err := memory.HoldLease(ctx, x.store, ref, LeaseName, owner, x.cfg.LeaseTTL, func(ctx context.Context) error {
		own = fn(ctx)
		return own
	})
	if err != nil && err != own { //nolint:errorlint // identity: fn's error, unwrapped
		return fmt.Errorf("extract: %w", err)
	}
	return err
}

// full reports whether a reply that proposed n memories was full: as many
// as one reply may hold (Config.MaxMemories), so the span may have
// established more.
func (x *Extractor) full(n int) bool {
	return x.cfg.MaxMemories > 0 && n >= x.cfg.MaxMemories
}

// nextSpanTurns is the most turns of the next span after a reply to n
// turns that proposed m memories and was applied: the turns that, at the
// same density, give a reply with room to spare (MaxMemories - 1), never
// fewer than n (a reply that was applied had room) nor more than
// Config.SpanTurns; a single turn's full reply keeps spans of one turn.
func (x *Extractor) nextSpanTurns(n, m int) int {
	if x.full(m) {
		return max(1, min(n, x.cfg.SpanTurns))
	}
	if m == 0 {
		return x.cfg.SpanTurns
	}
	return max(1, min(x.cfg.SpanTurns, max(n, n*(x.cfg.MaxMemories-1)/m)))
}

// errSpanFull says that a span of several turns got a full reply (as many
// memories as one reply may hold): nothing was applied and the span is
// extracted again in halves.
var errSpanFull = errors.New("extract: the reply is full: the span is extracted again in halves")

// spanTurn is one turn of a span with its messages.
type spanTurn struct {
	ID   string
	Msgs []memory.Message
}

func recordKey(session, turn string) string {
	return strconv.Itoa(len(session)) + ":" + session + ":" + turn
}

// findSpan returns the turns from the oldest turn not yet extracted to the
// newest, and the newest message id it read. Extracted turns form a prefix
// of the session (a span is marked done as a whole), so it walks back from
// the newest turn until it meets a done one, reading a window of messages
// before hint and widening it when the window holds no done turn.
func (x *Extractor) findSpan(ctx context.Context, ref memory.SessionRef, hint int64) ([]spanTurn, int64, error) {
	window := int64(x.cfg.ScanWindow)
	for {
		after := max(0, hint-window)
		msgs, err := x.store.Messages(ctx, ref, after, 0)
		if err != nil {
			return nil, 0, fmt.Errorf("extract: read transcript of %s: %w", ref, err)
		}
		var newest int64
		if n := len(msgs); n > 0 {
			newest = msgs[n-1].ID
		}
		turns := groupTurns(msgs)
		start := len(turns)
		found := false
		for i := len(turns) - 1; i >= 0; i-- {
			done, err := x.store.EventProcessed(ctx, ref.ProjectRef(), recTurn, recordKey(ref.Session, turns[i].ID))
			if err != nil {
				return nil, 0, fmt.Errorf("extract: read turn record: %w", err)
			}
			if done {
				found = true
				break
			}
			start = i
		}
		if found || after == 0 {
			return turns[start:], newest, nil
		}
		window *= 8
	}
}

// bound returns the first turns of span that make one span
// (Config.SpanTurns): at most SpanTurns turns whose rendered transcript fits
// Config.TranscriptChars, at least one (Render cuts a single turn longer
// than that). The rest are the next spans: a backlog is extracted oldest
// first in spans the model reads whole.
func (x *Extractor) bound(span []spanTurn, turns int) []spanTurn {
	span = span[:min(len(span), turns)]
	chars := 0
	for i, t := range span {
		chars += utf8.RuneCountInString(render(t.Msgs, x.cfg))
		if i > 0 && chars-1 > x.cfg.TranscriptChars { // the last newline is trimmed
			return span[:i]
		}
	}
	return span
}

// groupTurns splits messages (oldest first) into turns; a turn's messages are
// contiguous because a turn is appended at once.
func groupTurns(msgs []memory.Message) []spanTurn {
	var out []spanTurn
	for _, m := range msgs {
		if n := len(out); n > 0 && out[n-1].ID == m.TurnID {
			out[n-1].Msgs = append(out[n-1].Msgs, m)
			continue
		}
		out = append(out, spanTurn{ID: m.TurnID, Msgs: []memory.Message{m}})
	}
	return out
}

// extractSpan makes the one model call of a span and applies its reply. It
// reports whether the model was called and how many memories its reply
// proposed; a full reply (as many memories as one reply may hold) to a
// span of several turns is not applied (errSpanFull).
func (x *Extractor) extractSpan(ctx context.Context, ref memory.SessionRef, cause string, span []spanTurn, res *Result) (changes []events.Change, called bool, proposed int, err error) {
	var msgs []memory.Message
	for _, t := range span {
		msgs = append(msgs, t.Msgs...)
	}
	first, last := msgs[0].ID, msgs[len(msgs)-1].ID
	spanKey := recordKey(ref.Session, strconv.FormatInt(first, 10)+"-"+strconv.FormatInt(last, 10))
	invalidKey := recordKey(ref.Session, span[0].ID)

	injected, err := x.readInjected(ctx, ref, span)
	if err != nil {
		return nil, false, 0, err
	}

	transcript := Render(msgs, x.cfg)
	if len([]rune(strings.TrimSpace(transcript))) < x.cfg.MinSpanChars {
		return nil, false, 0, x.finish(ctx, ref, span, injected)
	}
	if err := x.awaitInjected(ctx, ref, span, injected, res); err != nil {
		return nil, false, 0, err
	}

	p, shown, err := x.prompt(ctx, ref, transcript, injected)
	if err != nil {
		return nil, false, 0, err
	}
	req := llm.Request{Role: llm.RoleExtract, Project: ref.ProjectRef().String(), Messages: p.Messages(), Timeout: x.cfg.CallTimeout}
	temp := x.cfg.Temperature
	req.Temperature = &temp
	reply, resp, err := llm.Structured[Reply](ctx, x.chat, req)
	if err != nil {
		if errors.Is(err, llm.ErrMisbehaved) {
			return nil, true, proposed, x.invalid(ctx, ref, span, injected, invalidKey, resp, err)
		}
		return nil, true, proposed, fmt.Errorf("extract: model call for %s: %w", ref, err)
	}

	proposed = len(reply.Memories)
	done, err := x.store.EventProcessed(ctx, ref.ProjectRef(), recWritten, spanKey)
	if err != nil {
		return nil, true, proposed, fmt.Errorf("extract: read span record: %w", err)
	}
	if x.full(proposed) && len(span) > 1 && !done {
		// A reply holds at most MaxMemories memories: a span of several
		// turns whose reply is full may have established more (a backlog
		// of turns that each state a rule), and what did not fit would be
		// lost with the span marked done. Nothing is applied; the span is
		// extracted again in halves (see drain), down to a single turn. (A
		// span whose memories were written before a crash is finished as
		// it was.)
		return nil, true, proposed, errSpanFull
	}
	if !done {
		// A span's record guards its writes; those it made on another
		// server than its project's are waited for first (memory.Replicated).
		rs, replicated := x.store.(memory.Replicated)
		failovers := memory.FailoversOf(x.store)
		var wrote bool
		changes, wrote, err = x.write(ctx, ref, reply, shown, memory.UserSaid(msgs))
		if replicated && wrote {
			x.unsettled.Store(spanKey, struct{}{})
		}
		if err != nil {
			return changes, true, proposed, err
		}
		if _, unsettled := x.unsettled.Load(spanKey); unsettled {
			if err := memory.Settle(ctx, rs, failovers); err != nil {
				return changes, true, proposed, fmt.Errorf("extract: span %s of %s: %w", spanKey, ref, err)
			}
			x.unsettled.Delete(spanKey)
		}
		if err := x.store.MarkEventProcessed(ctx, ref.ProjectRef(), recWritten, spanKey, x.cfg.RecordTTL); err != nil {
			return changes, true, proposed, fmt.Errorf("extract: record span: %w", err)
		}
	}
	fb, err := x.feedback(ctx, ref, span, injected, reply.Verdicts)
	changes = append(changes, fb...)
	if err != nil {
		return changes, true, proposed, err
	}
	if len(changes) > 0 {
		if err := x.publish(ctx, ref, cause, "span:"+spanKey, changes); err != nil {
			return changes, true, proposed, err
		}
	}
	return changes, true, proposed, x.finish(ctx, ref, span, injected)
}

// injectedTurn is what the injector recorded for one turn of the span.
type injectedTurn struct {
	turn string
	ids  []string
	rec  memory.Injection
}

// readInjected reads the injection records of the span's turns (without
// consuming them: a crash before the span is finished finds them again),
// those without ids too (finish keeps them for KeepInjection).
func (x *Extractor) readInjected(ctx context.Context, ref memory.SessionRef, span []spanTurn) ([]injectedTurn, error) {
	var out []injectedTurn
	for _, t := range span {
		rec, err := x.store.GetInjection(ctx, ref, t.ID)
		if memory.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("extract: read injection of turn %q: %w", t.ID, err)
		}
		out = append(out, injectedTurn{turn: t.ID, ids: rec.IDs, rec: rec})
	}
	return out, nil
}

// awaitInjected returns ErrInjectionPending when a turn of the span that
// carried memories (recInjected) has no injection record, unless a span
// has waited for it Config.InjectionWait already: the first span to find
// it missing marks the wait (recAwaiting, kept InjectionWait, and
// recAwaited); once recAwaiting has expired the span goes on, and the turn
// counts in unjudged.
func (x *Extractor) awaitInjected(ctx context.Context, ref memory.SessionRef, span []spanTurn, injected []injectedTurn, res *Result) error {
	recorded := make(map[string]bool, len(injected))
	for _, it := range injected {
		recorded[it.turn] = true
	}
	p := ref.ProjectRef()
	for _, t := range span {
		if recorded[t.ID] {
			continue
		}
		key := recordKey(ref.Session, t.ID)
		marked, err := x.store.EventProcessed(ctx, p, recInjected, key)
		if err != nil {
			return fmt.Errorf("extract: read injection mark of turn %q: %w", t.ID, err)
		}
		if !marked {
			continue
		}
		awaited, err := x.store.EventProcessed(ctx, p, recAwaited, key)
		if err != nil {
			return fmt.Errorf("extract: read injection wait of turn %q: %w", t.ID, err)
		}
		if !awaited {
			if err := x.store.MarkEventProcessed(ctx, p, recAwaiting, key, x.cfg.InjectionWait); err != nil {
				return fmt.Errorf("extract: mark injection wait of turn %q: %w", t.ID, err)
			}
			if err := x.store.MarkEventProcessed(ctx, p, recAwaited, key, x.cfg.RecordTTL); err != nil {
				return fmt.Errorf("extract: mark injection wait of turn %q: %w", t.ID, err)
			}
			return fmt.Errorf("%w: turn %q of %s", ErrInjectionPending, t.ID, ref)
		}
		waiting, err := x.store.EventProcessed(ctx, p, recAwaiting, key)
		if err != nil {
			return fmt.Errorf("extract: read injection wait of turn %q: %w", t.ID, err)
		}
		if waiting {
			return fmt.Errorf("%w: turn %q of %s", ErrInjectionPending, t.ID, ref)
		}
		res.Unjudged++
	}
	return nil
}

// finish marks the span's turns done and shortens their injection records'
// life to KeepInjection.
func (x *Extractor) finish(ctx context.Context, ref memory.SessionRef, span []spanTurn, injected []injectedTurn) error {
	for _, t := range span {
		if err := x.store.MarkEventProcessed(ctx, ref.ProjectRef(), recTurn, recordKey(ref.Session, t.ID), x.cfg.RecordTTL); err != nil {
			return fmt.Errorf("extract: record turn %q: %w", t.ID, err)
		}
	}
	for _, it := range injected {
		if err := x.store.PutInjection(ctx, ref, it.turn, it.rec, KeepInjection); err != nil {
			return fmt.Errorf("extract: keep injection of turn %q: %w", it.turn, err)
		}
	}
	return nil
}

// invalid counts an invalid reply for the span (in the store, so replicas
// and restarts agree) and decides between a retry and giving up.
func (x *Extractor) invalid(ctx context.Context, ref memory.SessionRef, span []spanTurn, injected []injectedTurn, key string, resp llm.Response, cause error) error {
	failures := x.cfg.MaxInvalid
	for k := 1; k <= x.cfg.MaxInvalid; k++ {
		rk := key + "#" + strconv.Itoa(k)
		seen, err := x.store.EventProcessed(ctx, ref.ProjectRef(), recInvalid, rk)
		if err != nil {
			return fmt.Errorf("extract: read failure record: %w", err)
		}
		if seen {
			continue
		}
		if err := x.store.MarkEventProcessed(ctx, ref.ProjectRef(), recInvalid, rk, x.cfg.RecordTTL); err != nil {
			return fmt.Errorf("extract: record failure: %w", err)
		}
		failures = k
		break
	}
	e := &InvalidReplyError{Failures: failures, Reply: capChars(memory.Redact(resp.Message.Content), 2000), Err: cause}
	if failures >= x.cfg.MaxInvalid {
		e.Final = true
		if err := x.finish(ctx, ref, span, injected); err != nil {
			return errors.Join(e, err)
		}
		return e
	}
	e.Delay = time.Duration(float64(x.cfg.InvalidDelay) * math.Pow(2, float64(failures-1)))
	return e
}

// feedback applies the verdicts on the memories injected into the span's
// turns, once per turn (a turn's record is written before its verdicts are
// applied: at most once, never twice).
func (x *Extractor) feedback(ctx context.Context, ref memory.SessionRef, span []spanTurn, injected []injectedTurn, verdicts []ReplyVerdict) ([]events.Change, error) {
	given := map[string]memory.Verdict{}
	for _, v := range verdicts {
		vd := memory.Verdict(v.Verdict)
		id := strings.TrimSpace(v.ID)
		if vd.Valid() && id != "" {
			if _, dup := given[id]; !dup {
				given[id] = vd
			}
		}
	}
	var changes []events.Change
	for _, it := range injected {
		apply := map[string]memory.Verdict{}
		for _, id := range it.ids {
			if v, ok := given[id]; ok {
				apply[id] = v
				delete(given, id) // an id injected into two turns is judged once
			}
		}
		key := recordKey(ref.Session, it.turn)
		done, err := x.store.EventProcessed(ctx, ref.ProjectRef(), recFeedback, key)
		if err != nil {
			return changes, fmt.Errorf("extract: read feedback record: %w", err)
		}
		if done || len(apply) == 0 {
			continue
		}
		if err := x.store.MarkEventProcessed(ctx, ref.ProjectRef(), recFeedback, key, x.cfg.RecordTTL); err != nil {
			return changes, fmt.Errorf("extract: record feedback: %w", err)
		}
		if err := x.store.ApplyFeedback(ctx, apply); err != nil {
			return changes, fmt.Errorf("extract: apply feedback: %w", err)
		}
		ids := make([]string, 0, len(apply))
		for id := range apply {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			changes = append(changes, events.Change{ID: id, Kind: events.ChangeFeedback})
		}
	}
	return changes, nil
}

// publish sends memory_changed with an id derived from key, so that a
// redelivered span publishes a duplicate the stream drops.
func (x *Extractor) publish(ctx context.Context, ref memory.SessionRef, cause, key string, changes []events.Change) error {
	if x.pub == nil || len(changes) == 0 {
		return nil
	}
	ev := events.New(events.Ref{TenantID: ref.Tenant, ProjectID: ref.Project, SessionID: ref.Session},
		events.MemoryChanged{Changes: changes, Cause: cause})
	ev.ID = eventID(ref.ProjectRef(), key)
	if err := x.pub.Publish(ctx, ev); err != nil {
		return fmt.Errorf("extract: publish memory_changed: %w", err)
	}
	return nil
}
