package consolidate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// Bounds of the tools' arguments.
const (
	MaxTextChars   = 400
	MaxTopicChars  = 60
	MaxReasonChars = 200
	MaxIDChars     = 40
	MaxQueryChars  = 300
)

// RecallArgs is one concrete look-up: a query, a date range, or "as of" a day.
type RecallArgs struct {
	Query string `json:"query,omitempty" llm:"maxLength=300" desc:"words of the one thing to look up"`
	From  string `json:"from,omitempty" llm:"maxLength=10" desc:"YYYY-MM-DD: memories written from this day on, newest first"`
	To    string `json:"to,omitempty" llm:"maxLength=10" desc:"YYYY-MM-DD: memories written up to this day, newest first"`
	AsOf  string `json:"as_of,omitempty" llm:"maxLength=10" desc:"YYYY-MM-DD: the facts that were valid on that day, revised ones included"`
}

// RememberArgs stores one durable fact.
type RememberArgs struct {
	Text           string `json:"text" llm:"maxLength=400" desc:"one atomic fact about the user or the project, a self-contained sentence"`
	Kind           string `json:"kind" llm:"enum=preference|decision|pattern|observation|failure" desc:"preference: a like, dislike or interest; decision: an intention or a choice made; pattern: a recurring activity or habit; observation: a fact about the user or project; failure: something that went wrong and why"`
	Topic          string `json:"topic,omitempty" llm:"maxLength=60" desc:"a durable topic the fact is about, or empty"`
	SaidByUser     bool   `json:"said_by_user,omitempty" desc:"true when the user said it in the conversation"`
	ConfirmSimilar bool   `json:"confirm_similar,omitempty" desc:"true to store it although a similar memory was reported: it is a different fact"`
	Reason         string `json:"reason,omitempty" llm:"maxLength=200" desc:"one line: why"`
}

// ReviseArgs replaces a fact the conversation overturned.
type ReviseArgs struct {
	ID         string `json:"id" llm:"maxLength=40" desc:"the short id in square brackets of the fact to replace, like f3"`
	Text       string `json:"text" llm:"maxLength=400" desc:"the fact as it now stands"`
	SaidByUser bool   `json:"said_by_user,omitempty" desc:"true when the user said it in the conversation"`
	Reason     string `json:"reason,omitempty" llm:"maxLength=200" desc:"one line: what overturned it"`
}

// ForgetArgs archives what was wrong.
type ForgetArgs struct {
	ID     string `json:"id" llm:"maxLength=40" desc:"the short id in square brackets of the memory to forget, like f3"`
	Reason string `json:"reason,omitempty" llm:"maxLength=200" desc:"one line: why it is wrong, passed or not about this user or project"`
}

// LinkArgs relates a memory to a topic.
type LinkArgs struct {
	ID       string `json:"id" llm:"maxLength=40" desc:"the short id in square brackets of the memory, like f3"`
	Topic    string `json:"topic" llm:"maxLength=60" desc:"the topic's name"`
	Relation string `json:"relation" llm:"enum=interested_in|involved_in|part_of|related_to|mentioned_with" desc:"interested_in: a like or interest; involved_in: an activity the user takes part in; part_of: a piece of a larger topic; related_to: about the topic; mentioned_with: came up together"`
	Reason   string `json:"reason,omitempty" llm:"maxLength=200" desc:"one line: why"`
}

// DoneArgs ends the pass.
type DoneArgs struct {
	Summary string `json:"summary,omitempty" llm:"maxLength=300" desc:"one line: what the pass changed"`
}

// The tools.
var (
	recallTool = llm.MustTool[RecallArgs](ToolRecall,
		"Look up one concrete point in memory: a query, or a date range (newest first), or the facts as of a day. Not needed before remember.")
	rememberTool = llm.MustTool[RememberArgs](ToolRemember,
		"Store one durable fact the conversation established. It refuses a fact memory already holds and holds a near-duplicate for review.")
	reviseTool = llm.MustTool[ReviseArgs](ToolRevise,
		"Replace a stored fact the conversation overturned. The old fact is closed, still readable as of earlier days.")
	forgetTool = llm.MustTool[ForgetArgs](ToolForget,
		"Forget (archive) a memory that was wrong, has passed, or is not about this user or project.")
	linkTool = llm.MustTool[LinkArgs](ToolLink,
		"Relate a memory to a durable topic (created when new).")
	unlinkTool = llm.MustTool[LinkArgs](ToolUnlink,
		"Remove a memory's relation to a topic; says whether there was one.")
	doneTool = llm.MustTool[DoneArgs](ToolDone,
		"End the pass: memory matches the conversation.")
)

func init() {
	for _, s := range AllTools() {
		llm.RegisterTool(s)
	}
}

// AllTools returns the specs of every memory tool.
func AllTools() []llm.ToolSpec {
	return []llm.ToolSpec{recallTool.Spec(), rememberTool.Spec(), reviseTool.Spec(), forgetTool.Spec(),
		linkTool.Spec(), unlinkTool.Spec(), doneTool.Spec()}
}

// offered returns the tools of the next step: none once the pass is done,
// recall withdrawn while it is blocked.
func offered(l *Ledger, lim Limits) []llm.ToolSpec {
	if l.Finished {
		return nil
	}
	var out []llm.ToolSpec
	for _, s := range AllTools() {
		if s.Name == ToolRecall && l.RecallBlocked(lim) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// pass is one running pass: its session, its journal and its clock.
type pass struct {
	c   *Consolidator
	ref memory.SessionRef
	rec *memory.Pass
	l   *Ledger
	now time.Time
	// said is what the user said in the pass's window (window.Said).
	said string
}

// intend journals a change before it is written, as pending: a pass cut
// off between the write and its settlement leaves the entry pending, and
// undo then looks at what is stored. Every write is journaled this way.
func (p *pass) intend(ctx context.Context, e memory.JournalEntry) error {
	e.Pending, e.At = true, p.now
	p.rec.Entries = append(p.rec.Entries, e)
	return p.c.save(ctx, p.rec, p.l)
}

// settle replaces the pending entry with what was written (nil: nothing
// was). Writes are sequential, so the pending entry is the last one.
func (p *pass) settle(e *memory.JournalEntry) {
	n := len(p.rec.Entries) - 1
	if n < 0 || !p.rec.Entries[n].Pending {
		return
	}
	if e == nil {
		p.rec.Entries = p.rec.Entries[:n]
		return
	}
	e.At, e.Pending = p.now, false
	p.rec.Entries[n] = *e
}

// callSettled is call, with the memories it created (each id's entry in
// the store's id index is on another slot than the project's, on a Redis
// Cluster another primary: created) waited for before the step's journal
// records them as applied (memory.Replicated, memory.Settle): the journal
// lives on the project's server, and a failover could keep it and lose an
// id's entry, leaving the memory unreachable by id. After a failover
// meanwhile each creation is written again as the journal holds it (a
// memory that survived is found by its digest and reinforced, which writes
// its id's entry again; one that did not is stored with its id) and waited
// for again (memory.SettleWritten); the call is not made again (its result
// stands). Replicas that do not acknowledge, or a call that failed after it
// created, leave the call's entries pending ("may not have been applied")
// and return the error.
func (p *pass) callSettled(ctx context.Context, tc llm.ToolCall, l *Ledger) (string, result, error) {
	rs, replicated := p.c.store.(memory.Replicated)
	failovers := memory.FailoversOf(p.c.store)
	from := len(p.rec.Entries)
	key, r, err := p.call(ctx, tc, l)
	made := created(p.rec.Entries[from:])
	if !replicated || len(made) == 0 {
		return key, r, err
	}
	if err == nil {
		err = p.settleCreated(ctx, rs, failovers, made)
	}
	if err != nil {
		// Not confirmed (the call failed after it created, or Settle
		// did): the call's entries may not have been applied.
		for i := from; i < len(p.rec.Entries); i++ {
			p.rec.Entries[i].Pending = true
		}
	}
	return key, r, err
}

// settleCreated waits for made on a replica, writing them again after
// each failover (memory.SettleWritten from failovers, memory.WriteAgain:
// a revision's replacement closes the memory it revises again; see
// callSettled).
func (p *pass) settleCreated(ctx context.Context, rs memory.Replicated, failovers uint64, made []creation) error {
	err := memory.SettleWritten(ctx, rs, failovers, func(ctx context.Context) error {
		for _, c := range made {
			if _, err := memory.WriteAgain(ctx, p.c.store, c.node, c.supersedes); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("consolidate: pass %s: %w", p.rec.ID, err)
	}
	return nil
}

// creation is a memory a call created, as it was written, and the memory
// it closed (a revision's old one; "" for none).
type creation struct {
	node       memory.Node
	supersedes string
}

// created lists the memories entries created (a remembered memory, a
// topic, a revision's replacement).
func created(entries []memory.JournalEntry) []creation {
	var out []creation
	for _, e := range entries {
		switch {
		case e.Pending || e.After == nil:
		case e.Op == memory.OpRemember && e.Before == nil:
			out = append(out, creation{node: *e.After})
		case e.Op == memory.OpRevise:
			out = append(out, creation{node: *e.After, supersedes: e.NodeID})
		}
	}
	return out
}

// result is what one call did (its journal entries are in the pass's
// record: see intend).
type result struct {
	Summary string
	Outcome Outcome
	Detail  string
	Cascade []string
}

func failed(format string, a ...any) result {
	return result{Summary: fmt.Sprintf(format, a...), Outcome: Outcome{Failed: 1}}
}

// callKey is the argument key of a call: its decoded arguments without the
// reason, so that the same call with other words counts as a repeat.
func callKey(v any) string {
	b, _ := json.Marshal(v)
	var m map[string]any
	if json.Unmarshal(b, &m) == nil {
		delete(m, "reason")
		b, _ = json.Marshal(m)
	}
	return string(b)
}

// call executes one tool call. A returned error is the store's (transient)
// or the context's: the pass stops and is resumed; a call the store refuses
// or whose arguments are wrong is a failed step the model is told about.
func (p *pass) call(ctx context.Context, tc llm.ToolCall, l *Ledger) (string, result, error) {
	lim := p.c.cfg.Limits
	switch tc.Name {
	case ToolRecall:
		if l.RecallBlocked(lim) {
			return "", failed("%s is withdrawn: decide instead", ToolRecall), nil
		}
		a, err := recallTool.Decode(tc)
		if err != nil {
			return "", failed("%v", err), nil
		}
		r, err := p.recall(ctx, a)
		return callKey(a), r, err
	case ToolRemember:
		a, err := rememberTool.Decode(tc)
		if err != nil {
			return "", failed("%v", err), nil
		}
		r, err := p.remember(ctx, a)
		return callKey(a), r, err
	case ToolRevise:
		a, err := reviseTool.Decode(tc)
		if err != nil {
			return "", failed("%v", err), nil
		}
		r, err := p.revise(ctx, a)
		return callKey(a), r, err
	case ToolForget:
		a, err := forgetTool.Decode(tc)
		if err != nil {
			return "", failed("%v", err), nil
		}
		r, err := p.forget(ctx, a)
		return callKey(a), r, err
	case ToolLink, ToolUnlink:
		a, err := linkTool.Decode(llm.ToolCall{ID: tc.ID, Name: ToolLink, Arguments: tc.Arguments})
		if err != nil {
			return "", failed("%v", err), nil
		}
		var r result
		if tc.Name == ToolLink {
			r, err = p.link(ctx, a)
		} else {
			r, err = p.unlink(ctx, a)
		}
		return callKey(a), r, err
	case ToolDone:
		a, err := doneTool.Decode(tc)
		if err != nil {
			a = DoneArgs{} // done is done, whatever it said
		}
		s := "done"
		if t := oneLine(memory.Redact(a.Summary)); t != "" {
			s = "done: " + capChars(t, 200)
		}
		return callKey(a), result{Summary: s}, nil
	}
	return "", failed("there is no tool %q", capChars(tc.Name, 60)), nil
}

// transient reports whether a store error should stop the pass (it is
// resumed) rather than be told to the model.
func transient(err error) bool {
	return err != nil && !errors.Is(err, memory.ErrNotFound) && !errors.Is(err, memory.ErrInvalid) && !errors.Is(err, memory.ErrRefused)
}

// ---- recall ----

func parseDay(s string) (time.Time, error) {
	t, err := time.Parse(time.DateOnly, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a YYYY-MM-DD day", capChars(s, 20))
	}
	return t, nil
}

func (p *pass) filter() memory.Filter {
	return memory.Filter{TenantID: p.ref.Tenant, ProjectID: p.ref.Project, SessionID: p.ref.Session}
}

func (p *pass) recall(ctx context.Context, a RecallArgs) (result, error) {
	lim := p.c.cfg.RecallHits
	var nodes []memory.Node
	var what string
	switch {
	case strings.TrimSpace(a.AsOf) != "":
		day, err := parseDay(a.AsOf)
		if err != nil {
			return failed("%v", err), nil
		}
		at := day.Add(24*time.Hour - time.Nanosecond)
		ns, err := p.c.store.Timeline(ctx, memory.TimelineQuery{Filter: p.filter(), AsOf: at, Limit: lim})
		if err != nil {
			return result{}, fmt.Errorf("consolidate: recall as of: %w", err)
		}
		nodes, what = ns, "as of "+day.Format(time.DateOnly)
	case strings.TrimSpace(a.From) != "" || strings.TrimSpace(a.To) != "":
		from, to := time.Time{}, p.now
		if strings.TrimSpace(a.From) != "" {
			d, err := parseDay(a.From)
			if err != nil {
				return failed("%v", err), nil
			}
			from = d
		}
		if strings.TrimSpace(a.To) != "" {
			d, err := parseDay(a.To)
			if err != nil {
				return failed("%v", err), nil
			}
			to = d.Add(24*time.Hour - time.Nanosecond)
		}
		ns, err := p.inRange(ctx, from, to, lim)
		if err != nil {
			return result{}, fmt.Errorf("consolidate: recall range: %w", err)
		}
		nodes = ns
		switch f, t := strings.TrimSpace(a.From), strings.TrimSpace(a.To); {
		case f == "":
			what = "up to " + t
		case t == "":
			what = "from " + f
		default:
			what = "from " + f + " to " + t
		}
	case strings.TrimSpace(a.Query) != "":
		q := memory.Query{Text: memory.Redact(a.Query), Filter: p.filter(), Limit: lim, Precise: true, Now: p.now, Ranking: p.c.ranking}
		if e := p.c.emb; e != nil {
			if vecs, err := e.Embed(ctx, []string{q.Text}); err == nil && len(vecs) == 1 {
				q.Vector, q.Model = vecs[0], e.Model()
			}
		}
		hits, err := memory.Retrieve(ctx, p.c.store, q)
		if err != nil {
			return result{}, fmt.Errorf("consolidate: recall: %w", err)
		}
		for _, h := range hits {
			nodes = append(nodes, h.Node)
		}
		what = fmt.Sprintf("%q", capChars(oneLine(a.Query), 80))
	default:
		return failed("recall needs a query, a date range or an as_of day"), nil
	}
	var lines []string
	for i := range nodes {
		lines = append(lines, memoryLine(&nodes[i], p.now, p.l.ShortID))
	}
	detail := "Recall " + what + " found nothing."
	if len(lines) > 0 {
		detail = "Recall " + what + " found:\n" + strings.Join(lines, "\n")
	}
	return result{Summary: fmt.Sprintf("recall %s: %d found", what, len(nodes)), Outcome: Outcome{Recalled: len(nodes)}, Detail: detail}, nil
}

// RangeScanMax bounds how many of the project's memories, newest first, a
// date-range recall reads looking for the range.
const RangeScanMax = 2000

// writtenAt is the day a memory counts as written for a date range.
func writtenAt(n *memory.Node) time.Time {
	if n.ValidFrom.IsZero() {
		return n.CreatedAt
	}
	return n.ValidFrom
}

// inRange returns up to lim memories written between from and to, newest
// first. The timeline (newest update first) is read in growing pages
// until the range is passed (the page's oldest was updated before from),
// lim are found, the memories end, or RangeScanMax were read.
func (p *pass) inRange(ctx context.Context, from, to time.Time, lim int) ([]memory.Node, error) {
	var out []memory.Node
	read := map[string]bool{}
	for size := memory.DefaultChannelLimit; ; size = min(size*4, RangeScanMax) {
		ns, err := p.c.store.Timeline(ctx, memory.TimelineQuery{Filter: p.filter(), Limit: size})
		if err != nil {
			return nil, err
		}
		for i := range ns {
			n := &ns[i]
			if read[n.ID] {
				continue
			}
			read[n.ID] = true
			if at := writtenAt(n); !at.Before(from) && !at.After(to) && len(out) < lim {
				out = append(out, *n)
			}
		}
		if len(out) >= lim || len(ns) < size || size >= RangeScanMax || ns[len(ns)-1].UpdatedAt.Before(from) {
			break
		}
	}
	slices.SortStableFunc(out, func(a, b memory.Node) int { return writtenAt(&b).Compare(writtenAt(&a)) })
	return out, nil
}

// ---- remember ----

// NormaliseFact is the text remember compares for a duplicate: lower-cased,
// whitespace collapsed, trailing punctuation trimmed.
func NormaliseFact(s string) string {
	s = strings.Join(strings.Fields(strings.ToLower(s)), " ")
	return strings.TrimRightFunc(s, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) })
}

// factText is the text a memory states.
func factText(n *memory.Node) string {
	if n.Body != "" && !strings.HasPrefix(n.Body, n.Label) {
		return n.Label + " " + n.Body
	}
	if n.Body != "" {
		return n.Body
	}
	return n.Label
}

// newFact is the memory a remember or revise writes. A fact the model says
// the user said (said_by_user) is asserted by the user only when it shares
// a word with what the user said in the window (memory.Grounded, the
// extractor's rule): otherwise it is inferred, of confidence
// memory.UngroundedConfidence, so that no pass writes a standing
// instruction in the user's name from a model's invention, a copied
// example or text in a tool result.
func (p *pass) newFact(text string, kind memory.Subkind, byUser bool) memory.Node {
	n := memory.Node{TenantID: p.ref.Tenant, Subkind: kind, Scope: memory.ScopeProject, ProjectID: p.ref.Project, SessionID: p.ref.Session,
		Source: memory.SourceAgent, AssertedBy: memory.AssertedInferred, Confidence: 0.6}
	if byUser {
		n.AssertedBy, n.Confidence = memory.AssertedUser, 0.9
		if !memory.Grounded(text, p.said) {
			n.AssertedBy, n.Confidence = memory.AssertedInferred, memory.UngroundedConfidence
		}
	}
	if r := []rune(text); len(r) > 200 {
		n.Label, n.Body = capChars(text, 200), text
	} else {
		n.Label = text
	}
	return n
}

// facts are the recent live facts of the project (not topics or entities).
func (p *pass) facts(ctx context.Context, limit int) ([]memory.Node, error) {
	ns, err := p.c.store.Timeline(ctx, memory.TimelineQuery{Filter: p.filter(), Limit: limit * 2})
	if err != nil {
		return nil, fmt.Errorf("consolidate: recent facts: %w", err)
	}
	out := ns[:0]
	for _, n := range ns {
		if n.Subkind != memory.Topic && n.Subkind != memory.EntityKind && len(out) < limit {
			out = append(out, n)
		}
	}
	return out, nil
}

func (p *pass) remember(ctx context.Context, a RememberArgs) (result, error) {
	text := oneLine(memory.Redact(a.Text))
	if text == "" {
		return failed("remember needs a text"), nil
	}
	kind := memory.Subkind(a.Kind)
	if !kind.Valid() || kind == memory.Topic || kind == memory.EntityKind {
		return failed("unknown kind %q", capChars(a.Kind, 30)), nil
	}
	norm := NormaliseFact(text)
	recent, err := p.facts(ctx, p.c.cfg.RecentFacts)
	if err != nil {
		return result{}, err
	}
	// The same text: among the recent facts, or wherever the lexical
	// channel finds it, forgotten and closed memories included.
	cands := slices.Clone(recent)
	if terms := memory.Terms(text); len(terms) > 0 {
		f := p.filter()
		f.IncludeArchived, f.IncludeSuperseded = true, true
		sc, err := p.c.store.Lexical(ctx, terms, f, 8)
		if err != nil {
			return result{}, fmt.Errorf("consolidate: duplicate look-up: %w", err)
		}
		ids := make([]string, len(sc))
		for i, s := range sc {
			ids[i] = s.ID
		}
		more, err := p.c.store.GetMany(ctx, ids)
		if err != nil {
			return result{}, fmt.Errorf("consolidate: duplicate look-up: %w", err)
		}
		cands = append(cands, more...)
	}
	var twin *memory.Node // the same text, forgotten or closed
	for i := range cands {
		if NormaliseFact(factText(&cands[i])) != norm {
			continue
		}
		if !cands[i].Live() {
			if twin == nil {
				twin = &cands[i]
			}
			continue
		}
		return result{Summary: fmt.Sprintf("refused: memory already holds %s", p.name(cands[i].ID)), Outcome: Outcome{Duplicates: 1},
			Detail: "Already stored: " + memoryLine(&cands[i], p.now, p.l.ShortID)}, nil
	}
	if twin != nil {
		// An earlier pass forgot it (or a revision closed it) and the
		// conversation states it again: it is live again, not stored
		// beside itself and not left forgotten.
		return p.rememberAgain(ctx, *twin, a)
	}
	var vec []float32
	if e := p.c.emb; e != nil {
		if vecs, err := e.Embed(ctx, []string{text}); err == nil && len(vecs) == 1 {
			vec = vecs[0]
		}
	}
	// confirm_similar answers a hold: it is honoured only for a text an
	// earlier step of this pass held.
	if confirmed := a.ConfirmSimilar && p.l.WasHeld(norm); !confirmed {
		var similar *memory.Node
		var why string
		if vec != nil {
			sc, err := p.c.store.Vector(ctx, p.c.emb.Model(), vec, p.filter(), 3)
			if err != nil && !errors.Is(err, memory.ErrInvalid) {
				return result{}, fmt.Errorf("consolidate: near-duplicate look-up: %w", err)
			}
			for _, s := range sc {
				if s.Score < p.c.cfg.SimilarCosine {
					break
				}
				n, err := p.c.store.Get(ctx, s.ID)
				if err != nil {
					if transient(err) {
						return result{}, fmt.Errorf("consolidate: near-duplicate look-up: %w", err)
					}
					continue
				}
				if n.Subkind != memory.Topic && n.Subkind != memory.EntityKind && !PieceOf(text, factText(&n)) {
					similar, why = &n, fmt.Sprintf("cosine %.2f", s.Score)
					break
				}
			}
		}
		if similar == nil && len(recent) > 0 {
			// Word overlap against the recent facts, each word weighed
			// by how many of them (and the new fact) share it.
			mine := splitWords(text)
			facts := []factWords{mine}
			for i := range recent {
				facts = append(facts, splitWords(factText(&recent[i])))
			}
			ws := newWordStats(facts)
			for i := range recent {
				other := facts[i+1]
				if o := overlap(mine, other, ws); o >= p.c.cfg.SimilarOverlap && !pieceOf(mine, other) {
					similar, why = &recent[i], fmt.Sprintf("word overlap %.2f", o)
					break
				}
			}
		}
		if similar != nil {
			p.l.Hold(norm)
			// The held fact waits in the journal for a person's review
			// (the console's queue: keep both, merge, discard).
			held := p.newFact(text, kind, a.SaidByUser)
			p.rec.Entries = append(p.rec.Entries, memory.JournalEntry{Op: memory.OpHold, NodeID: similar.ID, After: &held, Reason: why, At: p.now})
			if err := p.c.save(ctx, p.rec, p.l); err != nil {
				return result{}, err
			}
			r := result{Summary: fmt.Sprintf("held for review: close to %s (%s)", p.name(similar.ID), why), Outcome: Outcome{Held: 1},
				Detail: fmt.Sprintf("Not stored: %q is close to %s. If it is a different fact, call %s again with confirm_similar true; if it says the same, leave it; if it replaces it, call %s.",
					capChars(text, 120), memoryLine(similar, p.now, p.l.ShortID), ToolRemember, ToolRevise)}
			if a.ConfirmSimilar {
				r.Summary += "; confirm_similar applies only to a fact held earlier in this pass"
				r.Detail = "confirm_similar applies only to a fact held for review earlier in this pass; this one had not been held. " + r.Detail
			}
			return r, nil
		}
	}
	n := p.newFact(text, kind, a.SaidByUser)
	n.ID = memory.NewID() // known before the write, for the journal
	intended := n
	if err := p.intend(ctx, memory.JournalEntry{Op: memory.OpRemember, NodeID: n.ID, After: &intended, Reason: reason(a.Reason)}); err != nil {
		return result{}, err
	}
	up, err := p.c.store.Upsert(ctx, n)
	if err != nil {
		if transient(err) {
			return result{}, fmt.Errorf("consolidate: remember: %w", err)
		}
		p.settle(nil)
		return failed("remember refused: %v", err), nil
	}
	stored := up.Node
	if !up.Created && !stored.Live() {
		// The same digest, forgotten or closed, missed by the look-up
		// above: nothing was written (a model's reinforcement leaves an
		// archived node archived); make it live again.
		p.settle(nil)
		return p.rememberAgain(ctx, stored, a)
	}
	entry := memory.JournalEntry{Op: memory.OpRemember, NodeID: stored.ID, After: &stored, Reason: reason(a.Reason)}
	r := result{Summary: fmt.Sprintf("stored %s %s", p.name(stored.ID), capChars(text, 80)), Outcome: Outcome{Stored: 1}}
	if !up.Created {
		r.Summary = fmt.Sprintf("reinforced %s %s", p.name(stored.ID), capChars(text, 80))
		entry.Before = &stored // a reinforcement is not undone
	}
	p.settle(&entry)
	p.embed(ctx, stored.ID, vec)
	return p.rememberTopic(ctx, r, stored.ID, kind, a)
}

// rememberTopic links a remembered fact to the topic its call named.
func (p *pass) rememberTopic(ctx context.Context, r result, id string, kind memory.Subkind, a RememberArgs) (result, error) {
	if topic := strings.TrimSpace(a.Topic); topic != "" {
		lr, err := p.link(ctx, LinkArgs{ID: p.l.ShortID(id), Topic: topic, Relation: string(relationFor(kind)), Reason: a.Reason})
		if err != nil {
			return r, err
		}
		r.Summary += "; " + lr.Summary
		r.Outcome.add(lr.Outcome)
	}
	return r, nil
}

// rememberAgain answers a remember of a fact memory holds forgotten (an
// earlier pass forgot it) or closed (a revision replaced it): the memory is
// restored and reported so, "restored [f3] ...: it had been forgotten",
// with the live memories linked to a closed one (its replacement among
// them) listed for review.
func (p *pass) rememberAgain(ctx context.Context, twin memory.Node, a RememberArgs) (result, error) {
	state := "forgotten"
	if twin.ArchivedAt.IsZero() {
		state = "closed by a revision"
	}
	restored, ok, err := p.restore(ctx, twin, reason(a.Reason))
	if err != nil {
		return result{}, err
	}
	if !ok {
		return failed("%s holds this fact, %s, and could not be restored", p.name(twin.ID), state), nil
	}
	r := result{Summary: fmt.Sprintf("restored %s %s: it had been %s", p.name(twin.ID), capChars(factText(&twin), 80), state),
		Outcome: Outcome{Restored: 1}}
	if state != "forgotten" {
		if r.Cascade, err = p.cascade(ctx, &restored, ""); err != nil {
			return r, err
		}
	}
	return p.rememberTopic(ctx, r, twin.ID, twin.Subkind, a)
}

// restore makes a forgotten or closed memory live again, journaled (undo
// puts it back as it was). false: the store refused.
func (p *pass) restore(ctx context.Context, n memory.Node, why string) (memory.Node, bool, error) {
	before := n
	if err := p.intend(ctx, memory.JournalEntry{Op: memory.OpRestore, NodeID: n.ID, Before: &before, Reason: why}); err != nil {
		return n, false, err
	}
	if err := p.c.store.Restore(ctx, n.ID); err != nil {
		if transient(err) {
			return n, false, fmt.Errorf("consolidate: restore %s: %w", n.ID, err)
		}
		p.settle(nil)
		return n, false, nil
	}
	after := memory.Restore(n, p.now)
	p.settle(&memory.JournalEntry{Op: memory.OpRestore, NodeID: n.ID, Before: &before, After: &after, Reason: why})
	return after, true, nil
}

// relationFor is the topic relation a remembered fact of kind gets.
func relationFor(kind memory.Subkind) memory.Relation {
	switch kind {
	case memory.Preference:
		return memory.InterestedIn
	case memory.Pattern, memory.Decision:
		return memory.InvolvedIn
	}
	return memory.RelatedTo
}

func reason(s string) string { return capChars(oneLine(memory.Redact(s)), MaxReasonChars) }

// embed stores the vector of a new memory when there is one (a failure is
// left to the backlog embedder).
func (p *pass) embed(ctx context.Context, id string, vec []float32) {
	if vec != nil && p.c.emb != nil {
		_ = p.c.store.SetEmbedding(ctx, id, p.c.emb.Model(), vec)
	}
}

// shortIDShape is what a short id looks like.
var shortIDShape = regexp.MustCompile(`^[fF][0-9]{1,6}$`)

// name is how the model knows a memory: its short id in square brackets.
func (p *pass) name(id string) string { return "[" + p.l.ShortID(id) + "]" }

// own loads a memory of this project the model named by its short id.
// A short id the pass never showed, or anything else (a stored id the model
// cannot have seen), is refused and the model told how memories are named.
func (p *pass) own(ctx context.Context, short string) (memory.Node, *result, error) {
	id, ok := p.l.Resolve(short)
	if !ok {
		given := strings.Trim(strings.TrimSpace(short), "[]")
		r := failed("there is no memory [%s] in this pass: name a memory by the short id shown in square brackets, like [f1]", capChars(given, 8))
		if !shortIDShape.MatchString(given) {
			// Not echoed whole: the model is never shown a stored id.
			r = failed("%q is not a memory's name: name a memory by the short id shown in square brackets, like [f1]", capChars(given, 8))
		}
		return memory.Node{}, &r, nil
	}
	n, err := p.c.store.Get(ctx, id)
	if memory.IsNotFound(err) {
		r := failed("%s no longer exists", p.name(id))
		return n, &r, nil
	}
	if err != nil {
		return n, nil, fmt.Errorf("consolidate: load %s: %w", id, err)
	}
	if n.TenantID != p.ref.Tenant || n.ProjectID != p.ref.Project {
		// Shown ids are this project's; a memory moved since is refused.
		r := failed("%s is not a memory of this project", p.name(id))
		return memory.Node{}, &r, nil
	}
	return n, nil, nil
}

// ---- revise and forget ----

func (p *pass) revise(ctx context.Context, a ReviseArgs) (result, error) {
	old, bad, err := p.own(ctx, a.ID)
	if err != nil || bad != nil {
		return deref(bad), err
	}
	if !old.Live() {
		return failed("%s is already closed or forgotten", p.name(old.ID)), nil
	}
	text := oneLine(memory.Redact(a.Text))
	if text == "" {
		return failed("revise needs the new text"), nil
	}
	if NormaliseFact(text) == NormaliseFact(factText(&old)) {
		return failed("the new text of %s is the same as the old", p.name(old.ID)), nil
	}
	n := p.newFact(text, old.Subkind, a.SaidByUser)
	n.Subkind, n.Scope, n.ProjectID = "", "", "" // inherited from old
	before := old
	if err := p.intend(ctx, memory.JournalEntry{Op: memory.OpRevise, NodeID: old.ID, Before: &before, Reason: reason(a.Reason)}); err != nil {
		return result{}, err
	}
	nn, err := p.c.store.Revise(ctx, old.ID, n)
	if err != nil {
		if transient(err) {
			return result{}, fmt.Errorf("consolidate: revise %s: %w", old.ID, err)
		}
		p.settle(nil)
		return failed("revise of %s refused: %v", p.name(old.ID), err), nil
	}
	p.settle(&memory.JournalEntry{Op: memory.OpRevise, NodeID: old.ID, NewID: nn.ID, Before: &before, After: &nn, Reason: reason(a.Reason)})
	if p.c.emb != nil {
		if vecs, err := p.c.emb.Embed(ctx, []string{text}); err == nil && len(vecs) == 1 {
			p.embed(ctx, nn.ID, vecs[0])
		}
	}
	r := result{
		Summary: fmt.Sprintf("revised %s into %s %s", p.name(old.ID), p.name(nn.ID), capChars(text, 80)),
		Outcome: Outcome{Revised: 1},
	}
	r.Cascade, err = p.cascade(ctx, &old, nn.ID)
	return r, err
}

func (p *pass) forget(ctx context.Context, a ForgetArgs) (result, error) {
	old, bad, err := p.own(ctx, a.ID)
	if err != nil || bad != nil {
		return deref(bad), err
	}
	if !old.ArchivedAt.IsZero() {
		return failed("%s is already forgotten", p.name(old.ID)), nil
	}
	if old.Source == memory.SourceUser || old.Pinned {
		return failed("%s was written or pinned by the user: it is not forgotten by a pass", p.name(old.ID)), nil
	}
	before := old
	if err := p.intend(ctx, memory.JournalEntry{Op: memory.OpForget, NodeID: old.ID, Before: &before, Reason: reason(a.Reason)}); err != nil {
		return result{}, err
	}
	if err := p.c.store.Archive(ctx, old.ID); err != nil {
		if transient(err) {
			return result{}, fmt.Errorf("consolidate: forget %s: %w", old.ID, err)
		}
		p.settle(nil)
		return failed("forget of %s refused: %v", p.name(old.ID), err), nil
	}
	after := memory.Archive(old, p.now)
	p.settle(&memory.JournalEntry{Op: memory.OpForget, NodeID: old.ID, Before: &before, After: &after, Reason: reason(a.Reason)})
	r := result{
		Summary: fmt.Sprintf("forgot %s %s", p.name(old.ID), capChars(factText(&old), 80)),
		Outcome: Outcome{Forgotten: 1},
	}
	r.Cascade, err = p.cascade(ctx, &old, "")
	return r, err
}

func deref(r *result) result {
	if r == nil {
		return result{}
	}
	return *r
}

// cascade lists the live memories that depend on a changed fact: linked
// to it by an edge (other than the revision's own), or sharing one of its
// entities among the project's recent facts.
func (p *pass) cascade(ctx context.Context, changed *memory.Node, replacement string) ([]string, error) {
	edges, err := p.c.store.Edges(ctx, changed.ID)
	if err != nil {
		return nil, fmt.Errorf("consolidate: cascade of %s: %w", changed.ID, err)
	}
	rel := map[string]string{}
	var ids []string
	for _, e := range edges {
		other := e.Dst
		if other == changed.ID {
			other = e.Src
		}
		if other == replacement || other == changed.ID {
			continue
		}
		if _, ok := rel[other]; !ok {
			ids = append(ids, other)
			rel[other] = string(e.Relation)
		}
	}
	if len(changed.Entities) > 0 {
		recent, err := p.facts(ctx, p.c.cfg.RecentFacts)
		if err != nil {
			return nil, err
		}
		keys := map[string]bool{}
		for _, e := range changed.Entities {
			keys[e.Key] = true
		}
		for _, n := range recent {
			if n.ID == changed.ID || n.ID == replacement {
				continue
			}
			for _, e := range n.Entities {
				if keys[e.Key] {
					if _, ok := rel[n.ID]; !ok {
						ids = append(ids, n.ID)
						rel[n.ID] = "shares " + e.Name
					}
					break
				}
			}
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	nodes, err := p.c.store.GetMany(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("consolidate: cascade of %s: %w", changed.ID, err)
	}
	var out []string
	for i := range nodes {
		n := &nodes[i]
		if !n.Live() || n.Subkind == memory.Topic {
			continue
		}
		out = append(out, memoryLine(n, p.now, p.l.ShortID)+" <- "+rel[n.ID])
		if len(out) == 8 {
			break
		}
	}
	return out, nil
}

// ---- link and unlink ----

// topicKey is the entity key a topic name is identified by.
func topicKey(name string) (memory.Entity, bool) {
	es := memory.NormaliseEntities([]memory.Entity{{Name: capChars(oneLine(memory.Redact(name)), MaxTopicChars)}})
	if len(es) == 0 {
		return memory.Entity{}, false
	}
	return es[0], true
}

func (p *pass) link(ctx context.Context, a LinkArgs) (result, error) {
	n, bad, err := p.own(ctx, a.ID)
	if err != nil || bad != nil {
		return deref(bad), err
	}
	rel := memory.Relation(a.Relation)
	if !isTopicRelation(rel) {
		return failed("unknown topic relation %q", capChars(a.Relation, 30)), nil
	}
	ent, ok := topicKey(a.Topic)
	if !ok {
		return failed("link needs a topic name"), nil
	}
	if n.Subkind == memory.Topic && n.EntityKey() == ent.Key {
		return failed("%s is that topic", p.name(n.ID)), nil
	}
	tn := memory.Node{ID: memory.NewID(), TenantID: p.ref.Tenant, Subkind: memory.Topic, Scope: memory.ScopeProject, ProjectID: p.ref.Project,
		Label: ent.Name, Entities: []memory.Entity{ent}, Source: memory.SourceAgent, AssertedBy: memory.AssertedInferred}
	intended := tn
	if err := p.intend(ctx, memory.JournalEntry{Op: memory.OpRemember, NodeID: tn.ID, After: &intended, Reason: "topic of " + n.ID}); err != nil {
		return result{}, err
	}
	up, err := p.c.store.Upsert(ctx, tn)
	if err != nil {
		if transient(err) {
			return result{}, fmt.Errorf("consolidate: topic %q: %w", ent.Name, err)
		}
		p.settle(nil)
		return failed("topic %q refused: %v", ent.Name, err), nil
	}
	topic := up.Node
	restored := ""
	switch {
	case up.Created:
		p.settle(&memory.JournalEntry{Op: memory.OpRemember, NodeID: topic.ID, After: &topic, Reason: "topic of " + n.ID})
	case !topic.Live():
		// The topic was forgotten (by a pass, or an undo of the pass
		// that made it): a link to it would point at nothing live.
		p.settle(nil)
		t, ok, err := p.restore(ctx, topic, "topic of "+n.ID)
		if err != nil {
			return result{}, err
		}
		if !ok {
			return failed("topic %q is forgotten and could not be restored", ent.Name), nil
		}
		topic, restored = t, " (restored: it had been forgotten)"
	default:
		p.settle(nil) // the topic existed: nothing to undo
	}
	edge := memory.Edge{Src: n.ID, Dst: topic.ID, Relation: rel, Source: memory.SourceAgent}
	if err := p.intend(ctx, memory.JournalEntry{Op: memory.OpLink, NodeID: n.ID, NewID: topic.ID, Edge: &edge, Reason: reason(a.Reason)}); err != nil {
		return result{}, err
	}
	e, err := p.c.store.Link(ctx, edge)
	if err != nil {
		if transient(err) {
			return result{}, fmt.Errorf("consolidate: link %s: %w", n.ID, err)
		}
		p.settle(nil)
		return failed("link of %s refused: %v", p.name(n.ID), err), nil
	}
	p.settle(&memory.JournalEntry{Op: memory.OpLink, NodeID: n.ID, NewID: topic.ID, Edge: &e, Reason: reason(a.Reason)})
	o := Outcome{Linked: 1}
	if restored != "" {
		o.Restored = 1
	}
	return result{Summary: fmt.Sprintf("linked %s %s topic %q%s", p.name(n.ID), rel, ent.Name, restored), Outcome: o}, nil
}

func (p *pass) unlink(ctx context.Context, a LinkArgs) (result, error) {
	n, bad, err := p.own(ctx, a.ID)
	if err != nil || bad != nil {
		return deref(bad), err
	}
	rel := memory.Relation(a.Relation)
	ent, ok := topicKey(a.Topic)
	if !ok || !isTopicRelation(rel) {
		return failed("unlink needs a topic name and a topic relation"), nil
	}
	edges, err := p.c.store.Edges(ctx, n.ID)
	if err != nil {
		return result{}, fmt.Errorf("consolidate: unlink %s: %w", n.ID, err)
	}
	var ends []string
	for _, e := range edges {
		if e.Src == n.ID && e.Relation == rel {
			ends = append(ends, e.Dst)
		}
	}
	topics, err := p.c.store.GetMany(ctx, ends)
	if err != nil {
		return result{}, fmt.Errorf("consolidate: unlink %s: %w", n.ID, err)
	}
	for _, t := range topics {
		if t.Subkind != memory.Topic || t.EntityKey() != ent.Key {
			continue
		}
		var closed memory.Edge
		for _, e := range edges {
			if e.Src == n.ID && e.Dst == t.ID && e.Relation == rel {
				closed = e
			}
		}
		live := closed
		if err := p.intend(ctx, memory.JournalEntry{Op: memory.OpUnlink, NodeID: n.ID, NewID: t.ID, Edge: &live, Reason: reason(a.Reason)}); err != nil {
			return result{}, err
		}
		if err := p.c.store.Unlink(ctx, n.ID, t.ID, rel); err != nil {
			if transient(err) {
				return result{}, fmt.Errorf("consolidate: unlink %s: %w", n.ID, err)
			}
			p.settle(nil)
			break
		}
		closed.ValidTo = p.now
		p.settle(&memory.JournalEntry{Op: memory.OpUnlink, NodeID: n.ID, NewID: t.ID, Edge: &closed, Reason: reason(a.Reason)})
		return result{Summary: fmt.Sprintf("unlinked %s %s topic %q: there was a link", p.name(n.ID), rel, ent.Name), Outcome: Outcome{Unlinked: 1}}, nil
	}
	return result{Summary: fmt.Sprintf("unlink %s %s topic %q: there was no such link", p.name(n.ID), rel, ent.Name)}, nil
}

func isTopicRelation(r memory.Relation) bool {
	switch r {
	case memory.InterestedIn, memory.InvolvedIn, memory.PartOf, memory.RelatedTo, memory.MentionedWith:
		return true
	}
	return false
}

// memoryLine renders a memory for the model: [short id] text (kind; valid
// from..to; active|closed), neutralised; name gives the short id.
func memoryLine(n *memory.Node, now time.Time, name func(id string) string) string {
	text := factText(n)
	if n.Subkind == memory.Topic {
		text = "topic: " + n.Label
	}
	state := "active"
	if !n.Live() || (!n.ValidTo.IsZero() && !n.ValidTo.After(now)) {
		state = "closed"
	}
	from := n.ValidFrom
	if from.IsZero() {
		from = n.CreatedAt
	}
	to := ""
	if !n.ValidTo.IsZero() {
		to = n.ValidTo.UTC().Format(time.DateOnly)
	}
	return fmt.Sprintf("[%s] %s (%s; valid from %s..%s; %s)", name(n.ID), memory.Neutralise(capChars(oneLine(text), 300)), n.Subkind,
		from.UTC().Format(time.DateOnly), to, state)
}
