package memory

import "context"

// Counts are the memories a project sees, its own and the global ones,
// counted for the `memory` tool's stats (and an operator).
type Counts struct {
	// Live nodes (neither archived, superseded nor closed), in all, by
	// subkind and by scope. Session-scoped nodes of every session count.
	Live      int             `json:"live"`
	BySubkind map[Subkind]int `json:"by_kind"`
	ByScope   map[Scope]int   `json:"by_scope"`
	// Archived ("forgotten") nodes, whatever else they are.
	Archived int `json:"archived"`
	// Closed nodes: superseded or revised (valid-to set), not archived.
	Closed int `json:"closed"`
	// Pending is the live nodes without a vector by the model (missing or
	// made by another model): the backlog HasPendingEmbeddings gates on.
	Pending int `json:"pending_embeddings"`
}

// Counter counts a project's memories. It is part of the Store contract.
type Counter interface {
	// Count counts the nodes of p and its tenant's global ones (for an
	// empty p.Project, the tenant's global ones only) by CountNode,
	// embeddings judged against model.
	Count(ctx context.Context, p ProjectRef, model string) (Counts, error)
}

// NewCounts returns empty counts.
func NewCounts() Counts {
	return Counts{BySubkind: map[Subkind]int{}, ByScope: map[Scope]int{}}
}

// CountNode adds n to c, the rule every backend counts by: a live node
// counts in Live, BySubkind and ByScope, and in Pending when it has no
// vector by model; an archived one in Archived; any other in Closed.
// c must come from NewCounts.
func (c *Counts) CountNode(n *Node, model string) {
	switch {
	case n.Live():
		c.Live++
		c.BySubkind[n.Subkind]++
		c.ByScope[n.Scope]++
		if n.EmbeddingModel != model {
			c.Pending++
		}
	case !n.ArchivedAt.IsZero():
		c.Archived++
	default:
		c.Closed++
	}
}
