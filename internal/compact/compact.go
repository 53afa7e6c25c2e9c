package compact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// Store is what the compactor needs of the memory store: the transcript,
// the summaries, the session lease and the processed records.
type Store interface {
	Messages(ctx context.Context, s memory.SessionRef, afterID int64, limit int) ([]memory.Message, error)
	LatestSummary(ctx context.Context, s memory.SessionRef) (memory.Summary, error)
	SaveSummary(ctx context.Context, s memory.SessionRef, sum memory.Summary) error
	AcquireLease(ctx context.Context, s memory.SessionRef, name, owner string, ttl time.Duration) (bool, error)
	memory.Leases
	EventProcessed(ctx context.Context, p memory.ProjectRef, consumer, eventID string) (bool, error)
	MarkEventProcessed(ctx context.Context, p memory.ProjectRef, consumer, eventID string, ttl time.Duration) error
}

// Chatter sends one chat call (llm.Client implements it).
type Chatter interface {
	Chat(ctx context.Context, req llm.Request) (llm.Response, error)
}

// ContextSizer tells the context window of a role's model in tokens
// (llm.Client implements it). A Chatter that is not one is taken to have
// llm.DefaultContextLength.
type ContextSizer interface {
	ContextLength(ctx context.Context, role llm.Role) (int, error)
}

// Metrics counts what the compactor refused (health.Metrics implements
// it).
type Metrics interface {
	// CompactionRefused counts one refused summary by its Refusal.
	CompactionRefused(reason string)
}

// Publisher sends output events to ENGRAM_OUT (events.Client implements it).
type Publisher interface {
	Publish(ctx context.Context, e events.Envelope) error
}

var (
	_ Store        = memory.Store(nil)
	_ Chatter      = (*llm.Client)(nil)
	_ ContextSizer = (*llm.Client)(nil)
	_ Publisher    = (*events.Client)(nil)
)

// The lease name and the processed records' consumer names.
const (
	LeaseName    = "compact"
	recFailure   = "compactor.failure"   // the k-th failed attempt at a boundary
	recPublished = "compactor.published" // compaction_done was published for a boundary
	recEphemeral = "compactor.ephemeral" // a tokens_reported said the session is ephemeral
)

// ErrEphemeral: a forced compaction of a session a tokens_reported marked
// ephemeral (cron-like, automated). Permanent: the runner dead-letters the
// request with this reason.
var ErrEphemeral = errors.New("compact: the session is ephemeral")

// ErrFailed: a compaction attempt failed (an empty or unusable reply, a
// model error that is not an outage). Found with errors.As as *FailedError.
var ErrFailed = errors.New("compact: compaction failed")

// FailedError reports a failed attempt: retried after Delay (Config.Backoff
// by the number of failures, counted in the store so replicas and restarts
// agree), or given up when Final (after Config.MaxFailures): the report is
// dead-lettered, the transcript stays and the next report tries again.
type FailedError struct {
	Failures int
	Final    bool
	Delay    time.Duration
	Err      error
}

func (e *FailedError) Error() string {
	s := fmt.Sprintf("compact: compaction failed (%d failures", e.Failures)
	if e.Final {
		s += ", giving up on this report"
	}
	return s + fmt.Sprintf("): %v", e.Err)
}

// Unwrap returns both the sentinel and the cause.
func (e *FailedError) Unwrap() []error { return []error{ErrFailed, e.Err} }

// ErrTranscriptBehind: the transcript says the session needs no
// compaction (under the threshold by the estimate, or nothing to split),
// but a turn_ended of the session still waits for the extractor, so the
// transcript lacks it. It is transient (the runner's backoff: 1 s,
// doubling): answering now would skip the compaction for good when this was
// the session's last report (e.g. when the extractor is behind after a
// model outage).
var ErrTranscriptBehind = errors.New("compact: the session's transcript is behind (a turn_ended waits for the extractor)")

// ErrBusy: another run holds the session's lease (Outcome Busy). The
// handler returns it, transient (the runner's backoff: 1 s, doubling),
// rather than acknowledge the report: a holder that dies (kill -9, its
// lease left to expire) does not cover it, and acknowledged it could be
// the session's last report. The retry after a live holder let go finds
// the report Covered by the summary it saved, without a model call.
var ErrBusy = errors.New("compact: another run holds the session; the report is retried until it finds the session free")

// ExtractorLag tells whether a session's latest turn_ended still waits for
// the extractor (events.ExtractorLag).
type ExtractorLag interface {
	TurnEndedPending(ctx context.Context, tenant, project, session string) (bool, error)
}

// Compactor summarises the older messages of conversations and builds the
// context platforms send.
type Compactor struct {
	store Store
	chat  Chatter
	pub   Publisher
	cfg   Config
	now   func() time.Time
	// reachable reports whether Ollama answers and has the summarize model
	// (the runner's model gate); nil: unknown.
	reachable func(ctx context.Context) error
	lag       ExtractorLag // nil: the transcript is taken as complete
	metrics   Metrics      // nil: none
}

// WithMetrics counts refused summaries (Metrics.CompactionRefused).
func WithMetrics(m Metrics) Option { return func(c *Compactor) { c.metrics = m } }

// WithExtractorLag makes a report that the transcript would answer with
// "nothing to do" wait while the session's transcript is behind
// (ErrTranscriptBehind).
func WithExtractorLag(l ExtractorLag) Option { return func(c *Compactor) { c.lag = l } }

// Option configures a Compactor.
type Option func(*Compactor)

// WithClock sets the clock (tests).
func WithClock(now func() time.Time) Option { return func(c *Compactor) { c.now = now } }

// WithReachability sets the check that tells a slow or failing model from
// an Ollama that is down (see summarise). By default it is the model gate
// (ModelGate) of the chat client when that is an llm.Checker, as
// *llm.Client is; without one, every llm.ErrUnavailable is an outage.
func WithReachability(check func(ctx context.Context) error) Option {
	return func(c *Compactor) { c.reachable = check }
}

// probeTimeout bounds the reachability check after a failed summary call.
const probeTimeout = 10 * time.Second

// New returns a compactor. pub may be nil (no compaction_done events).
func New(store Store, chat Chatter, pub Publisher, cfg Config, opts ...Option) (*Compactor, error) {
	var errs []error
	if store == nil {
		errs = append(errs, errors.New("compact: no store"))
	}
	if chat == nil {
		errs = append(errs, errors.New("compact: no chat model"))
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c := &Compactor{store: store, chat: chat, pub: pub, cfg: cfg, now: time.Now}
	if ch, ok := chat.(llm.Checker); ok {
		c.reachable = ModelGate(ch)
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Report is one tokens_reported event.
type Report struct {
	EventID       string
	Tenant        string // "": the default tenant
	Project       string
	Session       string
	StackID       string
	InputTokens   int64 // 0: unknown (estimated from the stored messages)
	ContextWindow int64 // 0: unknown
	Ephemeral     bool
	Force         bool
	At            time.Time // when the platform reported (the event's occurred-at)
}

// Outcome says what a report led to.
type Outcome string

// The outcomes.
const (
	Compacted      Outcome = "compacted"
	BelowThreshold Outcome = "below_threshold"
	NothingToSplit Outcome = "nothing_to_split" // too few messages, or no user message to split at
	// TooSmall: what a summary would replace (the messages before the
	// boundary and the previous summary's block) is no larger than the
	// smallest block a summary makes: the context cannot shrink, so the
	// model is not asked (a forced compaction of a short conversation).
	TooSmall  Outcome = "too_small"
	Ephemeral Outcome = "ephemeral"
	SubStack  Outcome = "sub_conversation" // a stack id: Engram stores the session's main conversation only
	Busy      Outcome = "busy"             // another run compacts the session: the handler retries the report (ErrBusy)
	Covered   Outcome = "covered"          // the report predates the latest summary
)

// Result says what handling a report did.
type Result struct {
	Outcome      Outcome
	Effective    int64 // the tokens the trigger compared
	Estimated    bool  // Effective is an estimate of the context: the block and the stored messages after it
	Threshold    int64
	UpTo         int64 // the boundary: the last message id the summary covers
	Covered      int   // messages summarised
	Kept         int   // messages after the boundary
	TokensBefore int64 // Effective: the platform's reported prompt, or the estimate of the context (block and messages)
	TokensAfter  int64 // an estimate (characters / 4) of the block plus the kept messages
	Window       int   // the summarize model's context window (tokens)
	Steps        int   // summary calls made: more than one when the covered messages did not fit one prompt
}

// Compact decides whether the report's conversation needs compaction and,
// if so, summarises its older messages into the session's summary and
// publishes compaction_done. It holds the session's lease ("compact") while
// it works: a report that finds the lease held returns Busy at once (the
// handler retries it, ErrBusy), and a report older than the latest summary
// returns Covered unless it is forced.
//
// Ephemerality is remembered per session: a report that says so records it
// (a processed record, kept Config.RecordTTL), and a forced report without
// the flag (engram compact) is then refused with ErrEphemeral.
func (c *Compactor) Compact(ctx context.Context, r Report) (Result, error) {
	ref := memory.SessionRef{Tenant: r.Tenant, Project: r.Project, Session: r.Session}
	if r.Ephemeral {
		if r.StackID == "" {
			if err := c.store.MarkEventProcessed(ctx, ref.ProjectRef(), recEphemeral, recordKey(r.Session, "session"), c.cfg.RecordTTL); err != nil {
				return Result{}, fmt.Errorf("compact: record %s as ephemeral: %w", ref, err)
			}
		}
		return Result{Outcome: Ephemeral}, nil
	}
	if r.StackID != "" {
		return Result{Outcome: SubStack}, nil
	}
	if r.Force {
		eph, err := c.store.EventProcessed(ctx, ref.ProjectRef(), recEphemeral, recordKey(r.Session, "session"))
		if err != nil {
			return Result{}, fmt.Errorf("compact: read the ephemeral record of %s: %w", ref, err)
		}
		if eph {
			return Result{Outcome: Ephemeral}, fmt.Errorf("%w: %s was reported ephemeral (cron-like, automated); a forced compaction is refused", ErrEphemeral, ref)
		}
	}
	// A reported count under the threshold needs nothing of the store:
	// most reports end here.
	threshold := c.cfg.ThresholdFor(r.Project, r.ContextWindow)
	if !r.Force && r.InputTokens > 0 && r.InputTokens < threshold {
		return Result{Outcome: BelowThreshold, Effective: r.InputTokens, Threshold: threshold}, nil
	}
	owner := memory.NewID()
	ok, err := c.store.AcquireLease(ctx, ref, LeaseName, owner, c.cfg.LeaseTTL)
	if err != nil {
		return Result{}, fmt.Errorf("compact: acquire lease of %s: %w", ref, err)
	}
	if !ok {
		return Result{Outcome: Busy}, nil
	}
	var res Result
	err = memory.HoldLease(ctx, c.store, ref, LeaseName, owner, c.cfg.LeaseTTL, func(ctx context.Context) error {
		var err error
		res, err = c.compact(ctx, ref, r)
		return err
	})
	return res, err
}

func (c *Compactor) compact(ctx context.Context, ref memory.SessionRef, r Report) (Result, error) {
	prev, err := c.latest(ctx, ref)
	if err != nil {
		return Result{}, err
	}
	if err := c.announce(ctx, ref, prev); err != nil {
		return Result{}, err
	}
	threshold := c.cfg.ThresholdFor(r.Project, r.ContextWindow)
	// A report older than the latest summary is covered by it, unless that
	// summary left the context over the threshold (a compaction in steps
	// that saved its progress and was cut short).
	if !r.Force && r.InputTokens > 0 && !r.At.IsZero() && prev.UpTo > 0 && r.At.Before(prev.CreatedAt) &&
		prev.TokensAfter < threshold {
		return Result{Outcome: Covered}, nil
	}
	msgs, err := c.store.Messages(ctx, ref, prev.UpTo, 0)
	if err != nil {
		return Result{}, fmt.Errorf("compact: read transcript of %s: %w", ref, err)
	}
	res := Result{Effective: r.InputTokens, Threshold: threshold}
	if res.Effective <= 0 {
		// The context the platform sends: the block and the messages
		// after it (Context).
		res.Effective, res.Estimated = BlockTokens(prev.Content)+Tokens(msgs), true
	}
	if !r.Force && res.Effective < res.Threshold {
		res.Outcome = BelowThreshold
		if res.Estimated {
			return res, c.behind(ctx, ref)
		}
		return res, nil
	}
	b := Split(msgs, c.cfg.KeepRecent)
	if b == 0 {
		res.Outcome = NothingToSplit
		return res, c.behind(ctx, ref)
	}
	covered, kept := msgs[:b], msgs[b:]
	res.UpTo, res.Covered, res.Kept = covered[b-1].ID, len(covered), len(kept)
	res.TokensBefore = res.Effective
	if Tokens(covered)+BlockTokens(prev.Content) <= minBlockTokens {
		res.Outcome = TooSmall
		return res, c.behind(ctx, ref)
	}
	if res.Window, err = c.window(ctx); err != nil {
		return res, err
	}
	// In steps: each fits the window (the oldest messages first, then an
	// update with the next); the summary after a step that ends at a
	// boundary is saved, so a refusal or a crash later keeps the progress.
	pl := newPlanner(covered, c.cfg, res.Window)
	summary := prev.Content
	for from := 0; from < b; {
		st, err := pl.next(summary, from)
		if err != nil {
			return res, err
		}
		summary, err = c.summarise(ctx, ref, summary, covered[st.From:st.To], res.UpTo, st)
		res.Steps++
		if err != nil {
			return res, err
		}
		from = st.To
		if !st.Boundary {
			continue
		}
		after := BlockTokens(summary) + Tokens(msgs[from:])
		sum := memory.Summary{Content: summary, UpTo: covered[from-1].ID, TokensBefore: res.TokensBefore, TokensAfter: after}
		if err := c.store.SaveSummary(ctx, ref, sum); err != nil {
			return res, fmt.Errorf("compact: save summary of %s: %w", ref, err)
		}
		if from == b {
			res.TokensAfter = after
			if err := c.announce(ctx, ref, sum); err != nil {
				return res, err
			}
		}
	}
	res.Outcome = Compacted
	return res, nil
}

// window is the summarize model's context window.
func (c *Compactor) window(ctx context.Context) (int, error) {
	cs, ok := c.chat.(ContextSizer)
	if !ok {
		return llm.DefaultContextLength, nil
	}
	n, err := cs.ContextLength(ctx, llm.RoleSummarize)
	if err != nil {
		return 0, fmt.Errorf("compact: context window of the summarize model: %w", err)
	}
	return n, nil
}

// behind is ErrTranscriptBehind while a turn_ended of the session waits for
// the extractor, else nil.
func (c *Compactor) behind(ctx context.Context, ref memory.SessionRef) error {
	if c.lag == nil {
		return nil
	}
	pending, err := c.lag.TurnEndedPending(ctx, ref.Tenant, ref.Project, ref.Session)
	if err != nil {
		return fmt.Errorf("compact: pending turns of %s: %w: %w", ref, memory.ErrUnavailable, err)
	}
	if pending {
		return ErrTranscriptBehind
	}
	return nil
}

// latest is the session's latest summary, the zero Summary when it has none.
func (c *Compactor) latest(ctx context.Context, ref memory.SessionRef) (memory.Summary, error) {
	s, err := c.store.LatestSummary(ctx, ref)
	if memory.IsNotFound(err) {
		return memory.Summary{}, nil
	}
	if err != nil {
		return memory.Summary{}, fmt.Errorf("compact: read summary of %s: %w", ref, err)
	}
	return s, nil
}

// summarise makes one step's model call and returns the checked summary
// (Check): a refused reply is a failed attempt.
func (c *Compactor) summarise(ctx context.Context, ref memory.SessionRef, prev string, chunk []memory.Message, upTo int64, st Step) (string, error) {
	temp := c.cfg.Temperature
	req := llm.Request{
		Role: llm.RoleSummarize, Project: ref.ProjectRef().String(), Messages: st.Prompt,
		Temperature: &temp, MaxTokens: st.Budget, Timeout: c.cfg.CallTimeout,
	}
	resp, err := c.chat.Chat(ctx, req)
	if err != nil {
		if ctx.Err() == nil && c.modelFailed(ctx, err) {
			return "", c.failed(ctx, ref, upTo, err)
		}
		if outage(err) || ctx.Err() != nil {
			return "", fmt.Errorf("compact: summary call for %s: %w", ref, err)
		}
		return "", c.failed(ctx, ref, upTo, err)
	}
	summary, err := CheckSaid(resp.Message.Content, resp.CutOff(), Tokens(chunk), BlockTokens(prev), memory.UserSaid(chunk)+"\n"+prev)
	if err != nil {
		var re *RefusedError
		if c.metrics != nil && errors.As(err, &re) {
			c.metrics.CompactionRefused(string(re.Reason))
		}
		return "", c.failed(ctx, ref, upTo, err)
	}
	return summary, nil
}

// modelFailed reports whether an llm.ErrUnavailable from the summary call
// (a timeout, an HTTP 5xx) came while Ollama is reachable and has the
// model: the model is slow or failing, and the gate would let the runner
// redeliver the report at once, spending its deliveries until it is
// dead-lettered. Such an error counts as a failed attempt (backoff 1, 5,
// 15 minutes) instead. Ollama down (connection refused, every request
// failing) stays an outage: the gate holds the runner until it is back.
func (c *Compactor) modelFailed(ctx context.Context, err error) bool {
	if c.reachable == nil || !errors.Is(err, llm.ErrUnavailable) {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return c.reachable(pctx) == nil
}

// outage reports whether err is one the runner waits out (the model down
// or missing, the project's token budget spent) or will never fix (an
// invalid request): not a failure to count.
func outage(err error) bool {
	return errors.Is(err, llm.ErrUnavailable) || errors.Is(err, llm.ErrModelMissing) ||
		errors.Is(err, llm.ErrBudgetExhausted) || errors.Is(err, llm.ErrInvalidRequest)
}

// failed counts a failed attempt at a boundary (in the store) and returns
// the FailedError with its delay, final after Config.MaxFailures.
func (c *Compactor) failed(ctx context.Context, ref memory.SessionRef, upTo int64, cause error) error {
	key := recordKey(ref.Session, strconv.FormatInt(upTo, 10))
	failures := c.cfg.MaxFailures
	for k := 1; k <= c.cfg.MaxFailures; k++ {
		rk := key + "#" + strconv.Itoa(k)
		seen, err := c.store.EventProcessed(ctx, ref.ProjectRef(), recFailure, rk)
		if err != nil {
			return fmt.Errorf("compact: read failure record: %w", err)
		}
		if seen {
			continue
		}
		if err := c.store.MarkEventProcessed(ctx, ref.ProjectRef(), recFailure, rk, c.cfg.RecordTTL); err != nil {
			return fmt.Errorf("compact: record failure: %w", err)
		}
		failures = k
		break
	}
	e := &FailedError{Failures: failures, Err: cause}
	if failures >= c.cfg.MaxFailures {
		e.Final = true
	} else {
		e.Delay = c.cfg.delay(failures)
	}
	return e
}

// announce publishes compaction_done for the summary unless that was done
// (a record per boundary): after a save, and again at the next report when
// a crash came between the save and the publication. The event id is
// derived from the boundary, so a repeat within the duplicate window is
// dropped by the stream.
func (c *Compactor) announce(ctx context.Context, ref memory.SessionRef, sum memory.Summary) error {
	if c.pub == nil || sum.UpTo == 0 {
		return nil
	}
	key := recordKey(ref.Session, strconv.FormatInt(sum.UpTo, 10))
	done, err := c.store.EventProcessed(ctx, ref.ProjectRef(), recPublished, key)
	if err != nil {
		return fmt.Errorf("compact: read publication record: %w", err)
	}
	if done {
		return nil
	}
	ev := events.New(events.Ref{TenantID: ref.Tenant, ProjectID: ref.Project, SessionID: ref.Session},
		events.CompactionDone{UpTo: sum.UpTo, TokensBefore: sum.TokensBefore, TokensAfter: sum.TokensAfter})
	ev.ID = eventID(ref.ProjectRef(), key)
	if err := c.pub.Publish(ctx, ev); err != nil {
		return fmt.Errorf("compact: publish compaction_done: %w", err)
	}
	if err := c.store.MarkEventProcessed(ctx, ref.ProjectRef(), recPublished, key, c.cfg.RecordTTL); err != nil {
		return fmt.Errorf("compact: record publication: %w", err)
	}
	return nil
}

func recordKey(session, key string) string {
	return strconv.Itoa(len(session)) + ":" + session + ":" + key
}

func eventID(p memory.ProjectRef, key string) string {
	in := p.Project + "\x00compact\x00" + key
	if p.Tenant != "" {
		in = p.Tenant + "\x00" + in // the default tenant's ids stay as they were
	}
	sum := sha256.Sum256([]byte(in))
	return "c" + hex.EncodeToString(sum[:])[:25]
}
