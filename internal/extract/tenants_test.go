package extract

import (
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
)

// TestToNodeTenantAndCrossProject: a proposed memory is written into the
// session's tenant; with cross-project reach on the model's scope and reach
// stand (global within the tenant), with it off every memory stays in its
// project with reach here.
func TestToNodeTenantAndCrossProject(t *testing.T) {
	ref := memory.SessionRef{Tenant: "acme", Project: "p", Session: "s"}
	global := ReplyMemory{Subkind: "preference", Scope: "global", Reach: "anywhere", AssertedBy: "user", Label: "Always answer in Indonesian"}
	anywhere := ReplyMemory{Subkind: "pattern", Scope: "project", Reach: "anywhere", Label: "Retry Stripe calls three times"}
	for _, c := range []struct {
		m      ReplyMemory
		cross  bool
		scope  memory.Scope
		proj   string
		reach  memory.Reach
		reason string
	}{
		{global, true, memory.ScopeGlobal, "", memory.ReachAnywhere, "a global memory of the tenant"},
		{global, false, memory.ScopeProject, "p", memory.ReachHere, "cross-project off: the project's"},
		{anywhere, true, memory.ScopeProject, "p", memory.ReachAnywhere, "reach anywhere within the tenant"},
		{anywhere, false, memory.ScopeProject, "p", memory.ReachHere, "cross-project off: reach here"},
	} {
		n, ok := toNode(c.m, ref, c.cross)
		if !ok || n.TenantID != "acme" || n.Scope != c.scope || n.ProjectID != c.proj || n.Reach != c.reach {
			t.Fatalf("%s: %+v (ok %v)", c.reason, n, ok)
		}
		if _, err := memory.PrepareNew(n, n.CreatedAt); err != nil {
			t.Fatalf("%s: the node is not storable: %v", c.reason, err)
		}
	}
}
