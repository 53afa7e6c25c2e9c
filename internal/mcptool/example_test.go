package mcptool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/engram-memory/engram/internal/mcptool"
	"github.com/engram-memory/engram/pkg/llm/hashembed"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// An agent's session with the `memory` tool, from the store to the answer:
// the tool over a store and an embedder, an MCP server for one caller (as
// `engram mcp -project shop -session s1` makes it), and the SDK's client
// calling it with an ordered list of operations, one of which fails.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "mcptool-example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "engram.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	// Two memories of the project, embedded: recall waits for vectors.
	emb := hashembed.New(0)
	for _, n := range []memory.Node{
		{ID: "m1", Subkind: memory.Failure, ProjectID: "shop", Label: "Stripe webhook signature 400",
			Body: "Verify the raw body; parsing it as JSON first breaks the signature."},
		{ID: "m2", Subkind: memory.Decision, ProjectID: "shop", Label: "Payments through Stripe Checkout"},
	} {
		if _, err := st.Upsert(ctx, n); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := memory.EmbedPending(ctx, st, emb, 64); err != nil {
		log.Fatal(err)
	}

	// The tool, and a server bound to one caller (stdio has no token).
	tool, err := mcptool.New(st, emb, mcptool.Config{MinConfidence: 0.3})
	if err != nil {
		log.Fatal(err)
	}
	server, err := mcptool.NewServer(tool, mcptool.ServerOptions{Caller: &mcptool.Caller{Project: "shop", Session: "s1"}})
	if err != nil {
		log.Fatal(err)
	}

	// The agent's side: the SDK's client, here over an in-memory pipe
	// (an agent host uses stdio or streamable HTTP the same way).
	serverEnd, clientEnd := mcp.NewInMemoryTransports()
	if _, err := server.Connect(ctx, serverEnd, nil); err != nil {
		log.Fatal(err)
	}
	session, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(ctx, clientEnd, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()

	res, err := session.CallTool(ctx, &mcp.CallToolParams{
		Name: mcptool.ToolName,
		Arguments: map[string]any{"ops": []map[string]any{
			{"op": "recall", "query": "why does the Stripe webhook fail its signature check?", "limit": 1},
			{"op": "forget", "id": "no-such-id", "reason": "a mistaken id"},
			{"op": "update", "id": "m2", "body": "Payment Links replaced Checkout in May."},
			{"op": "stats"},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	// The answer is JSON text (also in res.StructuredContent).
	var answer mcptool.Response
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &answer); err != nil {
		log.Fatal(err)
	}
	for _, r := range answer.Results {
		switch {
		case !r.OK:
			fmt.Printf("%s failed: %s\n", r.Op, r.Error)
		case r.Op == "recall":
			m := r.Memories[0]
			fmt.Printf("recall: [%s] (%s) %s\n", m.ID, m.Kind, m.Text)
		case r.Op == "update":
			fmt.Printf("update: [%s] %s (source %s)\n", r.Memory.ID, r.Memory.Text, r.Memory.Source)
		case r.Op == "stats":
			fmt.Printf("stats: %d live, %d decision, recall ready %v\n", r.Stats.Counts.Live, r.Stats.Counts.BySubkind[memory.Decision], r.Stats.Ready)
		}
	}
	// Output:
	// recall: [m1] (failure) Stripe webhook signature 400: Verify the raw body; parsing it as JSON first breaks the signature.
	// forget failed: memory "no-such-id" not found
	// update: [m2] Payments through Stripe Checkout: Payment Links replaced Checkout in May. (source agent)
	// stats: 2 live, 1 decision, recall ready true
}
