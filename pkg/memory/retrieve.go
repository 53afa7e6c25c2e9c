package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Retrieval constants (issue 4). Channels and expansion use these; callers
// choose the limit, the confidence floor and whether to expand.
const (
	ChannelDepth      = 60   // candidates asked of each channel
	RRFK              = 60.0 // reciprocal-rank fusion constant
	AnchorActivation  = 1.0 / 120
	MaxAnchorPaths    = 40
	ExpansionSeeds    = 6
	ExpansionDecay    = 0.45
	ExpansionFanout   = 24
	ForeignFactor     = 0.85
	PinnedPrior       = 1.5
	StalePrior        = 0.7
	RecencyHalfDays   = 90.0
	PreciseMinSamples = 8
	PreciseFloor      = 0.35
	PreciseSD         = 1.0

	// TimeDepth is how many lexical candidates the time channel picks its
	// matches from (only for a question that names a span of time).
	TimeDepth = 400

	contradictionSpare = 8
	rescoreDepth       = 20                  // leading lexical candidates scored for the vector channel when it missed them
	expansionSample    = 4 * ExpansionFanout // edges of one seed considered
)

// Profile is the kind of a query, from the share of code-like tokens.
type Profile string

// The profiles.
const (
	ProfileProse Profile = "prose"
	ProfileMixed Profile = "mixed"
	ProfileCode  Profile = "code"
)

// Weights returns the lexical and vector channel weights of the profile.
func (p Profile) Weights() (lexical, vector float64) {
	switch p {
	case ProfileCode:
		return 1.4, 0.6
	case ProfileMixed:
		return 1.15, 0.85
	default:
		return 0.8, 1.2
	}
}

// Fusion kinds: how Retrieve combines its channels.
const (
	// FuseScores adds each channel's scores divided by the channel's best,
	// times the channel's weight: a hit's fused score says how much of the
	// best evidence it has, so gaps between scores mean something (the
	// block's relative floor reads them).
	FuseScores = "score"
	// FuseRanks is weighted reciprocal-rank fusion, weight / (RRFK + rank):
	// neighbours in a ranking score nearly the same however far apart their
	// evidence is.
	FuseRanks = "rrf"
)

// Ranking weighs Retrieve's channels and its prior. The weights are those
// of a prose question; a code-like question moves weight from the vector
// channel to the lexical one (Profile.Weights gives the factors).
type Ranking struct {
	Fusion   string  `json:"fusion"`   // FuseScores or FuseRanks
	Lexical  float64 `json:"lexical"`  // weight of BM25
	Vector   float64 `json:"vector"`   // weight of the vector channel
	Feedback float64 `json:"feedback"` // weight of the pseudo-relevance feedback channel (0: off)
	// Time is the weight of the time channel (0: off): when the question
	// names a span of the past ("last Saturday", "two months ago", see
	// TimeWindow), the lexical matches written within it.
	Time float64 `json:"time"`
	// Prior is how far the prior (feedback, recency, staleness, confidence)
	// moves a score: score x (1 - Prior + Prior x prior). 1: all of it; 0:
	// none. Pinned memories keep their whole prior whatever this says.
	Prior float64 `json:"prior"`
}

// Rankings measured with `engram eval` on the development set (see the
// package documentation of internal/inject for the figures).
var (
	// LexicalEmbedderRanking is the ranking for an embedder whose vectors
	// match shared words and fragments, not meaning (pkg/llm/hashembed):
	// its vector channel earns nothing beside stemmed BM25 with the label
	// weighed twice (vector 0.3 against 0: R@5 0.818 against 0.828, R@10
	// 0.897 against 0.904, longer blocks), so it is not searched at all;
	// without it the feedback channel earns less (0.3 against 0.5: R@1
	// 0.461 against 0.441, R@5 0.836 against 0.828, R@10 0.902 against
	// 0.904).
	LexicalEmbedderRanking = Ranking{Fusion: FuseScores, Lexical: 1, Vector: 0, Feedback: 0.3, Time: 0.5, Prior: 0.3}
	// SemanticEmbedderRanking is the ranking for an embedding model (Ollama):
	// both channels at equal weight. Not measured on our machines (no model
	// weights there): measure yours with engram eval -compare.
	SemanticEmbedderRanking = Ranking{Fusion: FuseScores, Lexical: 1, Vector: 1, Feedback: 0.5, Time: 0.5, Prior: 0.3}
)

// Validate lists every problem of r.
func (r Ranking) Validate() error {
	var errs []error
	if r.Fusion != FuseScores && r.Fusion != FuseRanks {
		errs = append(errs, fmt.Errorf("ranking: fusion %q is neither %q nor %q", r.Fusion, FuseScores, FuseRanks))
	}
	for _, w := range []struct {
		name string
		v    float64
	}{{"lexical", r.Lexical}, {"vector", r.Vector}, {"feedback", r.Feedback}, {"time", r.Time}} {
		if !(w.v >= 0) || math.IsInf(w.v, 0) {
			errs = append(errs, fmt.Errorf("ranking: %s weight %v must be a number >= 0", w.name, w.v))
		}
	}
	if !(r.Lexical+r.Vector > 0) {
		errs = append(errs, errors.New("ranking: the lexical and vector weights are both 0: nothing would rank"))
	}
	if !(r.Prior >= 0 && r.Prior <= 1) {
		errs = append(errs, fmt.Errorf("ranking: prior %v is outside [0, 1]", r.Prior))
	}
	return errors.Join(errs...)
}

// weights are the lexical and vector weights for a question of profile p:
// the prose weights moved by the profile's factors (Profile.Weights over
// the prose profile's).
func (r Ranking) weights(p Profile) (lexical, vector float64) {
	pl, pv := ProfileProse.Weights()
	l, v := p.Weights()
	return r.Lexical * l / pl, r.Vector * v / pv
}

// anchor is the activation an anchor path gives: AnchorActivation in
// reciprocal-rank units (about half a rank-1 hit of one channel), scaled
// to the fusion's unit.
func (r Ranking) anchor() float64 { return AnchorActivation * (RRFK + 1) * r.unit() }

// unit is what a rank-1 hit of one channel at weight 1 adds to a fused
// score: the scale of the anchor and graph activations.
func (r Ranking) unit() float64 {
	if r.Fusion == FuseRanks {
		return 1 / (RRFK + 1)
	}
	return 1
}

// QueryProfile classifies a query by the share of its whitespace-separated
// tokens that look like code: a path separator, a file extension, snake_case,
// camelCase or "()". >= 0.6 code, >= 0.2 mixed, otherwise prose.
func QueryProfile(query string) Profile {
	toks := strings.Fields(query)
	if len(toks) == 0 {
		return ProfileProse
	}
	code := 0
	for _, t := range toks {
		if codeLike(t) {
			code++
		}
	}
	share := float64(code) / float64(len(toks))
	switch {
	case share >= 0.6:
		return ProfileCode
	case share >= 0.2:
		return ProfileMixed
	}
	return ProfileProse
}

func codeLike(tok string) bool {
	t := strings.Trim(tok, "`'\",;:!?")
	if t == "" {
		return false
	}
	if strings.Contains(t, "()") || strings.ContainsAny(t, "/\\") {
		return true
	}
	rs := []rune(t)
	for i := 1; i < len(rs); i++ {
		// snake_case: a letter or digit on both sides of an underscore.
		if rs[i] == '_' && i+1 < len(rs) && isAlnum(rs[i-1]) && isAlnum(rs[i+1]) {
			return true
		}
		// camelCase: a lower-case letter followed by an upper-case one.
		if unicode.IsLower(rs[i-1]) && unicode.IsUpper(rs[i]) {
			return true
		}
	}
	// A file extension: name.ext with a short alphanumeric extension that
	// has a letter; not a dotted abbreviation of single letters ("e.g.",
	// "i.e.", "U.S.").
	t = strings.TrimRight(t, ".")
	if dot := strings.LastIndexByte(t, '.'); dot > 0 && dot < len(t)-1 && !singleLetters(t) {
		ext := t[dot+1:]
		if len(ext) <= 5 && strings.IndexFunc(ext, func(r rune) bool { return !isAlnum(r) }) < 0 &&
			strings.IndexFunc(ext, unicode.IsLetter) >= 0 {
			return true
		}
	}
	return false
}

func isAlnum(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// singleLetters reports whether every dot-separated part of t is one letter.
func singleLetters(t string) bool {
	for part := range strings.SplitSeq(t, ".") {
		if r := []rune(part); len(r) != 1 || !unicode.IsLetter(r[0]) {
			return false
		}
	}
	return true
}

// RetrievalStore is what retrieval needs of a store.
type RetrievalStore interface {
	Channels
	GetMany(ctx context.Context, ids []string) ([]Node, error)
	EdgesOf(ctx context.Context, ids []string) (map[string][]Edge, error)
}

// TextStore is an optional capability of a RetrievalStore that keeps the
// memories' text out of its memory and reads it on demand (the SQLite
// store: a body is 15 KB at LongMemEval size, and ranking reads none of
// it). GetHeads is GetMany without the bodies: every other field as
// GetMany returns it (the label too); a body may be there or empty.
// FillTexts sets the Body of each of nodes (matched by ID) as stored; a
// node rewritten since it was read may come back whole, as stored now,
// and one no longer stored (erased since, by this process or another)
// comes back with an empty ID.
// With it, Retrieve ranks on heads and reads the bodies of the hits it
// returns only (none with Query.LeaveText) and of the feedback channel's
// documents.
type TextStore interface {
	GetHeads(ctx context.Context, ids []string) ([]Node, error)
	FillTexts(ctx context.Context, nodes []Node) error
}

// FillHitTexts reads the bodies of hits that Retrieve returned with
// Query.LeaveText, when st keeps text out of memory (TextStore); from
// any other store the hits hold them already. It returns the hits
// without those no longer stored: a memory erased while the turn was
// ranking (by another replica too) is not shown with its label and no
// body.
func FillHitTexts(ctx context.Context, st any, hits []Hit) ([]Hit, error) {
	ts, ok := st.(TextStore)
	if !ok || len(hits) == 0 {
		return hits, nil
	}
	nodes := make([]Node, len(hits))
	for i := range hits {
		nodes[i] = hits[i].Node
	}
	if err := ts.FillTexts(ctx, nodes); err != nil {
		return nil, fmt.Errorf("retrieve: texts: %w", err)
	}
	kept := hits[:0]
	for i := range hits {
		if nodes[i].ID == "" {
			continue // gone
		}
		hits[i].Node = nodes[i]
		kept = append(kept, hits[i])
	}
	return kept, nil
}

// getHeads is st's GetHeads when it has one (TextStore), else GetMany.
func getHeads(ctx context.Context, st RetrievalStore, ids []string) ([]Node, error) {
	if ts, ok := st.(TextStore); ok {
		return ts.GetHeads(ctx, ids)
	}
	return st.GetMany(ctx, ids)
}

// ContradictionHints is an optional capability of a RetrievalStore: telling
// cheaply which nodes may be an end of a contradicts edge. Retrieve asks it
// beside the candidate load and then reads the edges of the hits only when
// at least two of them may contradict (on Redis a round trip fewer on the
// turn's path, and no edge read, when no two hits may contradict);
// without it, the edges of every hit are read.
type ContradictionHints interface {
	// MayContradict answers, for ids, whether each may be an end of a
	// live contradicts edge: false only when it is surely not. An id left
	// out of the map (unknown) counts as a maybe.
	MayContradict(ctx context.Context, ids []string) (map[string]bool, error)
}

// HintedHeads is an optional capability of a store that is a TextStore
// and ContradictionHints: GetHeads and MayContradict of the same ids in
// one call (on Redis one round trip instead of two). Retrieve loads the
// candidates, the graph neighbours and the conversation neighbours with
// it, so that every node a hit can be was asked about, and reads edges
// for the contradiction check only of those that may contradict.
type HintedHeads interface {
	GetHeadsHinted(ctx context.Context, ids []string) ([]Node, map[string]bool, error)
}

// VectorScorer is an optional capability of a RetrievalStore: the cosine
// similarity of a query vector to the stored vectors of given nodes. With
// it, Retrieve scores the lexical channel's candidates that the vector
// channel did not return and ranks them in that channel by their cosine
// (see rescoreLexical).
type VectorScorer interface {
	// VectorScores returns the cosine similarity of vec to the vector of
	// model of each of ids (in any order); an id without one is left out.
	VectorScores(ctx context.Context, model string, vec []float32, ids []string) ([]Scored, error)
}

// Query is one hybrid retrieval.
type Query struct {
	Text   string    // the words of the question; channels run only when TextMin is reached
	Vector []float32 // the embedded Text (optional: without it the vector channel is skipped)
	Model  string    // the model that made Vector
	// AnchorPaths are the repo-relative paths the session works in (the last
	// MaxAnchorPaths are used); memories attached to them come in with
	// AnchorActivation whatever the text says.
	AnchorPaths []string
	Filter      Filter // visibility; Filter.MinConfidence drops low-confidence hits
	Limit       int    // hits returned (default 24)
	Expand      bool   // one hop of graph expansion
	Precise     bool   // cut the vector channel at max(mean + 1 sd, 0.35) over >= 8 samples
	TextMin     int    // minimum query length (characters) for the text channels; 0: any
	Now         time.Time
	// Ranking weighs the channels and the prior (nil: LexicalEmbedderRanking,
	// the ranking of the built-in embedder).
	Ranking *Ranking
	// Explain sets Hit.Why: how each hit was scored, channel by channel.
	// It is computed after the ranking and changes nothing in it.
	Explain bool
	// LeaveText returns the hits without their bodies when the store
	// keeps text out of memory (TextStore): the caller reads those it
	// shows with FillHitTexts (the injector shows a dozen lines of 24
	// hits).
	LeaveText bool
}

// Hit is one retrieved memory with how it was scored.
type Hit struct {
	Node       Node    `json:"-"`
	ID         string  `json:"id"`
	Score      float64 `json:"score"`
	Fused      float64 `json:"fused"`      // reciprocal-rank fusion of the text channels
	Activation float64 `json:"activation"` // anchor paths and graph mass
	Prior      float64 `json:"prior"`
	Lexical    int     `json:"lexical_rank,omitempty"` // 1-based rank in the lexical channel
	Vector     int     `json:"vector_rank,omitempty"`
	Path       bool    `json:"path,omitempty"`
	Graph      bool    `json:"graph,omitempty"` // reached only through the graph
	// Conversation: its score is the share a leading hit next to it in
	// the conversation passed it (more than its own text score).
	Conversation bool `json:"conversation,omitempty"`
	Foreign      bool `json:"foreign,omitempty"`
	// Why is how it was scored, channel by channel (only with Query.Explain).
	Why *Why `json:"why,omitempty"`
}

type cand struct {
	fused, activation float64
	conv              float64 // the largest share a neighbour in the conversation passed (see converse)
	lexRank, vecRank  int
	path, direct      bool
}

// Retrieve runs hybrid retrieval: lexical BM25 (on the query's words,
// stemmed at query time: LexTerms), vector cosine and pseudo-relevance
// feedback fused as Query.Ranking says (by default each channel's scores
// over its best, weighted: FuseScores), anchor paths, optional one-hop
// graph expansion, the conversation around the leading hits (when the
// store implements Conversations: see converse), a prior from feedback,
// recency, staleness and
// confidence (moved by Ranking.Prior), and contradictions settled at read
// time. Hits are best first.
func Retrieve(ctx context.Context, st RetrievalStore, q Query) ([]Hit, error) {
	// The heads a store reads in one channel serve this call's loads.
	ctx = WithHeadCache(ctx)
	if q.Limit <= 0 {
		q.Limit = 24
	}
	if q.Now.IsZero() {
		q.Now = time.Now()
	}
	rk := LexicalEmbedderRanking
	if q.Ranking != nil {
		rk = *q.Ranking
	}
	var window *Window
	if rk.Time > 0 {
		if w, ok := TimeWindow(q.Text, q.Now); ok {
			window = &w
		}
	}
	lw, vw := rk.weights(QueryProfile(q.Text))
	if vw == 0 {
		// A channel that adds nothing is not searched (its hits would
		// only be candidates at score 0).
		q.Vector = nil
	}
	lex, vec, fb, byPath, deep, err := runChannels(ctx, st, q, rk.Feedback > 0, window != nil)
	if err != nil {
		return nil, err
	}
	var inWindow []Scored
	if window != nil {
		if inWindow, err = timeChannel(ctx, st, deep, *window); err != nil {
			return nil, err
		}
	}
	var cut float64 // precise mode: the vector channel's cut, from the search's own sample
	if q.Precise {
		cut = preciseThreshold(vec)
	}
	if vs, ok := st.(VectorScorer); ok && len(lex) > 0 && len(q.Vector) > 0 {
		if vec, err = rescoreLexical(ctx, vs, q, lex, vec); err != nil {
			return nil, err
		}
	}
	if cut > 0 {
		vec = atLeast(vec, cut)
	}
	// Sized for the direct candidates; graph neighbours may add a few.
	direct := len(lex) + len(vec) + len(fb) + len(byPath) + len(inWindow)
	cands := make(map[string]*cand, direct)
	slab := make([]cand, direct)
	get := func(id string) *cand {
		c := cands[id]
		if c == nil {
			if len(slab) > 0 {
				c, slab = &slab[0], slab[1:]
			} else {
				c = &cand{}
			}
			cands[id] = c
		}
		return c
	}
	fuse := func(sc []Scored, w float64, rank func(c *cand, r int)) {
		for i, s := range sc {
			c := get(s.ID)
			if rank != nil {
				rank(c, i+1)
			}
			c.direct = true
			if rk.Fusion == FuseRanks {
				c.fused += w / (RRFK + float64(i+1))
			} else if sc[0].Score > 0 {
				c.fused += w * s.Score / sc[0].Score
			}
		}
	}
	fuse(lex, lw, func(c *cand, r int) { c.lexRank = r })
	fuse(vec, vw, func(c *cand, r int) { c.vecRank = r })
	fuse(fb, rk.Feedback, nil)
	fuse(inWindow, rk.Time, nil)
	anchor := rk.anchor()
	for _, s := range byPath {
		c := get(s.ID)
		c.path = true
		c.direct = true
		c.activation += anchor
	}
	if len(cands) == 0 {
		return nil, nil
	}

	exp, loaded, hints, err := loadCandidates(ctx, st, q, cands, anchor)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*Node, len(loaded))
	for i := range loaded {
		byID[loaded[i].ID] = &loaded[i]
	}
	if exp != nil {
		exp.spread(q, byID, get)
	}
	if cs, ok := st.(Conversations); ok {
		if err := converse(ctx, cs, st, q, cands, byID, get, hints); err != nil {
			return nil, err
		}
	}
	ps := rk.Prior
	// Score every visible candidate, sort the scores, and make Hits (each
	// carries its whole node) only of those that can still make the cut,
	// with a few spare so that a contradiction's dropped loser leaves room
	// for the next one.
	type ranked struct {
		n       *Node
		c       *cand
		prior   float64
		score   float64
		foreign bool
	}
	rs := make([]ranked, 0, len(cands))
	for id, c := range cands {
		n := byID[id]
		if n == nil || !Visible(n, q.Filter, q.Now) || n.Confidence < q.Filter.MinConfidence {
			continue
		}
		r := ranked{n: n, c: c, prior: Prior(n, q.Now)}
		if !n.Pinned {
			r.prior = 1 - ps + ps*r.prior
		}
		base := c.activation
		if c.direct {
			base += max(c.fused, c.conv)
		} else {
			base += c.conv
		}
		r.foreign = n.ProjectID != "" && n.ProjectID != q.Filter.ProjectID
		r.score = base * r.prior
		if r.foreign {
			r.score *= ForeignFactor
		}
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(b.score, a.score), strings.Compare(a.n.ID, b.n.ID))
	})
	hits := make([]Hit, min(len(rs), q.Limit+contradictionSpare))
	for i := range hits {
		r := &rs[i]
		hits[i] = Hit{Node: *r.n, ID: r.n.ID, Score: r.score, Fused: r.c.fused, Activation: r.c.activation, Prior: r.prior,
			Lexical: r.c.lexRank, Vector: r.c.vecRank, Path: r.c.path, Graph: !r.c.direct && r.c.activation > 0,
			Conversation: r.c.conv > r.c.fused, Foreign: r.foreign}
	}
	hits, err = settleContradictions(ctx, st, hits, hints, q.Limit)
	if err != nil {
		return nil, err
	}
	if len(hits) > q.Limit {
		hits = hits[:q.Limit]
	}
	if q.Explain {
		explainHits(hits, explainInput{rk: rk, lw: lw, vw: vw, anchor: anchor, lex: lex, vec: vec, fb: fb,
			inWindow: inWindow, byPath: byPath, cands: cands, now: q.Now})
	}
	if !q.LeaveText {
		if hits, err = FillHitTexts(ctx, st, hits); err != nil {
			return nil, err
		}
	}
	return hits, nil
}

// loadCandidates loads the direct candidates and, beside that load (on
// Redis the round trips overlap instead of following one another): with
// expansion, reads the seeds' edges and loads the neighbours they reach
// that are not candidates; then, with ContradictionHints, asks about the
// candidates and those neighbours in one call (hints is nil without the
// capability).
func loadCandidates(ctx context.Context, st RetrievalStore, q Query, cands map[string]*cand, anchor float64) (*hop, []Node, map[string]bool, error) {
	ids := make([]string, 0, len(cands))
	for id := range cands {
		ids = append(ids, id)
	}
	hinter, _ := st.(ContradictionHints)
	if hh, ok := st.(HintedHeads); ok && hinter != nil {
		return loadHinted(ctx, st, hh, q, cands, ids, anchor)
	}
	var (
		exp         *hop
		loaded, nbs []Node
		hints       map[string]bool
		errs        [4]error // candidates, expansion, neighbours, hints
		wg          sync.WaitGroup
	)
	wrap := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("retrieve: %s: %w", what, err)
		}
		return nil
	}
	if q.Expand || hinter != nil {
		wg.Go(func() {
			var more []string
			if q.Expand {
				if exp, errs[1] = seedEdges(ctx, st, cands, anchor); errs[1] != nil {
					return
				}
				for _, id := range exp.neighbours() {
					if cands[id] == nil {
						more = append(more, id)
					}
				}
				if len(more) > 0 {
					wg.Go(func() {
						var err error
						nbs, err = getHeads(ctx, st, more)
						errs[2] = wrap("load neighbours", err)
					})
				}
			}
			if hinter != nil {
				var err error
				hints, err = hinter.MayContradict(ctx, slices.Concat(ids, more))
				errs[3] = wrap("contradiction hints", err)
			}
		})
	}
	var err error
	loaded, err = getHeads(ctx, st, ids)
	errs[0] = wrap("load candidates", err)
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return nil, nil, nil, err
	}
	return exp, append(loaded, nbs...), hints, nil
}

// loadHinted is loadCandidates with HintedHeads: the candidates' heads
// and hints in one call, and, beside it, the seeds' edges and then the
// neighbours' heads and hints in one call.
func loadHinted(ctx context.Context, st RetrievalStore, hh HintedHeads, q Query, cands map[string]*cand, ids []string, anchor float64) (*hop, []Node, map[string]bool, error) {
	var (
		exp               *hop
		loaded, nbs       []Node
		hints, nbHints    map[string]bool
		errExp, errLoaded error
		wg                sync.WaitGroup
	)
	if q.Expand {
		wg.Go(func() {
			if exp, errExp = seedEdges(ctx, st, cands, anchor); errExp != nil {
				return
			}
			var more []string
			for _, id := range exp.neighbours() {
				if cands[id] == nil {
					more = append(more, id)
				}
			}
			if len(more) > 0 {
				if nbs, nbHints, errExp = hh.GetHeadsHinted(ctx, more); errExp != nil {
					errExp = fmt.Errorf("retrieve: load neighbours: %w", errExp)
				}
			}
		})
	}
	loaded, hints, errLoaded = hh.GetHeadsHinted(ctx, ids)
	if errLoaded != nil {
		errLoaded = fmt.Errorf("retrieve: load candidates: %w", errLoaded)
	}
	wg.Wait()
	if err := errors.Join(errLoaded, errExp); err != nil {
		return nil, nil, nil, err
	}
	if hints == nil {
		hints = map[string]bool{}
	}
	maps.Copy(hints, nbHints)
	return exp, append(loaded, nbs...), hints, nil
}

// runChannels queries the channels the query asks for, concurrently: on
// SQLite they use both cores, on Redis their round trips overlap. The
// calling goroutine runs the last of them (the vector channel, the longest
// on SQLite) itself instead of waiting idle, one goroutine hand-off less
// on the turn's path.
//
// With withFeedback, the feedback channel follows the lexical one in the
// same goroutine (it needs the lexical hits), beside the vector search.
//
// With deepLexical the lexical channel is asked for TimeDepth candidates:
// deep holds them all, lex the first ChannelDepth (the time channel picks
// its matches from deep).
func runChannels(ctx context.Context, st RetrievalStore, q Query, withFeedback, deepLexical bool) (lex, vec, fb, byPath, deep []Scored, err error) {
	var (
		wg    sync.WaitGroup
		errs  [4]error
		tasks []func()
	)
	if paths := lastN(q.AnchorPaths, MaxAnchorPaths); len(paths) > 0 {
		tasks = append(tasks, func() {
			byPath, errs[2] = st.ByPaths(ctx, paths, q.Filter, ChannelDepth)
			if errs[2] != nil {
				errs[2] = fmt.Errorf("retrieve: path channel: %w", errs[2])
			}
		})
	}
	text := strings.TrimSpace(q.Text)
	if text != "" && len([]rune(text)) >= q.TextMin {
		if terms := Terms(text); len(terms) > 0 {
			tasks = append(tasks, func() {
				depth := ChannelDepth
				if deepLexical {
					depth = TimeDepth
				}
				lex, errs[0] = st.Lexical(ctx, terms, q.Filter, depth)
				if errs[0] != nil {
					errs[0] = fmt.Errorf("retrieve: lexical channel: %w", errs[0])
					return
				}
				if deep = lex; len(lex) > ChannelDepth {
					lex = lex[:ChannelDepth]
				}
				if withFeedback && len(lex) >= feedbackShared {
					fb, errs[3] = feedback(ctx, st, q, lex)
				}
			})
		}
		if len(q.Vector) > 0 {
			tasks = append(tasks, func() {
				vec, errs[1] = st.Vector(ctx, q.Model, q.Vector, q.Filter, ChannelDepth)
				if errs[1] != nil {
					errs[1] = fmt.Errorf("retrieve: vector channel: %w", errs[1])
				}
			})
		}
	}
	for i, task := range tasks {
		if i == len(tasks)-1 {
			task()
		} else {
			wg.Go(task)
		}
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return nil, nil, nil, nil, nil, err
	}
	return lex, vec, fb, byPath, deep, nil
}

// hop is one hop of graph expansion from the top direct hits: seedEdges
// reads the seeds' edges, spread passes their mass to the neighbours once
// Retrieve has loaded them (with the candidates, in one GetMany).
type hop struct {
	seeds   []string
	masses  []float64
	edgesOf map[string][]Edge
	nbAll   []string
}

// neighbours are the nodes the seeds' edges reach (nil for no hop).
func (h *hop) neighbours() []string {
	if h == nil {
		return nil
	}
	return h.nbAll
}

func seedEdges(ctx context.Context, st RetrievalStore, cands map[string]*cand, anchor float64) (*hop, error) {
	type seed struct {
		id   string
		base float64
	}
	seeds := make([]seed, 0, len(cands))
	for id, c := range cands {
		seeds = append(seeds, seed{id, c.fused + c.activation})
	}
	sort.Slice(seeds, func(i, j int) bool {
		if seeds[i].base != seeds[j].base {
			return seeds[i].base > seeds[j].base
		}
		return seeds[i].id < seeds[j].id
	})
	if len(seeds) > ExpansionSeeds {
		seeds = seeds[:ExpansionSeeds]
	}
	h := &hop{seeds: make([]string, len(seeds)), masses: make([]float64, len(seeds))}
	// Mass is computed from the seeds' direct scores before any graph mass lands.
	for i, s := range seeds {
		h.seeds[i] = s.id
		h.masses[i] = math.Max(cands[s.id].fused, anchor)
	}
	edgesOf, err := st.EdgesOf(ctx, h.seeds)
	if err != nil {
		return nil, fmt.Errorf("retrieve: expand: %w", err)
	}
	// Heavier edges first; a hub's edges are cut to a bounded sample so that
	// one topic node with thousands of links cannot stall a turn.
	for id, es := range edgesOf {
		sort.Slice(es, func(i, j int) bool {
			if es[i].Weight != es[j].Weight {
				return es[i].Weight > es[j].Weight
			}
			return es[i].Src+es[i].Dst < es[j].Src+es[j].Dst
		})
		if len(es) > expansionSample {
			edgesOf[id] = es[:expansionSample]
		}
	}
	h.edgesOf = edgesOf
	nbSeen := map[string]bool{}
	for _, s := range h.seeds {
		for _, e := range edgesOf[s] {
			for _, id := range []string{e.Src, e.Dst} {
				if id != s && !nbSeen[id] {
					nbSeen[id] = true
					h.nbAll = append(h.nbAll, id)
				}
			}
		}
	}
	return h, nil
}

// spread passes each seed's mass x ExpansionDecay, split evenly over at most
// ExpansionFanout eligible (visible, confident enough) neighbours.
func (h *hop) spread(q Query, byID map[string]*Node, get func(string) *cand) {
	for i, s := range h.seeds {
		var nbIDs []string
		seen := map[string]bool{s: true}
		for _, e := range h.edgesOf[s] {
			if !e.Live() {
				continue
			}
			other := e.Dst
			if other == s {
				other = e.Src
			}
			if seen[other] {
				continue
			}
			seen[other] = true
			nbIDs = append(nbIDs, other)
		}
		var eligible []*Node
		for _, id := range nbIDs {
			if nb := byID[id]; nb != nil && Visible(nb, q.Filter, q.Now) && nb.Confidence >= q.Filter.MinConfidence {
				eligible = append(eligible, nb)
			}
		}
		if len(eligible) > ExpansionFanout {
			eligible = eligible[:ExpansionFanout]
		}
		if len(eligible) == 0 {
			continue
		}
		share := h.masses[i] * ExpansionDecay / float64(len(eligible))
		for _, nb := range eligible {
			get(nb.ID).activation += share
		}
	}
}

// Prior is the ranking prior of a node: 1.5 when pinned; otherwise
// reinforcement x recency x staleness x confidence.
func Prior(n *Node, now time.Time) float64 {
	if n.Pinned {
		return PinnedPrior
	}
	reinf, recency, stale, conf := priorParts(n, now)
	return reinf * recency * stale * conf
}

// preciseCut keeps the vector candidates scoring at least max(mean + 1 sd,
// 0.35) when there are enough samples to trust the statistics.
func preciseCut(vec []Scored) []Scored { return atLeast(vec, preciseThreshold(vec)) }

// preciseThreshold is max(mean + 1 sd, 0.35) of the scores, or 0 (no cut)
// under PreciseMinSamples of them.
func preciseThreshold(vec []Scored) float64 {
	if len(vec) < PreciseMinSamples {
		return 0
	}
	var sum, sq float64
	for _, s := range vec {
		sum += s.Score
	}
	mean := sum / float64(len(vec))
	for _, s := range vec {
		sq += (s.Score - mean) * (s.Score - mean)
	}
	return math.Max(mean+PreciseSD*math.Sqrt(sq/float64(len(vec))), PreciseFloor)
}

// atLeast keeps the candidates scoring at least cut (all when cut <= 0).
func atLeast(vec []Scored, cut float64) []Scored {
	if cut <= 0 {
		return vec
	}
	out := vec[:0:0]
	for _, s := range vec {
		if s.Score >= cut {
			out = append(out, s)
		}
	}
	return out
}

// rescoreLexical adds to the vector channel the leading lexical candidates
// (rescoreDepth) it did not return, with their exact cosine, and keeps the
// best ChannelDepth by cosine. The vector search is approximate and misses
// neighbours: on the hashing embedder's vectors, which have no
// neighbourhood structure, even the nearest one (a memory at cosine 0.44
// left out of a top 60 that ended at 0.20, on the injector benchmark's
// corpus), and the memory a question names by its words is the one whose
// miss costs most. The channel stays what it was meant to be, the nearest
// of what was found, ranked by cosine; an exact search would rank the
// added ones at least as high.
func rescoreLexical(ctx context.Context, vs VectorScorer, q Query, lex, vec []Scored) ([]Scored, error) {
	have := make(map[string]bool, len(vec))
	for _, s := range vec {
		have[s.ID] = true
	}
	missing := make([]string, 0, min(len(lex), rescoreDepth))
	for _, s := range lex[:min(len(lex), rescoreDepth)] {
		if !have[s.ID] {
			missing = append(missing, s.ID)
		}
	}
	if len(missing) == 0 {
		return vec, nil
	}
	scores, err := vs.VectorScores(ctx, q.Model, q.Vector, missing)
	if err != nil {
		return nil, fmt.Errorf("retrieve: vector scores: %w", err)
	}
	out := slices.Clip(vec)
	for _, s := range scores {
		if s.Score > 0 && !have[s.ID] { // the channel returns positive cosines only
			have[s.ID] = true
			out = append(out, s)
		}
	}
	if len(out) == len(vec) {
		return vec, nil
	}
	slices.SortStableFunc(out, func(a, b Scored) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), strings.Compare(a.ID, b.ID))
	})
	return out[:min(len(out), ChannelDepth)], nil
}

// settleContradictions drops, for each contradicts edge with both ends in
// the results (the first limit hits still standing), the loser: higher
// authority wins, then wider scope, then the later update. A dropped loser
// lets the next hit in, which may settle another pair, so it repeats until
// nothing changes; a pair whose winner ranks below the results keeps its
// loser. With hints (ContradictionHints), only the edges of the hits that
// may contradict are read, and none when fewer than two may.
func settleContradictions(ctx context.Context, st RetrievalStore, hits []Hit, hints map[string]bool, limit int) ([]Hit, error) {
	if len(hits) < 2 {
		return hits, nil
	}
	idx := make(map[string]int, len(hits))
	for i, h := range hits {
		idx[h.ID] = i
	}
	ids := make([]string, 0, len(hits))
	for _, h := range hits {
		if maybe, asked := hints[h.ID]; hints == nil || maybe || !asked {
			ids = append(ids, h.ID)
		}
	}
	if len(ids) < 2 {
		return hits, nil
	}
	edgesOf, err := st.EdgesOf(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("retrieve: contradictions: %w", err)
	}
	type pair struct{ winner, loser int }
	var pairs []pair
	for i, h := range hits {
		for _, e := range edgesOf[h.ID] {
			if e.Relation != Contradicts || !e.Live() || e.Src != h.ID {
				continue
			}
			j, ok := idx[e.Dst]
			if !ok || j == i {
				continue
			}
			if ContradictionWinner(&hits[i].Node, &hits[j].Node) == &hits[i].Node {
				pairs = append(pairs, pair{i, j})
			} else {
				pairs = append(pairs, pair{j, i})
			}
		}
	}
	if len(pairs) == 0 {
		return hits, nil
	}
	dropped := make([]bool, len(hits))
	inResults := make([]bool, len(hits))
	for changed := true; changed; {
		changed = false
		n := 0
		for i := range hits {
			inResults[i] = !dropped[i] && n < limit
			if inResults[i] {
				n++
			}
		}
		for _, p := range pairs {
			if inResults[p.winner] && inResults[p.loser] && !dropped[p.winner] && !dropped[p.loser] {
				dropped[p.loser], changed = true, true
			}
		}
	}
	out := hits[:0]
	for i, h := range hits {
		if !dropped[i] {
			out = append(out, h)
		}
	}
	return out, nil
}

// ContradictionWinner returns the node that wins a contradiction: higher
// authority, then wider scope, then the later update (then the smaller id, so
// that the answer is stable).
func ContradictionWinner(a, b *Node) *Node {
	if ra, rb := a.AssertedBy.Rank(), b.AssertedBy.Rank(); ra != rb {
		return pick(ra > rb, a, b)
	}
	if sa, sb := a.Scope.Rank(), b.Scope.Rank(); sa != sb {
		return pick(sa > sb, a, b)
	}
	if !a.UpdatedAt.Equal(b.UpdatedAt) {
		return pick(a.UpdatedAt.After(b.UpdatedAt), a, b)
	}
	return pick(a.ID < b.ID, a, b)
}

func pick(first bool, a, b *Node) *Node {
	if first {
		return a
	}
	return b
}

func lastN(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Pseudo-relevance feedback: the leading lexical hits are taken as
// relevant, and BM25 runs again on the words they share (at least
// feedbackShared of them, not in the question, not stop words); the result
// is one more channel (Ranking.Feedback), fused with the question's own.
// It reaches memories that answer the question in other words than it
// asks in, through the words its first answers use.
const (
	feedbackDocs   = 5 // leading lexical hits read
	feedbackShared = 2 // of which a word must be in at least this many
	feedbackTerms  = 8 // words added
)

func feedback(ctx context.Context, st RetrievalStore, q Query, lex []Scored) ([]Scored, error) {
	top := lex[:min(feedbackDocs, len(lex))]
	ids := make([]string, len(top))
	weight := make(map[string]float64, len(top))
	for i, s := range top {
		ids[i] = s.ID
		weight[s.ID] = s.Score / lex[0].Score
	}
	nodes, err := st.GetMany(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("retrieve: feedback: %w", err)
	}
	terms := QueryTerms(q.Text)
	asked := make(map[string]bool, len(terms))
	for _, t := range terms {
		asked[t] = true
	}
	type word struct {
		docs int
		mass float64
	}
	words := map[string]*word{}
	for _, n := range nodes {
		seen := map[string]bool{}
		for _, t := range strings.FieldsFunc(strings.ToLower(n.Label+" "+n.Body), notWord) {
			if seen[t] || asked[t] || utf8.RuneCountInString(t) < 3 || stopWords[t] {
				continue
			}
			seen[t] = true
			w := words[t]
			if w == nil {
				w = &word{}
				words[t] = w
			}
			w.docs++
			w.mass += weight[n.ID]
		}
	}
	var shared []string
	for t, w := range words {
		if w.docs >= feedbackShared {
			shared = append(shared, t)
		}
	}
	if len(shared) == 0 {
		return nil, nil
	}
	slices.SortFunc(shared, func(a, b string) int {
		return cmp.Or(cmp.Compare(words[b].mass, words[a].mass), strings.Compare(a, b))
	})
	out, err := st.Lexical(ctx, shared[:min(feedbackTerms, len(shared))], q.Filter, ChannelDepth)
	if err != nil {
		return nil, fmt.Errorf("retrieve: feedback: %w", err)
	}
	return out, nil
}

// Written is when a memory was first written: its creation time, or its
// last update when that is earlier (an import keeps the update time it is
// given and stamps the creation with the time of the import).
func Written(n *Node) time.Time {
	t := n.CreatedAt
	if t.IsZero() || (!n.UpdatedAt.IsZero() && t.After(n.UpdatedAt)) {
		t = n.UpdatedAt
	}
	return t
}

func notWord(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// timeChannel is the time channel: of the lexical candidates (deep), those
// written within the question's window, with their lexical scores. A
// memory's time is when it was first written (CreatedAt, else UpdatedAt):
// "what did I buy last Saturday" asks when it was said, not when it was
// last reinforced.
func timeChannel(ctx context.Context, st RetrievalStore, deep []Scored, w Window) ([]Scored, error) {
	if len(deep) == 0 {
		return nil, nil
	}
	ids := make([]string, len(deep))
	for i, s := range deep {
		ids[i] = s.ID
	}
	nodes, err := getHeads(ctx, st, ids)
	if err != nil {
		return nil, fmt.Errorf("retrieve: time channel: %w", err)
	}
	in := make(map[string]bool, len(nodes))
	for i := range nodes {
		if w.Contains(Written(&nodes[i])) {
			in[nodes[i].ID] = true
		}
	}
	var out []Scored
	for _, s := range deep {
		if in[s.ID] {
			out = append(out, s)
		}
	}
	return out, nil
}
