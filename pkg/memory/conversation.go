package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// A memory's conversation is the memories of its tenant's project and
// session written near it: in conversation order (CompareConversation),
// the ones written within ConversationGap of it. Retrieval reads it
// because a turn of a chat is evidence about the turns around it: the
// answer to "How long do you usually walk them?" is the next turn ("Varies,
// usually for about an hour"), which shares no word with the question
// that matched the first (see Retrieve).

// ConversationGap is how far apart in time two memories of a session may
// be written and still be neighbours in its conversation: a pause longer
// than this ends one.
const ConversationGap = time.Hour

// Conversation shares: how much of a leading hit's text score its
// neighbours in the conversation get (a neighbour keeps the better of its
// own score and its share; it never passes the hit it came from).
const (
	// ConversationAnswer is the share of the memory written right after a
	// hit that asks a question (its label ends in a question mark): the
	// answer to it.
	ConversationAnswer = 0.8
	// ConversationContext is the share of the memory written right before
	// any hit: what the hit replies to.
	ConversationContext = 0.4
	// ConversationSeeds is how many of the leading hits pass shares.
	ConversationSeeds = 10
	// conversationSide is how many neighbours on each side Adjacent is
	// asked for: the nearest that the filter lets through is taken.
	conversationSide = 2
)

// Conversations is an optional capability of a RetrievalStore: the
// memories written next to given ones in their conversation. With it,
// Retrieve passes a share of its leading hits' scores to their
// neighbours (ConversationAnswer, ConversationContext); without it, it
// ranks as before. Both backends implement it (the conformance suite
// checks it).
type Conversations interface {
	// Adjacent returns, for each of nodes (as stored; a node the store
	// does not hold has no entry), the ids of up to k memories written
	// before it and up to k after it in its conversation: the same
	// tenant, project and session (SameConversation), in
	// CompareConversation order, written within ConversationGap of it
	// (ConversationAt), nearest first. Every stored memory counts,
	// whatever its state: the caller applies its filter.
	Adjacent(ctx context.Context, nodes []Node, k int) (map[string]Adjacency, error)
}

// Adjacency is a memory's neighbours in its conversation, nearest first.
type Adjacency struct {
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
}

// ConversationAt is a memory's place in time in its conversation: when it
// was written (Written), in Unix milliseconds.
func ConversationAt(n *Node) int64 { return Written(n).UnixMilli() }

// SameConversation reports whether a and b belong to one conversation:
// the same tenant, project and session.
func SameConversation(a, b *Node) bool {
	return a.TenantID == b.TenantID && a.ProjectID == b.ProjectID && a.SessionID == b.SessionID
}

// CompareConversation orders the memories of a conversation: by when
// they were written (ConversationAt), then by id in natural order
// (NaturalCompare), so that the numbered ids of an import ("conv-1-D3-9",
// "conv-1-D3-10") keep the order of turns written at the same time.
func CompareConversation(a, b *Node) int {
	if x, y := ConversationAt(a), ConversationAt(b); x != y {
		if x < y {
			return -1
		}
		return 1
	}
	return NaturalCompare(a.ID, b.ID)
}

// NaturalCompare orders strings with their runs of digits compared as
// numbers: a longer run is the larger, runs of one length compare digit
// by digit ("9" < "10" < "010"); everything else compares byte by byte.
func NaturalCompare(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if isDigit(a[i]) && isDigit(b[j]) {
			ei, ej := digitsEnd(a, i), digitsEnd(b, j)
			if d := (ei - i) - (ej - j); d != 0 {
				if d < 0 {
					return -1
				}
				return 1
			}
			if c := strings.Compare(a[i:ei], b[j:ej]); c != 0 {
				return c
			}
			i, j = ei, ej
			continue
		}
		if a[i] != b[j] {
			if a[i] < b[j] {
				return -1
			}
			return 1
		}
		i, j = i+1, j+1
	}
	switch {
	case i < len(a):
		return 1
	case j < len(b):
		return -1
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitsEnd(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

// IsQuestion reports whether a memory's label ends in a question mark (a
// closing quote or bracket after it allowed): a turn that asks, whose
// answer is the turn after it.
func IsQuestion(n *Node) bool {
	l := strings.TrimRight(n.Label, " \t\r\n\"'”’)]")
	return strings.HasSuffix(l, "?")
}

// converse passes the shares of the leading direct candidates (seeds, by
// their fused text score) to their neighbours in the conversation: the
// nearest visible memory after a seed that asks a question gets
// ConversationAnswer of its score, the nearest before any seed
// ConversationContext of it; a candidate keeps the largest share it gets
// (cand.conv). Neighbours that are not candidates are loaded into byID
// (and, with HintedHeads and hints, asked about into hints).
func converse(ctx context.Context, cs Conversations, st RetrievalStore, q Query, cands map[string]*cand, byID map[string]*Node, get func(string) *cand, hints map[string]bool) error {
	type seed struct {
		n     *Node
		fused float64
	}
	seeds := make([]seed, 0, len(cands))
	for id, c := range cands {
		if n := byID[id]; n != nil && c.direct && c.fused > 0 && Visible(n, q.Filter, q.Now) {
			seeds = append(seeds, seed{n, c.fused})
		}
	}
	if len(seeds) == 0 {
		return nil
	}
	slices.SortFunc(seeds, func(a, b seed) int {
		if a.fused != b.fused {
			if a.fused > b.fused {
				return -1
			}
			return 1
		}
		return strings.Compare(a.n.ID, b.n.ID)
	})
	seeds = seeds[:min(len(seeds), ConversationSeeds)]
	nodes := make([]Node, len(seeds))
	for i, s := range seeds {
		nodes[i] = *s.n
	}
	adj, err := cs.Adjacent(ctx, nodes, conversationSide)
	if err != nil {
		return fmt.Errorf("retrieve: conversation: %w", err)
	}
	var missing []string
	for _, a := range adj {
		for _, id := range slices.Concat(a.Before, a.After) {
			if byID[id] == nil && !slices.Contains(missing, id) {
				missing = append(missing, id)
			}
		}
	}
	if len(missing) > 0 {
		var more []Node
		var err error
		if hh, ok := st.(HintedHeads); ok && hints != nil {
			// Asked about too, so that the contradiction check reads
			// edges only of those that may contradict.
			var h map[string]bool
			if more, h, err = hh.GetHeadsHinted(ctx, missing); err == nil {
				maps.Copy(hints, h)
			}
		} else {
			more, err = getHeads(ctx, st, missing)
		}
		if err != nil {
			return fmt.Errorf("retrieve: conversation: %w", err)
		}
		for i := range more {
			byID[more[i].ID] = &more[i]
		}
	}
	nearest := func(ids []string) string {
		for _, id := range ids {
			if n := byID[id]; n != nil && Visible(n, q.Filter, q.Now) && n.Confidence >= q.Filter.MinConfidence {
				return id
			}
		}
		return ""
	}
	give := func(id string, share float64) {
		if id == "" {
			return
		}
		if c := get(id); share > c.conv {
			c.conv = share
		}
	}
	for _, s := range seeds {
		a := adj[s.n.ID]
		if IsQuestion(s.n) {
			give(nearest(a.After), ConversationAnswer*s.fused)
		}
		give(nearest(a.Before), ConversationContext*s.fused)
	}
	return nil
}
