package inject_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// tenantSeed is what issue 23 found reaching every project on the server:
// a global rule, a global fact about the user and a memory whose reach the
// model judged "anywhere", all of tenant a.
type tenantSeed struct{ rule, fact, anywhere memory.Node }

func seedTenant(f *fixture, tenant string) tenantSeed {
	return tenantSeed{
		rule: f.add(memory.Node{TenantID: tenant, Subkind: memory.Preference, Scope: memory.ScopeGlobal,
			Label: "Always answer in Indonesian", Source: memory.SourceUser}),
		fact: f.add(memory.Node{TenantID: tenant, Subkind: memory.Observation, Scope: memory.ScopeGlobal,
			Label: "The user lives in Jakarta and greets in Indonesian"}),
		anywhere: f.add(memory.Node{TenantID: tenant, Subkind: memory.Pattern, ProjectID: "a-other", Reach: memory.ReachAnywhere,
			Label: "Greeting in Indonesian opens every answer", Body: "Selamat pagi first, then the answer in Indonesian."}),
	}
}

func (f *fixture) blockOf(tenant, project, text string) inject.Block {
	f.t.Helper()
	b, err := f.inj.Compose(f.ctx, inject.Request{Tenant: tenant, Project: project, Session: "s", Turn: "t",
		Text: text, DryRun: true})
	if err != nil {
		f.t.Fatalf("compose for %s/%s: %v", tenant, project, err)
	}
	return b
}

const greetQuery = "how do I greet the user and in which language, Indonesian?"

// TestTenantMemoryStaysInItsTenant: the leak of issue 23 is gone. Tenant
// a's global memories and its reach-anywhere memory are in no block of 14
// project ids of tenant b (two of them tenant a's own project ids) nor of
// the default tenant, and are in tenant a's blocks (cross-project reach on).
// The blocks have no relative floor: every match is in them, so that a
// leak cannot hide under the floor and a recall does not hang on how the
// floor cuts a ranking of three memories (the fact, which shares "user"
// with the question, scores three times the reach-anywhere memory).
func TestTenantMemoryStaysInItsTenant(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b, func(c *inject.Config) { c.RelativeFloor = 0 })
		a := seedTenant(f, "tenant-a")
		// Tenant b has memory of its own, so that its blocks are not empty
		// for want of any.
		own := f.add(memory.Node{TenantID: "tenant-b", Subkind: memory.Preference, Scope: memory.ScopeGlobal,
			Label: "Answer in English", Source: memory.SourceUser})
		aIDs := []string{a.rule.ID, a.fact.ID, a.anywhere.ID}
		projects := []string{"a-home", "a-other"}
		for i := len(projects); i < 14; i++ {
			projects = append(projects, fmt.Sprintf("b-project-%02d", i))
		}
		for _, tenant := range []string{"tenant-b", ""} {
			for _, p := range projects {
				blk := f.blockOf(tenant, p, greetQuery)
				for _, id := range aIDs {
					if slices.Contains(blk.IDs, id) || strings.Contains(blk.Text, id) {
						t.Fatalf("tenant a's memory %s is in the block of %q/%s:\n%s", id, tenant, p, blk.Text)
					}
				}
				if strings.Contains(strings.ToLower(blk.Text), "indonesian") {
					t.Fatalf("the block of %q/%s speaks of tenant a's Indonesian:\n%s", tenant, p, blk.Text)
				}
				if tenant == "tenant-b" && !slices.Contains(blk.IDs, own.ID) {
					t.Fatalf("tenant b's own global rule is missing from %s: %v", p, blk.IDs)
				}
			}
		}
		for _, p := range []string{"a-home", "a-third", "a-fourth"} {
			blk := f.blockOf("tenant-a", p, greetQuery)
			if !slices.Contains(lineIDs(blk.Standing), a.rule.ID) {
				t.Fatalf("tenant a's global rule is not standing in its project %s: %v", p, lineIDs(blk.Standing))
			}
			if !slices.Contains(blk.IDs, a.anywhere.ID) || !slices.Contains(blk.IDs, a.fact.ID) {
				t.Fatalf("tenant a's fact and reach-anywhere memory are not recalled in its project %s:\n%s", p, blk.Text)
			}
			if slices.Contains(blk.IDs, own.ID) {
				t.Fatalf("tenant b's rule is in tenant a's block of %s", p)
			}
		}
	})
}

// TestCrossProjectOff: with cross-project reach off for the deployment
// (ENGRAM_CROSS_PROJECT=false sets Config.CrossProject false), a
// project's block holds its own memories and its tenant's global ones
// (the operator's tenant-wide rules) only: a reach-anywhere memory of
// another project of the same tenant is not recalled.
func TestCrossProjectOff(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b, func(c *inject.Config) { c.CrossProject = false })
		a := seedTenant(f, "tenant-a")
		home := f.add(memory.Node{TenantID: "tenant-a", Subkind: memory.Decision, ProjectID: "a-home",
			Label: "Greet the user formally, in Indonesian", Body: "Greetings in this project are formal."})
		blk := f.blockOf("tenant-a", "a-home", greetQuery)
		if slices.Contains(blk.IDs, a.anywhere.ID) {
			t.Fatalf("another project's reach-anywhere memory reached a-home with cross-project off:\n%s", blk.Text)
		}
		if !slices.Contains(lineIDs(blk.Standing), a.rule.ID) || !slices.Contains(blk.IDs, home.ID) {
			t.Fatalf("the tenant's global rule and the project's own memory belong in the block:\n%s", blk.Text)
		}
		if blk := f.blockOf("tenant-a", "a-other", greetQuery); !slices.Contains(blk.IDs, a.anywhere.ID) {
			t.Fatalf("a project's own memory is recalled in it whatever its reach:\n%s", blk.Text)
		}
	})
}
