package inject

import (
	"fmt"

	"github.com/engram-memory/engram/pkg/memory"
)

// The rules of the block policy, as memory.LineWhy and memory.CutWhy name
// them. A line is admitted as a standing instruction (selected, not
// ranked), as the best hit (it sets the floor), by the relative floor
// (within the ceiling), or by the plateau rule (one of the first
// PlateauKeep of a ranking that never fell under the floor within the
// ceiling). A candidate is cut under the floor, by the plateau rule, by
// the ceiling, or for a confidence under MinConfidence.
const (
	RuleStanding      = "standing"
	RuleBest          = "best"
	RuleFloor         = "floor"
	RulePlateau       = "plateau"
	RuleUnderFloor    = "under-floor"
	RuleCeiling       = "ceiling"
	RuleLowConfidence = "low-confidence"
)

// Explain is why each line of a block is there: the rule that admitted
// it with how retrieval scored it (hits carry memory.Hit.Why when the
// query asked for it), and every ranked candidate the policy left out
// with the rule that cut it. hits are the ranked hits, standing the ids of
// the standing lines (they are not recalled twice), kept how many of the
// remaining hits the policy kept (selectRecalled). It reads the hits and
// changes nothing; Compose calls it only for Request.Explain.
func Explain(hits []memory.Hit, standing map[string]bool, standingLines []Line, kept int, cfg Config) *memory.BlockWhy {
	w := &memory.BlockWhy{RelativeFloor: cfg.RelativeFloor, MaxRecalled: cfg.MaxRecalled, PlateauKeep: cfg.PlateauKeep,
		Lines: make([]memory.LineWhy, 0, len(standingLines)+kept), Cut: []memory.CutWhy{}}
	for _, l := range standingLines {
		w.Lines = append(w.Lines, memory.LineWhy{ID: l.ID, Rule: RuleStanding})
	}
	scores := make([]float64, 0, len(hits))
	for _, h := range hits {
		if h.Node.Confidence >= cfg.MinConfidence && !standing[h.ID] {
			scores = append(scores, h.Score)
		}
	}
	_, plateau := keep(scores, cfg)
	if len(scores) > 0 {
		w.Best = scores[0]
		w.Floor = cfg.RelativeFloor * w.Best
	}
	j := 0 // index among the hits the policy ranks (scores)
	for i, h := range hits {
		if standing[h.ID] {
			continue // a standing line already
		}
		cut := memory.CutWhy{ID: h.ID, Rank: i + 1, Score: h.Score}
		if h.Node.Confidence < cfg.MinConfidence {
			cut.Rule = RuleLowConfidence
			w.Cut = append(w.Cut, cut)
			continue
		}
		switch {
		case j < kept:
			rule := RuleFloor
			switch {
			case j == 0:
				rule = RuleBest
			case plateau:
				rule = RulePlateau
			}
			w.Lines = append(w.Lines, memory.LineWhy{ID: h.ID, Rule: rule, Why: h.Why})
		case h.Score < w.Floor:
			cut.Rule = RuleUnderFloor
		case j >= cfg.MaxRecalled || !plateau:
			cut.Rule = RuleCeiling
		default:
			cut.Rule = RulePlateau
		}
		if cut.Rule != "" {
			w.Cut = append(w.Cut, cut)
		}
		j++
	}
	return w
}

// RuleText says in words what a rule of w means for a score.
func RuleText(rule string, score float64, w *memory.BlockWhy) string {
	switch rule {
	case RuleStanding:
		return "standing instruction: the user stated it; sent every turn, not ranked"
	case RuleBest:
		return fmt.Sprintf("best recalled hit (%.3f): it sets the floor at %.3f (%.2f x best)", score, w.Floor, w.RelativeFloor)
	case RuleFloor:
		return fmt.Sprintf("relative floor: %.3f >= %.3f (%.2f x best %.3f), within the ceiling of %d", score, w.Floor, w.RelativeFloor, w.Best, w.MaxRecalled)
	case RulePlateau:
		return fmt.Sprintf("plateau: the ranking never fell under the floor %.3f within the ceiling of %d, so only the first %d are kept", w.Floor, w.MaxRecalled, w.PlateauKeep)
	case RuleUnderFloor:
		return fmt.Sprintf("under the relative floor: %.3f < %.3f (%.2f x best %.3f)", score, w.Floor, w.RelativeFloor, w.Best)
	case RuleCeiling:
		return fmt.Sprintf("over the ceiling: the block holds at most %d recalled lines", w.MaxRecalled)
	case RuleLowConfidence:
		return "confidence under the injector's minimum"
	}
	return rule
}

// ChannelText is one channel's part of a line's score in words: "lexical
// #2 (BM25 7.412) +0.834".
func ChannelText(c memory.ChannelWhy) string {
	var own string
	switch c.Channel {
	case memory.ChannelLexical, memory.ChannelFeedback, memory.ChannelTime:
		own = fmt.Sprintf("BM25 %.3f", c.Score)
	case memory.ChannelVector:
		own = fmt.Sprintf("cosine %.3f", c.Score)
	case memory.ChannelPaths:
		own = "attached to a path the session works in"
	case memory.ChannelGraph:
		own = "one hop from a leading hit"
	case memory.ChannelConversation:
		own = "next to a leading hit in its conversation; counts instead of the text channels when larger"
	}
	rank := ""
	if c.Rank > 0 {
		rank = fmt.Sprintf(" #%d", c.Rank)
	}
	return fmt.Sprintf("%s%s (%s) +%.3f", c.Channel, rank, own, c.Share)
}

// PriorText is the prior of a line in words.
func PriorText(p memory.PriorWhy) string {
	if p.Pinned {
		return fmt.Sprintf("x%.3f prior (pinned)", p.Value)
	}
	s := fmt.Sprintf("x%.3f prior (%.3f at strength %.2f: reinforcement %.3f", p.Value, p.Raw, p.Strength, p.Reinforcement)
	if p.Useful > 0 || p.Unhelpful > 0 {
		s += fmt.Sprintf(" [useful %d, unhelpful %d]", p.Useful, p.Unhelpful)
	}
	s += fmt.Sprintf(", recency %.3f, staleness %.2f, confidence %.3f)", p.Recency, p.Staleness, p.Confidence)
	return s
}
