package mcptool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// Store is what the tool needs of the memory store (memory.Store has it all).
type Store interface {
	memory.RetrievalStore
	memory.Counter
	Get(ctx context.Context, id string) (memory.Node, error)
	Update(ctx context.Context, id string, p memory.Patch) (memory.Node, error)
	Archive(ctx context.Context, id string) error
	Restore(ctx context.Context, id string) error
	Supersede(ctx context.Context, oldID, newID string) error
	SetEmbedding(ctx context.Context, id, model string, vec []float32) error
	HasPendingEmbeddings(ctx context.Context, p memory.ProjectRef, model string) (bool, error)
	Timeline(ctx context.Context, q memory.TimelineQuery) ([]memory.Node, error)
	Touch(ctx context.Context, ids []string) error
	Link(ctx context.Context, e memory.Edge) (memory.Edge, error)
	Unlink(ctx context.Context, src, dst string, rel memory.Relation) error
	Edges(ctx context.Context, id string) ([]memory.Edge, error)
	Neighbours(ctx context.Context, id string, hops int, f memory.Filter) ([]memory.Neighbour, error)
	Cursor(ctx context.Context, s memory.SessionRef) (int64, error)
	Messages(ctx context.Context, s memory.SessionRef, afterID int64, limit int) ([]memory.Message, error)
	LatestSummary(ctx context.Context, s memory.SessionRef) (memory.Summary, error)
}

var _ Store = memory.Store(nil)

// Embedder embeds recall queries and updated memories: the process's
// embedder, the one the injector's readiness gate waits for.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Model() string
}

// Config holds the tool's settings. The recall settings are the
// injector's, so that a deliberate look-up ranks as the block does.
type Config struct {
	MinConfidence    float64  // recall drops hits under it (ENGRAM_INJECT_MIN_CONFIDENCE)
	CrossProject     bool     // scope "all" may reach the tenant's other projects' memories whose reach is anywhere
	DisabledProjects []string // memory is off for these projects: every operation is refused
	TextChars        int      // characters of a memory's text in an answer (DefaultTextChars)
	// Ranking weighs recall as the injector's does (inject.Config.RankingFor
	// the process's embedder); nil: memory.Retrieve's default.
	Ranking *memory.Ranking
}

// Limits of the operations.
const (
	MaxOps           = 20   // operations in one call
	DefaultTextChars = 1200 // characters of a memory's text in an answer
	DefaultRecall    = 10
	MaxRecall        = 40
	DefaultTimeline  = 20
	MaxTimeline      = 60
	// TimelineScan bounds the memories a time-range timeline reads (the
	// most recently updated first) to find those updated in the range.
	TimelineScan = 1000
)

// Validate lists every problem of c.
func (c Config) Validate() error {
	var errs []error
	if c.MinConfidence < 0 || c.MinConfidence > 1 {
		errs = append(errs, fmt.Errorf("mcptool: min confidence %v is outside [0, 1]", c.MinConfidence))
	}
	if c.TextChars != 0 && c.TextChars < 40 {
		errs = append(errs, fmt.Errorf("mcptool: text chars %d must be at least 40 (0: %d)", c.TextChars, DefaultTextChars))
	}
	return errors.Join(errs...)
}

// Caller is who calls the tool and for what: the tenant and the session's
// project bound every operation (Tenant "" is the default tenant; nothing
// of another tenant is ever read or changed, and its ids are "not found");
// Session (optional) is the conversation the agent is in
// (timeline's default, stats of the session, session-scoped memories);
// Principal names the caller in the log (the token's principal on HTTP).
//
// WritesGlobal lets the caller change the tenant's global memories (those
// of no project, which every project of the tenant sees): the local user
// over stdio, or on HTTP a principal whose token reaches every project (*)
// of its tenant. Any other caller
// may read them but not update, forget, restore or link them, so that one
// project's token cannot archive a preference every project follows.
type Caller struct {
	Tenant       string
	Project      string
	Session      string
	Principal    string
	WritesGlobal bool
}

func (c Caller) ref() memory.SessionRef {
	return memory.SessionRef{Tenant: c.Tenant, Project: c.Project, Session: c.Session}
}

// Tool runs the `memory` tool's operations over a store. It knows no
// transport: Server (server.go) puts it on MCP.
type Tool struct {
	store Store
	emb   Embedder
	cfg   Config
	now   func() time.Time
	log   *zap.Logger
	pub   Publisher
}

// publishWithin bounds a call's memory_changed publish (the call's changes
// are made whether or not it is published).
var publishWithin = 10 * time.Second

// Publisher publishes the tool's memory_changed events (an
// *events.Client).
type Publisher interface {
	Publish(ctx context.Context, e events.Envelope) error
}

// WithPublisher makes every call that changes memory publish one
// memory_changed on the bus, as the workers' edits do, so that what
// follows memory (a platform's cache, an audit) sees the agent's edits
// too. Without it nothing is published (engram mcp with no bus).
func WithPublisher(p Publisher) Option { return func(t *Tool) { t.pub = p } }

// Option configures a Tool.
type Option func(*Tool)

// WithClock sets the clock (tests).
func WithClock(now func() time.Time) Option { return func(t *Tool) { t.now = now } }

// WithLogger sets the logger of the audit lines (forget's reason); none
// by default.
func WithLogger(l *zap.Logger) Option { return func(t *Tool) { t.log = l } }

// New returns the tool on store with emb (required: recall without vectors
// is refused, as the injector skips it).
func New(store Store, emb Embedder, cfg Config, opts ...Option) (*Tool, error) {
	if store == nil || emb == nil {
		return nil, errors.New("mcptool: a store and an embedder are required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.TextChars == 0 {
		cfg.TextChars = DefaultTextChars
	}
	t := &Tool{store: store, emb: emb, cfg: cfg, now: time.Now, log: zap.NewNop()}
	for _, o := range opts {
		o(t)
	}
	return t, nil
}

// Run answers the operations of req in order. One failing operation
// reports its error in its result and the others still run; the error
// return is only for a request that cannot run at all (no project, too
// many operations, memory off for the project).
func (t *Tool) Run(ctx context.Context, c Caller, req Request) (Response, error) {
	if strings.TrimSpace(c.Project) == "" {
		return Response{}, errors.New("no project: the tool serves one project (engram mcp -project, or ?project= on HTTP)")
	}
	if slices.Contains(t.cfg.DisabledProjects, c.Project) {
		return Response{}, errors.New(inject.SkipMemoryOff)
	}
	if len(req.Ops) == 0 {
		return Response{}, errors.New("no operations: give ops, a list of {\"op\": \"recall\", ...}")
	}
	if len(req.Ops) > MaxOps {
		return Response{}, fmt.Errorf("%d operations: at most %d in one call", len(req.Ops), MaxOps)
	}
	resp := Response{Results: make([]Result, len(req.Ops))}
	var changes []events.Change
	failovers := memory.FailoversOf(t.store)
	for i, op := range req.Ops {
		r, err := t.run(ctx, c, op)
		if err != nil {
			r = Result{Error: memory.Neutralise(describe(err))}
		} else {
			r.OK = true
			changes = append(changes, changesOf(op, r)...)
			// A note may quote an embedder's or a store's error.
			r.Note = memory.Neutralise(r.Note)
		}
		// The op is echoed as given, which may be anything.
		r.Op = memory.Neutralise(op.Op)
		resp.Results[i] = r
	}
	if len(changes) > 0 {
		t.confirmDurable(ctx, c, req, &resp, failovers)
	}
	t.publish(ctx, c, changes)
	return resp, nil
}

// durable is a store that can confirm its writes durable (the SQLite
// store: its log synced to disk; the Redis store: on its replicas).
type durable interface {
	Durable(ctx context.Context) error
}

// confirmDurable waits until the store's writes are durable (on disk, on
// a replica). The changes are made either way; when it cannot confirm
// them, each write's result says that a server lost now could take the
// change with it, so that the agent checks before it relies on it; so does
// a failover since failovers, before the ops (memory.ConfirmDurable).
func (t *Tool) confirmDurable(ctx context.Context, c Caller, req Request, resp *Response, failovers uint64) {
	d, ok := t.store.(durable)
	if !ok {
		return
	}
	err := memory.ConfirmDurable(ctx, d, failovers)
	if err == nil {
		return
	}
	t.log.Warn("memory changes not confirmed durable", zap.String("project", c.Project), zap.String("principal", c.Principal), zap.Error(err))
	for i := range resp.Results {
		if r := &resp.Results[i]; r.OK && len(changesOf(req.Ops[i], *r)) > 0 {
			r.Note = strings.TrimSpace(r.Note + " Done, but not yet confirmed durable by the memory store: if its server is lost now, " +
				"the change may be lost with it; recall the memory before relying on it.")
		}
	}
}

// changesOf is what a successful operation changed.
func changesOf(op Op, r Result) []events.Change {
	id := strings.TrimSpace(op.ID)
	if r.Memory != nil {
		id = r.Memory.ID
	}
	switch op.Op {
	case OpUpdate:
		return []events.Change{{ID: id, Kind: events.ChangeUpdated}}
	case OpForget:
		return []events.Change{{ID: id, Kind: events.ChangeArchived}}
	case OpRestore:
		return []events.Change{{ID: id, Kind: events.ChangeRestored}}
	case OpLink:
		if r.Edge == nil {
			return nil
		}
		if r.Edge.Relation == memory.Supersedes {
			return []events.Change{{ID: r.Edge.From, Kind: events.ChangeLinked}, {ID: r.Edge.To, Kind: events.ChangeSuperseded}}
		}
		return []events.Change{{ID: r.Edge.From, Kind: events.ChangeLinked}, {ID: r.Edge.To, Kind: events.ChangeLinked}}
	}
	return nil
}

// publish sends one memory_changed for a call's changes, in the caller's
// project and session. The changes are made: a failed publish is logged,
// not reported as the call's failure.
func (t *Tool) publish(ctx context.Context, c Caller, changes []events.Change) {
	if t.pub == nil || len(changes) == 0 {
		return
	}
	ev := events.New(events.Ref{TenantID: c.Tenant, ProjectID: c.Project, SessionID: c.Session}, events.MemoryChanged{Changes: changes})
	// The caller's context may have no deadline (an MCP call over stdio, a
	// console request): a publish re-sent while the stream does not answer
	// would hold the call, whose changes are made, for ever.
	ctx, cancel := context.WithTimeout(ctx, publishWithin)
	defer cancel()
	if err := t.pub.Publish(ctx, ev); err != nil {
		t.log.Warn("memory_changed not published", zap.String("project", c.Project), zap.String("principal", c.Principal),
			zap.Int("changes", len(changes)), zap.Error(err))
	}
}

func (t *Tool) run(ctx context.Context, c Caller, op Op) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	switch op.Op {
	case OpRecall:
		return t.recall(ctx, c, op)
	case OpUpdate:
		return t.update(ctx, c, op)
	case OpNeighbours:
		return t.neighbours(ctx, c, op)
	case OpTimeline:
		return t.timeline(ctx, c, op)
	case OpLink:
		return t.link(ctx, c, op)
	case OpForget:
		return t.forget(ctx, c, op)
	case OpRestore:
		return t.restore(ctx, c, op)
	case OpStats:
		return t.stats(ctx, c)
	case "remember":
		return Result{}, errors.New(`there is no "remember": Engram records decisions, preferences and lessons from the conversation itself`)
	}
	return Result{}, fmt.Errorf("unknown op %q: want one of %s", op.Op, strings.Join(OpNames, ", "))
}

// notFound is what an id the caller may not see, or that does not exist,
// answers: the same words either way. It is memory.ErrNotFound.
type notFound string

func (e notFound) Error() string      { return fmt.Sprintf("memory %q not found", string(e)) }
func (notFound) Is(target error) bool { return target == memory.ErrNotFound }

func errNotFound(id string) error { return notFound(id) }

// describe turns an operation's error into the words the agent reads.
func describe(err error) string {
	switch {
	case errors.Is(err, memory.ErrUnavailable):
		return "the memory store is unavailable; try again later"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "the call was cancelled or timed out"
	}
	return err.Error()
}

// load returns the node id if the caller may see it: memory.Visible under
// the caller's project and session, archived and closed nodes included;
// for a write, only the project's own nodes and global ones (those only
// for a caller that WritesGlobal, else "not allowed"), for a read
// also other projects' nodes whose reach is anywhere when cross-project
// recall is on. Anything else is "not found", exactly as an unknown id.
func (t *Tool) load(ctx context.Context, c Caller, id string, write bool) (memory.Node, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return memory.Node{}, fmt.Errorf("%w: an id is required", memory.ErrInvalid)
	}
	n, err := t.store.Get(ctx, id)
	if memory.IsNotFound(err) {
		return memory.Node{}, errNotFound(id)
	}
	if err != nil {
		return memory.Node{}, err
	}
	f := memory.Filter{TenantID: c.Tenant, ProjectID: c.Project, SessionID: c.Session, CrossProject: !write && t.cfg.CrossProject,
		IncludeArchived: true, IncludeSuperseded: true}
	if !memory.Visible(&n, f, t.now()) {
		return memory.Node{}, errNotFound(id)
	}
	if write && n.ProjectID == "" && !c.WritesGlobal {
		return memory.Node{}, fmt.Errorf("not allowed: memory %q is global (every project sees it) and only the local user "+
			"(engram mcp over stdio) or a token that reaches every project may change it; reading it is allowed", id)
	}
	return n, nil
}

// readFilter is what the caller sees of live memory (neighbours).
func (t *Tool) readFilter(c Caller, cross bool) memory.Filter {
	return memory.Filter{TenantID: c.Tenant, ProjectID: c.Project, SessionID: c.Session, CrossProject: cross && t.cfg.CrossProject}
}

// memoryOf describes n for the answer: every text neutralised as in the
// memory block.
func (t *Tool) memoryOf(n *memory.Node, c Caller) Memory {
	m := Memory{
		ID:         n.ID,
		Kind:       n.Subkind,
		Scope:      n.Scope,
		Provenance: memory.Provenance(n, c.Project, nil),
		Text:       t.text(n),
		Validity:   validity(n),
		AssertedBy: n.AssertedBy,
		Source:     n.Source,
		Confidence: n.Confidence,
		UpdatedAt:  n.UpdatedAt,
	}
	return m
}

// text is the label and the whole body, neutralised (one line), cut to
// TextChars. It is neutralised before the cut as well, so that an override
// phrase straddling the cut cannot leave its first words behind.
func (t *Tool) text(n *memory.Node) string {
	label, body := strings.TrimSpace(n.Label), strings.TrimSpace(n.Body)
	text := label
	if body != "" && !strings.EqualFold(body, label) {
		if text != "" {
			text += ": "
		}
		text += body
	}
	text = memory.Neutralise(text)
	if utf8.RuneCountInString(text) > t.cfg.TextChars {
		r := []rune(text)
		text = memory.Neutralise(strings.TrimSpace(string(r[:t.cfg.TextChars-1])) + "…")
	}
	return text
}

func validity(n *memory.Node) Validity {
	v := Validity{From: n.ValidFrom, To: n.ValidTo, SupersededBy: n.SupersededBy, ArchivedAt: n.ArchivedAt, Stale: n.Stale()}
	if v.From.IsZero() {
		v.From = n.CreatedAt
	}
	switch {
	case !n.ArchivedAt.IsZero():
		v.State = StateArchived
	case n.SupersededBy != "":
		v.State = StateSuperseded
	case !n.ValidTo.IsZero():
		v.State = StateClosed
	default:
		v.State = StateLive
	}
	return v
}
