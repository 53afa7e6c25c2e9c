package console_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

// The world every console test sees: the default tenant's projects shop
// and blog, a global preference, and tenant acme's own project shop (the
// same project id in another tenant); a session s1 of shop with two turns,
// their injection records and a compaction summary; and a real
// consolidation pass over s1, run by the consolidator on the scripted
// model, that forgot a memory and held a near-duplicate for review.
const (
	tokShop  = "shop-token-0123456789abcdefghij" // alice: the default tenant's shop
	tokAcme  = "acme-token-0123456789abcdefghij" // acme-bot: every project of tenant acme
	tokAll   = "all-token-0123456789abcdefghijk" // ops: every project of the default tenant
	adminTok = "admin-token-0123456789abcdefghi"

	labelStripe  = "Use Stripe Checkout for payments"
	labelFly     = "Deploy the shop with Fly.io"
	labelStaging = "The staging database is Postgres 16"
	labelRace    = "Run go test -race before merging"
	labelRaceNew = "Run go test -race and go vet before merging"
	labelGlobal  = "Answer in British English"
	labelBlog    = "Blog posts are written in Hugo"
	labelAcme    = "Acme ships with GitLab CI"
	heldText     = "Deploy the shop with Fly.io every Friday"
	blockText    = "[Engram memory]\n- [stripe] Use Stripe Checkout for payments\n- [fly] Deploy the shop with Fly.io"
	summaryText  = "## Active task\nWire the checkout.\n## Decisions\nStripe Checkout."
)

type world struct {
	ctx                                      context.Context
	st                                       memory.Store
	srv                                      *llmtest.Server
	stripe, fly, staging, race, global, blog memory.Node
	acme                                     memory.Node
	pass                                     consolidate.Result
	block                                    inject.Block // the second turn's, as the injector built and recorded it
	tokens                                   string       // the tokens file
}

func writeTokens(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	body := tokShop + " alice shop\n" + tokAcme + " acme-bot * acme\n" + tokAll + " ops *\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// seed fills st (embedding with srv's embedder, the one the console
// searches with) and runs the consolidation pass.
func seed(t testing.TB, ctx context.Context, st memory.Store, srv *llmtest.Server) *world {
	t.Helper()
	w := &world{ctx: ctx, st: st, srv: srv, tokens: writeTokens(t)}
	client := srv.Client()
	emb := client.Embedder()
	put := func(n memory.Node) memory.Node {
		t.Helper()
		if n.Scope == "" {
			n.Scope = memory.ScopeProject
		}
		if n.Source == "" {
			n.Source = memory.SourceAgent
		}
		if n.AssertedBy == "" {
			n.AssertedBy = memory.AssertedInferred
		}
		if n.Confidence == 0 {
			n.Confidence = 0.7
		}
		vecs, err := emb.Embed(ctx, []string{memory.EmbedText(&n)})
		if err != nil {
			t.Fatal(err)
		}
		n.Embedding, n.EmbeddingModel = vecs[0], emb.Model()
		res, err := st.Upsert(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		return res.Node
	}
	w.stripe = put(memory.Node{Subkind: memory.Preference, ProjectID: "shop", Label: labelStripe,
		Body: "The user wants Stripe Checkout, not PayPal, for every payment flow.", AssertedBy: memory.AssertedUser, Source: memory.SourceUser, Confidence: 0.9})
	w.fly = put(memory.Node{Subkind: memory.Decision, ProjectID: "shop", Label: labelFly})
	w.staging = put(memory.Node{Subkind: memory.Observation, ProjectID: "shop", Label: labelStaging, Paths: []string{"deploy/staging.toml"}})
	w.race = put(memory.Node{Subkind: memory.Pattern, ProjectID: "shop", Label: labelRace})
	w.global = put(memory.Node{Subkind: memory.Preference, Scope: memory.ScopeGlobal, Label: labelGlobal, AssertedBy: memory.AssertedUser, Source: memory.SourceUser, Confidence: 0.9})
	w.blog = put(memory.Node{Subkind: memory.Decision, ProjectID: "blog", Label: labelBlog})
	w.acme = put(memory.Node{Subkind: memory.Decision, TenantID: "acme", ProjectID: "shop", Label: labelAcme})
	for _, e := range []memory.Edge{
		{Src: w.fly.ID, Dst: w.staging.ID, Relation: memory.RelatesTo},
		{Src: w.race.ID, Dst: w.fly.ID, Relation: memory.CausedBy},
		{Src: w.stripe.ID, Dst: w.fly.ID, Relation: memory.RelatesTo},
	} {
		if _, err := st.Link(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	s1 := memory.SessionRef{Project: "shop", Session: "s1"}
	for i, turn := range []struct{ user, assistant string }{
		{"How do we take payments?", "With Stripe Checkout, as you asked."},
		{"Where does the shop run? The staging database moved to MySQL.", "On Fly.io."},
	} {
		id := []string{"turn-1", "turn-2"}[i]
		if _, _, err := st.AppendTranscript(ctx, s1, id, []memory.Message{{Role: memory.RoleUser, Content: turn.user}, {Role: memory.RoleAssistant, Content: turn.assistant}}); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			// The second turn's block is the injector's own, recorded as
			// the turn_started handler records it: with why each line is
			// there.
			inj, err := inject.New(st, emb, inject.Defaults())
			if err != nil {
				t.Fatal(err)
			}
			if w.block, err = inj.Build(ctx, inject.Request{Project: "shop", Session: "s1", Turn: id, Text: turn.user, Explain: true}); err != nil {
				t.Fatal(err)
			}
			if w.block.Why == nil || len(w.block.Recalled) == 0 || len(w.block.Standing) == 0 {
				t.Fatalf("the second turn's block: %+v", w.block)
			}
			continue
		}
		// The first turn's record is one written before records kept
		// their explanation.
		if err := st.PutInjection(ctx, s1, id, memory.Injection{IDs: []string{w.stripe.ID, w.fly.ID}, Scores: []float64{1, 0.62}, Text: blockText}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SaveSummary(ctx, s1, memory.Summary{Content: summaryText, UpTo: 2, TokensBefore: 9000, TokensAfter: 1200}); err != nil {
		t.Fatal(err)
	}
	// The pass: forget the staging fact (the user said it moved), revise
	// the race pattern, remember a near-duplicate of the deploy decision
	// (held), then done.
	srv.SetDefault(llmtest.ToolCall(consolidate.ToolDone, map[string]any{"summary": "done"}))
	srv.Enqueue(
		named(t, labelStaging, func(id string) llmtest.Reply {
			return llmtest.ToolCall(consolidate.ToolForget, map[string]any{"id": id, "reason": "the user said staging moved to MySQL"})
		}),
		named(t, labelRace, func(id string) llmtest.Reply {
			return llmtest.ToolCall(consolidate.ToolRevise, map[string]any{"id": id, "text": labelRaceNew, "reason": "the user added go vet"})
		}),
		llmtest.ToolCall(consolidate.ToolRemember, map[string]any{"text": heldText, "kind": "decision", "reason": "restated"}),
		llmtest.ToolCall(consolidate.ToolDone, map[string]any{"summary": "staging fact retired"}),
	)
	c, err := consolidate.New(st, client, consolidate.Defaults(), consolidate.WithEmbedder(emb))
	if err != nil {
		t.Fatal(err)
	}
	if w.pass, err = c.Run(ctx, consolidate.Request{Project: "shop", Session: "s1"}); err != nil {
		t.Fatal(err)
	}
	if o := w.pass.Outcome; o.Forgotten != 1 || o.Revised != 1 || o.Held != 1 {
		t.Fatalf("the seeded pass: outcome %+v", o)
	}
	if n, err := st.Get(ctx, w.staging.ID); err != nil || n.ArchivedAt.IsZero() {
		t.Fatalf("the pass did not forget the staging fact: %+v %v", n, err)
	}
	return w
}

// named answers with reply(the short id the pass shows label under): the
// consolidator names memories to the model as [f1], [f2], ...
func named(t testing.TB, label string, reply func(id string) llmtest.Reply) llmtest.Reply {
	re := regexp.MustCompile(`\[(f\d+)\] ` + regexp.QuoteMeta(label))
	return llmtest.Func(func(req api.ChatRequest) llmtest.Reply {
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if m := re.FindStringSubmatch(req.Messages[i].Content); m != nil {
				return reply(m[1])
			}
		}
		t.Errorf("the pass's prompt does not show %q", label)
		return llmtest.ToolCall(consolidate.ToolDone, map[string]any{"summary": "not found"})
	})
}

func timeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
