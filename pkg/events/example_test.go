package events_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

// A chat platform's whole turn loop: ask Engram for memory, prepend the
// block, run the model, report the turn. Here an embedded server and a tiny
// stand-in injector play the part of `engram serve`.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "engram-example-*")
	defer os.RemoveAll(dir)
	srv, err := eventstest.StartServer(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()

	nc, err := nats.Connect(srv.ClientURL()) // a platform connects to engram serve's NATS URL
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := events.EnsureTopology(ctx, js, eventstest.Topology()); err != nil {
		fmt.Println(err)
		return
	}
	stop := standInInjector(ctx, js, nc)
	defer stop()

	client, err := events.NewClient(nc, events.WithInjectTimeout(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}

	// --- one turn ---
	ref := events.Ref{ProjectID: "acme/web", SessionID: "chat-42", TurnID: "turn-1"}
	user := "How do we deploy?"

	prompt := user
	inj, err := client.Inject(ctx, ref, events.TurnStarted{Text: user, Paths: []string{"deploy/"}})
	if err != nil {
		// events.ErrInjectTimeout or anything else: go on without memory.
		fmt.Println("no memory this turn:", err)
	} else if inj.Block != "" {
		prompt = inj.Block + "\n\n" + user
	}
	fmt.Println(prompt)

	answer := "Run `make deploy`." // the platform's model call goes here

	_, err = client.PublishTurnEnded(ctx, ref, events.TurnEnded{
		Messages: []events.Message{
			{Role: events.RoleUser, Content: user},
			{Role: events.RoleAssistant, Content: answer},
		},
		InputTokens:     1234,
		InjectedNodeIDs: inj.NodeIDs, // what the prompt carried: a store failover cannot lose its feedback
	})
	fmt.Println("turn_ended published:", err == nil)
	_, err = client.PublishTokensReported(ctx, ref, events.TokensReported{InputTokens: 1234})
	fmt.Println("tokens_reported published:", err == nil)

	// Output:
	// <memory>We deploy with make deploy.</memory>
	//
	// How do we deploy?
	// turn_ended published: true
	// tokens_reported published: true
}

// standInInjector answers turn_started the way the injector does: reply to
// reply_to with an injection_ready whose in_reply_to is the event id.
func standInInjector(ctx context.Context, js jetstream.JetStream, nc *nats.Conn) (stop func()) {
	client, _ := events.NewClient(nc)
	cons, _ := js.Consumer(ctx, events.StreamIn, events.ConsumerInjector)
	cc, _ := cons.Consume(func(m jetstream.Msg) {
		ev, err := events.Decode(m.Data())
		if err != nil {
			_ = m.Term()
			return
		}
		p, _ := events.PayloadAs[events.TurnStarted](ev)
		reply := events.New(ev.Ref(), events.InjectionReady{InReplyTo: ev.ID, Block: "<memory>We deploy with make deploy.</memory>"})
		_ = client.Respond(p.ReplyTo, reply)
		_ = m.Ack()
	})
	return func() { cc.Stop(); <-cc.Closed() }
}

// Building and reading subjects by hand (for a platform in another language,
// the same rules apply).
func ExampleSubjects() {
	s := events.Subjects{}                                        // prefix "engram"
	subj := s.In(events.TypeTurnEnded, "", "acme/web", "chat 42") // the default tenant
	fmt.Println(subj)
	fmt.Println(s.In(events.TypeTurnEnded, "acme", "web", "chat 42"))
	a, _ := s.Parse(subj)
	fmt.Printf("%s %q %q %q\n", a.Type, a.TenantID, a.ProjectID, a.SessionID)
	// Output:
	// engram.in.turn_ended.%.acme%2Fweb.chat%2042
	// engram.in.turn_ended.acme.web.chat%2042
	// turn_ended "" "acme/web" "chat 42"
}

// Decoding rejects a bad event with an error naming the field.
func ExampleDecode() {
	_, err := events.Decode([]byte(`{"id":"01A","type":"session_idle","version":1,
		"occurred_at":"2026-11-29T19:00:00Z","project_id":"p","session_id":"s","payload":{}}`))
	fmt.Println(err)
	// Output:
	// events: invalid event: payload.last_activity: missing
}
