package injectfx_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/app/apptest"
	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/internal/inject/injectfx"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// TestTurnWhileTheStoreLoads starts a whole process on a seeded SQLite
// store whose background load is held after its first chunk (a load hook,
// so the timing is deterministic): the process is up, a turn sent now gets
// a block from the memories loaded so far instead of waiting for the whole
// load past its reply deadline, the readiness check says the index is
// loading, the workers that need the whole graph are held, and once the
// load is released a memory from the rest of the store is found too.
func TestTurnWhileTheStoreLoads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := llmtest.New(t)
	cfg := apptest.Config(t, srv.Config())

	// 400 memories in p1: the standing rule and the deploy decision among
	// the first 100 rows, the release-train one among the last.
	const total, chunk = 400, 100
	nodes := make([]memory.Node, 0, total)
	for i := range total {
		n := memory.Node{Subkind: memory.Observation, ProjectID: "p1", Scope: memory.ScopeProject,
			Label: fmt.Sprintf("filler note %d about the office plants", i)}
		switch i {
		case 3:
			n = memory.Node{Subkind: memory.Preference, ProjectID: "p1", Scope: memory.ScopeProject,
				Label: "Always answer in Indonesian", AssertedBy: memory.AssertedUser, Source: memory.SourceUser}
		case 40:
			n.Subkind, n.Label = memory.Decision, "Deploys to production run through make release"
		case 350:
			n.Subkind, n.Label = memory.Decision, "The release train leaves every Thursday at noon"
		}
		nodes = append(nodes, n)
	}
	seed(ctx, t, srv, cfg.SQLitePath(), nodes)

	held, release := make(chan struct{}), make(chan struct{})
	var released bool
	unhold := func() {
		if !released {
			released = true
			close(release)
		}
	}
	hook := func(loaded int) {
		if loaded == chunk {
			close(held)
			<-release
		}
	}
	var st memory.Store
	run := apptest.StartConfig(ctx, t, cfg, "injectfx-startup", events.ConsumerInjector, []fx.Option{
		injectfx.Module(),
		fx.Supply(app.SQLiteOptions{sqlite.WithLoadChunk(chunk), sqlite.WithLoadHook(hook)}),
		fx.Populate(&st),
	}, events.WithInjectTimeout(20*time.Second))
	t.Cleanup(unhold) // before the process stops (cleanups run last first)
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the load never reached its first chunk")
	}
	loading := st.(*sqlite.Store)
	if ls := loading.LoadStatus(); ls.Nodes || ls.Loaded != chunk || ls.Total != total {
		t.Fatalf("load status = %+v, want %d of %d loaded", ls, chunk, total)
	}

	ref := events.Ref{ProjectID: "p1", SessionID: "s1", TurnID: "t1"}
	got, err := run.Client.Inject(ctx, ref, events.TurnStarted{Text: "how do we deploy to production?"})
	if err != nil {
		t.Fatalf("a turn sent while the store loads: %v", err)
	}
	if !strings.Contains(got.Block, "Always answer in Indonesian") || !strings.Contains(got.Block, "make release") {
		t.Fatalf("block while loading lacks the rule or the decision:\n%s", got.Block)
	}
	if ls := loading.LoadStatus(); ls.Nodes || ls.Loaded != chunk {
		t.Fatalf("the turn was answered after the load went on (%+v): the test proves nothing", ls)
	}
	// What the process reports meanwhile: the store check is degraded (the
	// process serves), the injector's gate is open, the other workers' gate
	// is closed.
	err = app.StoreCheck(st).Run(ctx)
	if !errors.Is(err, health.ErrDegraded) || !strings.Contains(err.Error(), "memory index loading: 100 of 400") {
		t.Errorf("store check while loading = %v, want degraded with the progress", err)
	}
	if err := app.ServingStoreGate(st).Ready(ctx); err != nil {
		t.Errorf("injector gate while loading: %v", err)
	}
	if err := app.StoreGate(st).Ready(ctx); err == nil || !strings.Contains(err.Error(), "loading") {
		t.Errorf("store gate while loading = %v, want closed", err)
	}

	unhold()
	if err := loading.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	if err := loading.WaitIndexed(ctx); err != nil {
		t.Fatal(err)
	}
	if err := app.StoreCheck(st).Run(ctx); err != nil {
		t.Errorf("store check after the load = %v", err)
	}
	if err := app.StoreGate(st).Ready(ctx); err != nil {
		t.Errorf("store gate after the load = %v", err)
	}
	ref.TurnID = "t2"
	got, err = run.Client.Inject(ctx, ref, events.TurnStarted{Text: "when does the release train leave?"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Block, "every Thursday at noon") {
		t.Errorf("block after the load lacks the memory from the last chunk:\n%s", got.Block)
	}
}

// seed writes nodes, with vectors of the scripted server's embedding model,
// into a new SQLite store at path.
func seed(ctx context.Context, t *testing.T, srv *llmtest.Server, path string, nodes []memory.Node) {
	t.Helper()
	texts := make([]string, len(nodes))
	for i, n := range nodes {
		texts[i] = n.Label
	}
	vecs, err := srv.Embedder().Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range nodes {
		nodes[i].Embedding, nodes[i].EmbeddingModel = vecs[i], llmtest.EmbedModel
	}
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutBatch(ctx, nodes, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
