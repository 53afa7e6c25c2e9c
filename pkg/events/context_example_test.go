package events_test

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

// A platform rebuilds the conversation it sends from the context API before
// each turn: the summary block of the compacted turns, then the messages
// after it. A stand-in service plays the compactor's part.
func ExampleClient_Context() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "engram-example-*")
	defer os.RemoveAll(dir)
	srv, err := eventstest.StartServer(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	client, err := events.NewClient(nc)
	if err != nil {
		fmt.Println(err)
		return
	}
	svc, _ := client.ServeContext(func(_ context.Context, ref events.Ref, _ events.ContextRequest) (events.ContextReply, error) {
		return events.ContextReply{Block: "[summary of turns 1-40: reference only]", UpTo: 160,
			Messages: []events.ContextMessage{{ID: 161, TurnID: "turn-41", Message: events.Message{Role: events.RoleUser, Content: "Now add a rollback step."}}}}, nil
	}, 1, 0)
	defer svc.Stop()

	var history []string // what the platform sends after its system prompt and the memory block
	c, err := client.Context(ctx, events.Ref{ProjectID: "acme/web", SessionID: "chat-42"})
	if err != nil {
		// events.ErrContextUnavailable or anything else: send the platform's own history.
		fmt.Println("no context:", err)
		return
	}
	if c.Block != "" {
		history = append(history, "user: "+c.Block)
	}
	for _, m := range c.Messages {
		history = append(history, string(m.Role)+": "+m.Content)
	}
	history = append(history, "user: And run the tests.") // this turn's message
	for _, h := range history {
		fmt.Println(h)
	}
	// Output:
	// user: [summary of turns 1-40: reference only]
	// user: Now add a rollback step.
	// user: And run the tests.
}
