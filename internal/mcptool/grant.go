package mcptool

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/engram-memory/engram/pkg/memory"
)

// Grant is what a token of the tokens file reaches: its principal, the one
// tenant it is bound to and that tenant's projects (All: every one). The
// memory console (internal/console) logs people in with the same tokens.
type Grant struct {
	Principal string
	Tenant    string
	Projects  []string // nil with All
	All       bool
}

// Reaches reports whether the grant reaches project of its tenant.
func (g Grant) Reaches(project string) bool {
	return g.All || slices.Contains(g.Projects, project)
}

// Lookup returns the grant of token, comparing digests in constant time
// with every entry as the HTTP endpoint does.
func (ts *Tokens) Lookup(token string) (Grant, bool) {
	if ts == nil {
		return Grant{}, false
	}
	e, ok := ts.lookup(token)
	if !ok {
		return Grant{}, false
	}
	return Grant{Principal: e.principal, Tenant: e.tenant, Projects: slices.Clone(e.projects), All: e.all}, true
}

// Load returns memory id if caller c may see it (write: may change it),
// by the tool's own rules (see the package doc, Tenancy): anything else
// is memory.ErrNotFound with the same words as an unknown id. The console
// opens a memory's page through it.
func (t *Tool) Load(ctx context.Context, c Caller, id string, write bool) (memory.Node, error) {
	return t.load(ctx, c, id, write)
}

// Pin pins or unpins a memory the caller may change (Load with write): a
// pinned memory is not forgotten by consolidation nor marked stale, and a
// pinned preference, decision or pattern is sent every turn as a standing
// instruction (memory.IsStanding). Nothing else of it changes. The agent's
// tool has no pin: it is for the people the memory is about (the console).
func (t *Tool) Pin(ctx context.Context, c Caller, id string, pinned bool) (Memory, error) {
	n, err := t.load(ctx, c, id, true)
	if err != nil {
		return Memory{}, err
	}
	if n.Pinned != pinned {
		if n, err = t.store.Update(ctx, n.ID, memory.Patch{Pinned: &pinned}); err != nil {
			return Memory{}, fmt.Errorf("pin %s: %w", strings.TrimSpace(id), err)
		}
		t.log.Info("memory pin changed", zap.String("id", n.ID), zap.Bool("pinned", pinned), zap.String("tenant", c.Tenant),
			zap.String("project", c.Project), zap.String("principal", c.Principal))
	}
	return t.memoryOf(&n, c), nil
}
