package memory

import (
	"math"
	"time"
)

// Why says how Retrieve scored one hit (Query.Explain): every channel that
// found it with its rank and score there and what it added, the path and
// graph activations, the prior and its parts, and the final score and
// rank. It is computed after the ranking from what the ranking kept, so
// asking for it changes no score and costs nothing when not asked for.
//
// The score is (Activation + max(Fused, Conversation)) x Prior.Value, x
// ForeignFactor for another project's memory; a memory reached only
// through the graph has no Fused (its base is Activation + Conversation).
type Why struct {
	Rank  int     `json:"rank"` // 1-based place in the ranking
	Score float64 `json:"score"`
	// Channels are the channels that returned the memory: lexical (BM25),
	// vector (cosine), feedback (BM25 on the words the leading hits
	// share), time (a lexical match written within the question's span),
	// paths (attached to a path the session works in), graph (one hop
	// from a leading hit) and conversation (next to a leading hit in its
	// conversation).
	Channels   []ChannelWhy `json:"channels"`
	Fused      float64      `json:"fused"`      // the text channels' shares added
	Activation float64      `json:"activation"` // the paths and graph shares added
	// Conversation is the share a leading hit next to it in the
	// conversation passed it; it counts instead of Fused when larger.
	Conversation float64  `json:"conversation,omitempty"`
	Prior        PriorWhy `json:"prior"`
	Foreign      bool     `json:"foreign,omitempty"` // another project's memory: score x ForeignFactor
}

// The channel names of ChannelWhy.
const (
	ChannelLexical  = "lexical"
	ChannelVector   = "vector"
	ChannelFeedback = "feedback"
	ChannelTime     = "time"
	ChannelPaths    = "paths"
	ChannelGraph    = "graph"
	// ChannelConversation: next to a leading hit in the conversation it
	// was written in (the answer after a question, the context before);
	// its share counts instead of the text channels' when larger.
	ChannelConversation = "conversation"
)

// ChannelWhy is what one channel said of a memory.
type ChannelWhy struct {
	Channel string `json:"channel"`
	// Rank is the 1-based rank in the channel's own list (0 for the graph,
	// which has no list).
	Rank int `json:"rank,omitempty"`
	// Score is the channel's own score: BM25 for lexical, feedback and
	// time, the cosine for vector; for paths and graph the activation.
	Score  float64 `json:"score"`
	Weight float64 `json:"weight,omitempty"` // the channel's weight for this question
	// Share is what the channel added: to Fused for a text channel
	// (weight x score / the channel's best, or weight / (RRFK + rank) with
	// rank fusion), to Activation for paths and graph.
	Share float64 `json:"share"`
}

// PriorWhy is the prior of a memory and its parts (see Prior): 1.5 when
// pinned, otherwise reinforcement x recency x staleness x confidence,
// moved by the ranking's prior strength.
type PriorWhy struct {
	Value  float64 `json:"value"` // the factor the score was multiplied by
	Raw    float64 `json:"raw"`   // Prior before the strength moved it
	Pinned bool    `json:"pinned,omitempty"`
	// Reinforcement: weight and feedback counts (useful raises it,
	// unhelpful lowers it), at least 0.5.
	Reinforcement float64 `json:"reinforcement"`
	Useful        int     `json:"useful,omitempty"`    // times a turn judged it useful
	Unhelpful     int     `json:"unhelpful,omitempty"` // times a turn judged it unhelpful
	Recency       float64 `json:"recency"`             // 0.6 + 0.4 x e^(-days since last access / RecencyHalfDays)
	Staleness     float64 `json:"staleness"`           // StalePrior when the code it is attached to changed, else 1
	Confidence    float64 `json:"confidence"`          // 0.5 + 0.5 x confidence
	Strength      float64 `json:"strength"`            // Ranking.Prior (a pinned memory keeps its whole prior)
}

// priorParts are the factors of Prior for an unpinned node, in the order
// Prior multiplies them.
func priorParts(n *Node, now time.Time) (reinf, recency, stale, conf float64) {
	reinf = 1 + 0.15*math.Log1p(math.Max(0, n.Weight-1)) + 0.18*math.Log1p(float64(n.Useful)) -
		0.1*math.Log1p(float64(n.Unhelpful))
	reinf = math.Max(0.5, reinf)
	ref := n.AccessedAt
	if ref.IsZero() {
		ref = n.UpdatedAt
	}
	age := 0.0
	if !ref.IsZero() {
		age = math.Max(0, now.Sub(ref).Hours()/24)
	}
	recency = 0.6 + 0.4*math.Exp(-age/RecencyHalfDays)
	stale = 1
	if n.Stale() {
		stale = StalePrior
	}
	return reinf, recency, stale, 0.5 + 0.5*n.Confidence
}

// explainInput is what Retrieve hands explainHits: the channels' lists as
// they were fused, and the candidates.
type explainInput struct {
	rk                     Ranking
	lw, vw, anchor         float64
	lex, vec, fb, inWindow []Scored
	byPath                 []Scored
	cands                  map[string]*cand
	now                    time.Time
}

// explainHits sets Why on every hit. It reads the lists and candidates
// Retrieve fused and changes none of them: one pass over each channel's
// list, looking its ids up among the hits.
func explainHits(hits []Hit, in explainInput) {
	at := make(map[string]int, len(hits))
	for i := range hits {
		h := &hits[i]
		at[h.ID] = i
		h.Why = &Why{Rank: i + 1, Score: h.Score, Fused: h.Fused, Activation: h.Activation, Foreign: h.Foreign,
			Channels: make([]ChannelWhy, 0, 4)}
	}
	text := [...]struct {
		name string
		w    float64
		list []Scored
	}{
		{ChannelLexical, in.lw, in.lex},
		{ChannelVector, in.vw, in.vec},
		{ChannelFeedback, in.rk.Feedback, in.fb},
		{ChannelTime, in.rk.Time, in.inWindow},
	}
	for _, ch := range text {
		for r, s := range ch.list {
			i, ok := at[s.ID]
			if !ok || last(hits[i].Why.Channels) == ch.name {
				continue // not a hit, or listed twice (the first counts)
			}
			share := 0.0
			if in.rk.Fusion == FuseRanks {
				share = ch.w / (RRFK + float64(r+1))
			} else if ch.list[0].Score > 0 {
				share = ch.w * s.Score / ch.list[0].Score
			}
			hits[i].Why.Channels = append(hits[i].Why.Channels, ChannelWhy{Channel: ch.name, Rank: r + 1, Score: s.Score, Weight: ch.w, Share: share})
		}
	}
	graph := make([]float64, len(hits))
	for i := range hits {
		graph[i] = hits[i].Activation
	}
	for r, s := range in.byPath {
		if i, ok := at[s.ID]; ok && last(hits[i].Why.Channels) != ChannelPaths {
			hits[i].Why.Channels = append(hits[i].Why.Channels, ChannelWhy{Channel: ChannelPaths, Rank: r + 1, Score: in.anchor, Share: in.anchor})
			graph[i] -= in.anchor
		}
	}
	for i := range hits {
		h := &hits[i]
		w := h.Why
		if graph[i] > 1e-12 {
			w.Channels = append(w.Channels, ChannelWhy{Channel: ChannelGraph, Score: graph[i], Share: graph[i]})
		}
		if c := in.cands[h.ID]; c != nil && c.conv > 0 {
			w.Conversation = c.conv
			w.Channels = append(w.Channels, ChannelWhy{Channel: ChannelConversation, Score: c.conv, Share: c.conv})
		}
		n := &h.Node
		w.Prior = PriorWhy{Value: h.Prior, Raw: Prior(n, in.now), Pinned: n.Pinned, Strength: in.rk.Prior,
			Useful: n.Useful, Unhelpful: n.Unhelpful}
		w.Prior.Reinforcement, w.Prior.Recency, w.Prior.Staleness, w.Prior.Confidence = priorParts(n, in.now)
	}
}

// last is the name of the last channel of cs ("" for none).
func last(cs []ChannelWhy) string {
	if len(cs) == 0 {
		return ""
	}
	return cs[len(cs)-1].Channel
}

// BlockWhy is why each line of a memory block is there (Injection.Why):
// the rule of the block policy that admitted it, with how retrieval
// scored it, and the candidates the policy cut. The injector writes the
// rules (internal/inject); the policy's numbers are those of the turn.
type BlockWhy struct {
	Best          float64 `json:"best"`           // the leading recalled score
	Floor         float64 `json:"floor"`          // RelativeFloor x Best: a recalled line scores at least this
	RelativeFloor float64 `json:"relative_floor"` // the policy's relative floor
	MaxRecalled   int     `json:"max_recalled"`   // the ceiling
	PlateauKeep   int     `json:"plateau_keep"`   // lines kept when the ceiling is reached without a drop
	// Lines are the block's lines, index for index with Injection.IDs
	// (standing first, then recalled).
	Lines []LineWhy `json:"lines"`
	// Cut are the ranked candidates the policy left out, best first.
	Cut []CutWhy `json:"cut"`
}

// LineWhy is why one line is in the block.
type LineWhy struct {
	ID   string `json:"id"`
	Rule string `json:"rule"`          // the rule that admitted it
	Why  *Why   `json:"why,omitempty"` // how retrieval scored it (none for a standing instruction)
}

// CutWhy is a ranked candidate the block policy left out.
type CutWhy struct {
	ID    string  `json:"id"`
	Rank  int     `json:"rank"` // 1-based place in the ranking
	Score float64 `json:"score"`
	Rule  string  `json:"rule"` // the rule that cut it
}
