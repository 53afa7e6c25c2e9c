package consolidate

import (
	"context"
	"errors"
	"time"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// Memories is the node and edge side of the store the tools use.
type Memories interface {
	memory.RetrievalStore
	Get(ctx context.Context, id string) (memory.Node, error)
	Upsert(ctx context.Context, n memory.Node) (memory.UpsertResult, error)
	Revise(ctx context.Context, oldID string, n memory.Node) (memory.Node, error)
	Supersede(ctx context.Context, oldID, newID string) error
	Archive(ctx context.Context, id string) error
	Restore(ctx context.Context, id string) error
	Timeline(ctx context.Context, q memory.TimelineQuery) ([]memory.Node, error)
	SetEmbedding(ctx context.Context, id, model string, vec []float32) error
	PutBatch(ctx context.Context, nodes []memory.Node, edges []memory.Edge) error
	Link(ctx context.Context, e memory.Edge) (memory.Edge, error)
	Unlink(ctx context.Context, src, dst string, rel memory.Relation) error
	Edges(ctx context.Context, id string) ([]memory.Edge, error)
}

// Transcripts are the session's messages and its consolidation cursor.
type Transcripts interface {
	Messages(ctx context.Context, s memory.SessionRef, afterID int64, limit int) ([]memory.Message, error)
	Cursor(ctx context.Context, s memory.SessionRef) (int64, error)
	AdvanceCursor(ctx context.Context, s memory.SessionRef, to int64) (int64, error)
	SetCursor(ctx context.Context, s memory.SessionRef, to int64) error
}

// Leases keep two replicas off one session's pass.
type Leases interface {
	AcquireLease(ctx context.Context, s memory.SessionRef, name, owner string, ttl time.Duration) (bool, error)
	RenewLease(ctx context.Context, s memory.SessionRef, name, owner string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, s memory.SessionRef, name, owner string) error
}

// Store is everything the consolidator needs of the memory store.
type Store interface {
	Memories
	Transcripts
	Leases
	memory.Journal
}

// Chatter sends one chat call (llm.Client implements it).
type Chatter interface {
	Chat(ctx context.Context, req llm.Request) (llm.Response, error)
}

// windowTeller tells a role's context window (llm.Client: the setting,
// else the model's own from Ollama's /api/show, cached).
type windowTeller interface {
	ContextLength(ctx context.Context, role llm.Role) (int, error)
}

var _ windowTeller = (*llm.Client)(nil)

// Embedder turns texts into vectors (optional: without it remember's
// near-duplicate rule uses words only and recall the lexical channel).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Model() string
}

// Activity tells when a session's latest turn started, so that a pass
// parks when the user is back, and whether a turn of the session still
// waits for the extractor, so that a pass does not run on a transcript
// that lacks it. StreamActivity reads both from ENGRAM_IN, which every
// replica shares.
type Activity interface {
	// LastTurnStarted returns when the latest turn_started of the tenant's
	// session was published (zero: none known).
	LastTurnStarted(ctx context.Context, tenant, project, session string) (time.Time, error)
	// TurnEndedPending reports whether the session's latest turn_ended
	// has not been acknowledged by the extractor yet: its messages are not
	// in the stored transcript.
	TurnEndedPending(ctx context.Context, tenant, project, session string) (bool, error)
}

// Observer is told how each pass ended (its Verdict) and how many
// messages its window spanned (health.Metrics: passes and messages by
// verdict).
type Observer interface {
	ConsolidationPass(verdict string, messages int64)
}

// Publisher sends output events to ENGRAM_OUT.
type Publisher interface {
	Publish(ctx context.Context, e events.Envelope) error
}

var (
	_ Store   = memory.Store(nil)
	_ Chatter = (*llm.Client)(nil)
)

// LeaseName is the session lease of a pass.
const LeaseName = "consolidate"

// Errors.
var (
	// ErrLeaseLost: the session's lease expired during a pass; whoever
	// holds it next resumes the pass from its journal.
	ErrLeaseLost = memory.ErrLeaseLost
	// ErrTranscriptBehind: a turn_ended of the session still waits for
	// the extractor (paused by a model outage, restarted, or just behind),
	// so the stored transcript lacks it. The pass is not run; Classify
	// asks the runner to retry after BehindDelay. Without the wait the pass
	// would consolidate a partial (or empty) transcript and the rest of an
	// ended session would never be consolidated: no later idle comes.
	// It is transient: the runner's backoff (1 s, doubling, at most 5 min)
	// over the consolidator's 10 deliveries lets the extractor be about 8
	// minutes behind before the idle event is dead-lettered with this
	// reason (engram dlq replay retries it).
	ErrTranscriptBehind = errors.New("consolidate: the session's transcript is behind (a turn_ended waits for the extractor)")
	// ErrBusy: another pass holds the session's lease (Result.Busy). The
	// handler returns it, transient (the runner's backoff), rather than
	// acknowledge the event: a holder that dies, or one that parks because
	// a turn started after its own idle event, does not cover this event's
	// newer activity, and once it is acknowledged no other idle event may
	// come to finish the session (found by the chaos suite: a killed pass's
	// redelivery met its own stale lease, was acknowledged, and the session
	// stayed half consolidated). A retry after the holder let go is cheap:
	// it resumes the parked pass, or finds nothing after the cursor.
	ErrBusy = errors.New("consolidate: another pass holds the session; the idle event is retried until it finds the session free")
)

// Consolidator runs consolidation passes.
type Consolidator struct {
	store    Store
	chat     Chatter
	emb      Embedder
	ranking  *memory.Ranking
	activity Activity
	pub      Publisher
	obs      Observer
	cfg      Config
	now      func() time.Time
}

// Option configures a Consolidator.
type Option func(*Consolidator)

// WithClock sets the clock (tests).
func WithClock(now func() time.Time) Option { return func(c *Consolidator) { c.now = now } }

// WithEmbedder sets the embedder.
func WithEmbedder(e Embedder) Option { return func(c *Consolidator) { c.emb = e } }

// WithRanking sets how recall ranks (the injector's: inject.Config.RankingFor
// the embedder); without it memory.Retrieve's default.
func WithRanking(r memory.Ranking) Option { return func(c *Consolidator) { c.ranking = &r } }

// WithActivity sets how a new turn is noticed (without it a pass never parks).
func WithActivity(a Activity) Option { return func(c *Consolidator) { c.activity = a } }

// WithPublisher sets where consolidation_done goes (without it nothing is published).
func WithPublisher(p Publisher) Option { return func(c *Consolidator) { c.pub = p } }

// WithObserver sets who is told how each pass ended (metrics).
func WithObserver(o Observer) Option { return func(c *Consolidator) { c.obs = o } }

// New returns a consolidator.
func New(store Store, chat Chatter, cfg Config, opts ...Option) (*Consolidator, error) {
	var errs []error
	if store == nil {
		errs = append(errs, errors.New("consolidate: no store"))
	}
	if chat == nil {
		errs = append(errs, errors.New("consolidate: no chat model"))
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c := &Consolidator{store: store, chat: chat, cfg: cfg, now: time.Now}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Config returns the consolidator's constants.
func (c *Consolidator) Config() Config { return c.cfg }
