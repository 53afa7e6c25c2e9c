package isolation_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/mcptool"
	"github.com/engram-memory/engram/internal/memio"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/llm/hashembed"
	"github.com/engram-memory/engram/pkg/memory"
	redisstore "github.com/engram-memory/engram/pkg/memory/redis"
)

// The pools every case draws from: tenants share project ids, session ids,
// words and paths, so that a leak has every chance to show.
var (
	tenants  = []string{"", "acme", "globex", "initech"}
	projects = []string{"p0", "p1", "p2", "p3"}
	sessions = []string{"s0", "s1"}
	words    = []string{"indonesian", "answer", "deploy", "release", "stripe", "payments", "invoice", "greeting",
		"cluster", "redis", "tabs", "spaces", "friday", "vault", "keys", "always", "never", "emoji"}
	paths    = []string{"README.md", "main.go", "src/app.ts", "deploy/k8s.yaml"}
	scopes   = []memory.Scope{memory.ScopeSession, memory.ScopeProject, memory.ScopeGlobal}
	reaches  = []memory.Reach{memory.ReachHere, memory.ReachAnywhere}
	subkinds = []memory.Subkind{memory.Preference, memory.Decision, memory.Pattern, memory.Observation, memory.Failure}
)

// world is one backend's store and what the test wrote into it, across
// cases (the store is shared by the cases, so every case also runs among
// the graphs of the earlier ones).
type world struct {
	st    memory.Store
	emb   *hashembed.Embedder
	inj   map[bool]*inject.Injector // by cross-project reach
	tool  *mcptool.Tool
	owner map[string]string         // node id -> its tenant
	live  map[memory.ProjectRef]int // live nodes written per tenant's project ("" : global)
	nodes map[string][]string       // node ids per tenant
	n     struct{ cases, nodes, edges, refused, queries, blocks, recalls, mcp, exports int }
}

func newWorld(t *testing.T, st memory.Store) *world {
	w := &world{st: st, emb: hashembed.New(0), inj: map[bool]*inject.Injector{}, owner: map[string]string{},
		live: map[memory.ProjectRef]int{}, nodes: map[string][]string{}}
	for _, cross := range []bool{false, true} {
		cfg := inject.Defaults()
		cfg.CrossProject = cross
		inj, err := inject.New(st, w.emb, cfg)
		if err != nil {
			t.Fatal(err)
		}
		w.inj[cross] = inj
	}
	tool, err := mcptool.New(st, w.emb, mcptool.Config{MinConfidence: 0.3, CrossProject: true})
	if err != nil {
		t.Fatal(err)
	}
	w.tool = tool
	return w
}

func text(rt *rapid.T, label string, min, max int) string {
	return strings.Join(rapid.SliceOfN(rapid.SampledFrom(words), min, max).Draw(rt, label), " ")
}

// TestNoMemoryCrossesTenants is the property (see the package doc).
func TestNoMemoryCrossesTenants(t *testing.T) {
	backends := map[string]func(t *testing.T) memory.Store{
		"sqlite": func(t *testing.T) memory.Store { return storetest.OpenSQLite(t) },
	}
	if os.Getenv("ENGRAM_TEST_REDIS_URL") != "" || os.Getenv("CI") != "" {
		backends["redis"] = func(t *testing.T) memory.Store { return storetest.OpenRedis(t) }
	}
	if os.Getenv("ENGRAM_TEST_REDIS_CLUSTER") != "" {
		backends["redis-cluster"] = openCluster
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, open(t))
			rapid.Check(t, func(rt *rapid.T) { w.check(rt) })
			t.Logf("%s: %d cases, %d nodes and %d edges written (%d cross-tenant edges and supersedes refused), "+
				"%d queries: %d blocks, %d recalls, %d MCP calls, %d exports checked",
				name, w.n.cases, w.n.nodes, w.n.edges, w.n.refused, w.n.queries, w.n.blocks, w.n.recalls, w.n.mcp, w.n.exports)
		})
	}
}

// check is one case: a random graph, then random queries on every surface.
func (w *world) check(rt *rapid.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w.n.cases++
	var written []string
	for i, n := 0, rapid.IntRange(3, 20).Draw(rt, "nodes"); i < n; i++ {
		tenant := rapid.SampledFrom(tenants).Draw(rt, "tenant")
		scope := rapid.SampledFrom(scopes).Draw(rt, "scope")
		nd := memory.Node{TenantID: tenant, Subkind: rapid.SampledFrom(subkinds).Draw(rt, "kind"), Scope: scope,
			Label: text(rt, "label", 2, 5), Body: text(rt, "body", 0, 6), Reach: rapid.SampledFrom(reaches).Draw(rt, "reach"),
			Paths: rapid.SliceOfN(rapid.SampledFrom(paths), 0, 2).Draw(rt, "paths")}
		if scope != memory.ScopeGlobal {
			nd.ProjectID = rapid.SampledFrom(projects).Draw(rt, "project")
		}
		if scope == memory.ScopeSession {
			nd.SessionID = rapid.SampledFrom(sessions).Draw(rt, "session")
			nd.Reach = memory.ReachHere
		}
		if rapid.Bool().Draw(rt, "user") {
			nd.Source = memory.SourceUser // a standing instruction when its kind is one
		}
		res, err := w.st.Upsert(ctx, nd)
		if err != nil {
			rt.Fatalf("Upsert %+v: %v", nd, err)
		}
		if res.Node.TenantID != tenant {
			rt.Fatalf("Upsert into tenant %q answered a node of tenant %q", tenant, res.Node.TenantID)
		}
		if prev, ok := w.owner[res.Node.ID]; ok && prev != tenant {
			rt.Fatalf("an upsert of tenant %q reinforced node %s of tenant %q", tenant, res.Node.ID, prev)
		}
		if res.Created {
			w.owner[res.Node.ID] = tenant
			w.live[memory.ProjectOf(&res.Node)]++
			w.nodes[tenant] = append(w.nodes[tenant], res.Node.ID)
			w.n.nodes++
		}
		written = append(written, res.Node.ID)
	}
	// Edges: within a tenant they are stored, between two they are refused.
	for i, n := 0, rapid.IntRange(0, 8).Draw(rt, "edges"); i < n; i++ {
		src := rapid.SampledFrom(written).Draw(rt, "src")
		dst := rapid.SampledFrom(written).Draw(rt, "dst")
		if src == dst {
			continue
		}
		rel := rapid.SampledFrom([]memory.Relation{memory.RelatesTo, memory.Contradicts, memory.About}).Draw(rt, "relation")
		_, err := w.st.Link(ctx, memory.Edge{Src: src, Dst: dst, Relation: rel})
		switch {
		case w.owner[src] != w.owner[dst] && !errors.Is(err, memory.ErrInvalid):
			rt.Fatalf("a link from tenant %q to tenant %q: %v, want ErrInvalid", w.owner[src], w.owner[dst], err)
		case w.owner[src] != w.owner[dst]:
			w.n.refused++
		case err != nil:
			rt.Fatalf("a link within tenant %q: %v", w.owner[src], err)
		default:
			w.n.edges++
		}
	}
	if a, b := rapid.SampledFrom(written).Draw(rt, "old"), rapid.SampledFrom(written).Draw(rt, "new"); w.owner[a] != w.owner[b] {
		if err := w.st.Supersede(ctx, a, b); err == nil {
			rt.Fatalf("a supersede across tenants (%q by %q) was stored", w.owner[a], w.owner[b])
		}
		if n, err := w.st.Get(ctx, a); err != nil || !n.Live() {
			rt.Fatalf("a refused supersede changed %s: %+v %v", a, n, err)
		}
		w.n.refused++
	}
	if _, err := memory.EmbedPending(ctx, w.st, w.emb, 256); err != nil {
		rt.Fatalf("EmbedPending: %v", err)
	}

	for i, n := 0, rapid.IntRange(2, 5).Draw(rt, "queries"); i < n; i++ {
		w.n.queries++
		tenant := rapid.SampledFrom(tenants).Draw(rt, "query tenant")
		ref := memory.SessionRef{Tenant: tenant, Project: rapid.SampledFrom(projects).Draw(rt, "query project"),
			Session: rapid.SampledFrom(sessions).Draw(rt, "query session")}
		q := text(rt, "query", 2, 4)
		anchors := rapid.SliceOfN(rapid.SampledFrom(paths), 0, 2).Draw(rt, "anchors")
		cross := rapid.Bool().Draw(rt, "cross")
		w.block(ctx, rt, ref, q, anchors, cross)
		w.recall(ctx, rt, ref, q, anchors, cross)
		w.mcp(ctx, rt, ref, q, cross, rapid.SampledFrom(written).Draw(rt, "named id"), rapid.Bool().Draw(rt, "writes global"))
	}
	w.export(ctx, rt, rapid.SampledFrom(tenants).Draw(rt, "export tenant"))
}

// mine fails unless id is a node the test wrote for tenant.
func (w *world) mine(rt *rapid.T, where, tenant, id string) {
	owner, ok := w.owner[id]
	if !ok {
		rt.Fatalf("%s for tenant %q holds %s, a node the test never wrote", where, tenant, id)
	}
	if owner != tenant {
		rt.Fatalf("%s for tenant %q holds %s, a memory of tenant %q", where, tenant, id, owner)
	}
}

func (w *world) block(ctx context.Context, rt *rapid.T, ref memory.SessionRef, q string, anchors []string, cross bool) {
	b, err := w.inj[cross].Compose(ctx, inject.Request{Tenant: ref.Tenant, Project: ref.Project, Session: ref.Session,
		Turn: "t", Text: q, Paths: anchors, DryRun: true})
	if err != nil {
		rt.Fatalf("Compose: %v", err)
	}
	w.n.blocks++
	for _, id := range b.IDs {
		w.mine(rt, "the memory block", ref.Tenant, id)
	}
	// Every id the block's text shows is one of its lines.
	for id, owner := range w.owner {
		if owner != ref.Tenant && strings.Contains(b.Text, "["+id+"]") {
			rt.Fatalf("the block of tenant %q shows [%s] of tenant %q:\n%s", ref.Tenant, id, owner, b.Text)
		}
	}
}

func (w *world) recall(ctx context.Context, rt *rapid.T, ref memory.SessionRef, q string, anchors []string, cross bool) {
	vecs, err := w.emb.Embed(ctx, []string{q})
	if err != nil {
		rt.Fatal(err)
	}
	hits, err := memory.Retrieve(ctx, w.st, memory.Query{Text: q, Vector: vecs[0], Model: w.emb.Model(), AnchorPaths: anchors,
		Filter: memory.Filter{TenantID: ref.Tenant, ProjectID: ref.Project, SessionID: ref.Session, CrossProject: cross,
			IncludeSuperseded: rapid.Bool().Draw(rt, "superseded too")},
		Limit: 40, Expand: true, Now: time.Now()})
	if err != nil {
		rt.Fatalf("Retrieve: %v", err)
	}
	w.n.recalls++
	for _, h := range hits {
		w.mine(rt, "a recall", ref.Tenant, h.ID)
	}
}

func (w *world) mcp(ctx context.Context, rt *rapid.T, ref memory.SessionRef, q string, cross bool, named string, writesGlobal bool) {
	scope := mcptool.ScopeProject
	if cross {
		scope = mcptool.ScopeAll
	}
	c := mcptool.Caller{Tenant: ref.Tenant, Project: ref.Project, Session: ref.Session, Principal: "prop", WritesGlobal: writesGlobal}
	ops := []mcptool.Op{
		{Op: mcptool.OpRecall, Query: q, Scope: scope, Limit: 40},
		{Op: mcptool.OpTimeline, Limit: 60},
		{Op: mcptool.OpTimeline, Since: "2000-01-01T00:00:00Z", Limit: 60},
		{Op: mcptool.OpNeighbours, ID: named, Hops: 3},
		{Op: mcptool.OpStats},
	}
	foreign := w.owner[named] != ref.Tenant
	if foreign {
		// B names A's memory to change it: it is not found, and unchanged.
		body := "rewritten by another tenant"
		ops = append(ops, mcptool.Op{Op: mcptool.OpForget, ID: named, Reason: "not mine"},
			mcptool.Op{Op: mcptool.OpUpdate, ID: named, Body: &body},
			mcptool.Op{Op: mcptool.OpLink, From: named, To: named, Relation: string(memory.RelatesTo)})
	}
	before, err := w.st.Get(ctx, named)
	if err != nil {
		rt.Fatal(err)
	}
	resp, err := w.tool.Run(ctx, c, mcptool.Request{Ops: ops})
	if err != nil {
		rt.Fatalf("memory tool: %v", err)
	}
	w.n.mcp++
	for i, r := range resp.Results {
		where := "the memory tool's " + ops[i].Op
		for _, m := range r.Memories {
			w.mine(rt, where, ref.Tenant, m.ID)
		}
		if r.Memory != nil {
			w.mine(rt, where, ref.Tenant, r.Memory.ID)
		}
		if r.Edge != nil {
			w.mine(rt, where, ref.Tenant, r.Edge.From)
			w.mine(rt, where, ref.Tenant, r.Edge.To)
		}
		if ops[i].ID == named && foreign && (r.OK || !strings.Contains(r.Error, "not found")) {
			rt.Fatalf("%s of tenant %q's memory by tenant %q: %+v, want not found", where, w.owner[named], ref.Tenant, r)
		}
		if r.Stats != nil {
			want := w.live[ref.ProjectRef()] + w.live[memory.ProjectRef{Tenant: ref.Tenant}]
			if r.Stats.Counts.Live != want {
				rt.Fatalf("stats of %s count %d live memories, want %d (its project's and its tenant's global ones)",
					ref.ProjectRef(), r.Stats.Counts.Live, want)
			}
		}
	}
	if foreign {
		after, err := w.st.Get(ctx, named)
		if err != nil || after.Body != before.Body || !after.ArchivedAt.Equal(before.ArchivedAt) {
			rt.Fatalf("another tenant's calls changed %s: %+v -> %+v (%v)", named, before, after, err)
		}
	}
}

func (w *world) export(ctx context.Context, rt *rapid.T, tenant string) {
	var buf bytes.Buffer
	stats, err := memio.Export(ctx, w.st, &buf, tenant)
	if err != nil {
		rt.Fatalf("Export: %v", err)
	}
	w.n.exports++
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	nodes := 0
	for sc.Scan() {
		var l struct {
			Type     string `json:"type"`
			ID       string `json:"id"`
			TenantID string `json:"tenant_id"`
			Src      string `json:"src"`
			Dst      string `json:"dst"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			rt.Fatalf("export line: %v", err)
		}
		switch l.Type {
		case "node":
			nodes++
			w.mine(rt, "an export", tenant, l.ID)
			if l.TenantID != tenant {
				rt.Fatalf("an export for tenant %q has a node line of tenant %q", tenant, l.TenantID)
			}
		case "edge":
			w.mine(rt, "an export's edge", tenant, l.Src)
			w.mine(rt, "an export's edge", tenant, l.Dst)
		}
	}
	if nodes != len(w.nodes[tenant]) || stats.Nodes != nodes {
		rt.Fatalf("the export of tenant %q holds %d nodes (stats %d), the tenant wrote %d", tenant, nodes, stats.Nodes, len(w.nodes[tenant]))
	}
}

// openCluster opens a Redis store on the cluster at ENGRAM_TEST_REDIS_CLUSTER
// in a namespace of its own.
func openCluster(t *testing.T) memory.Store {
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: strings.Split(os.Getenv("ENGRAM_TEST_REDIS_CLUSTER"), ",")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		t.Fatalf("Redis cluster: %v", err)
	}
	ns := fmt.Sprintf("iso%d", time.Now().UnixNano())
	st, err := redisstore.New(c, redisstore.WithNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	// At the latest format, as a deployment runs once its upgrade is
	// finished (pkg/memory/redis format.go).
	if _, err := st.FinishUpgrade(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = redisstore.DeleteNamespace(ctx, c, ns)
		_ = c.Close()
	})
	return st
}
