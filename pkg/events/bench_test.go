package events_test

import (
	"context"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

func BenchmarkEncodeTurnEnded(b *testing.B) {
	e := samples()[1]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := events.Encode(e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeTurnEnded(b *testing.B) {
	data, err := events.Encode(samples()[1])
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := events.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeToken(b *testing.B) {
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			_ = events.EncodeToken("project-1234")
		}
	})
	b.Run("escaped", func(b *testing.B) {
		for b.Loop() {
			_ = events.EncodeToken("acme/web chat.42")
		}
	})
}

func BenchmarkNewID(b *testing.B) {
	for b.Loop() {
		_ = events.NewID()
	}
}

// BenchmarkPublish: one JetStream publish with ack to an embedded server.
func BenchmarkPublish(b *testing.B) {
	_, nc := eventstest.RunServer(b)
	eventstest.Setup(b, nc, eventstest.Topology())
	c, err := events.NewClient(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.PublishSessionIdle(ctx, events.Ref{ProjectID: "p", SessionID: "s"}, events.SessionIdle{LastActivity: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInjectRoundTrip: Inject against a stand-in injector that answers
// at once: the bus overhead a turn pays (publish with ack, consumer delivery,
// reply).
func BenchmarkInjectRoundTrip(b *testing.B) {
	_, nc := eventstest.RunServer(b)
	js := eventstest.Setup(b, nc, eventstest.Topology())
	c, err := events.NewClient(nc, events.WithInjectTimeout(10*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	startInjector(b, js, c, func(events.TurnStarted) string { return "<memory/>" })
	ctx := context.Background()
	for b.Loop() {
		if _, err := c.Inject(ctx, ref, events.TurnStarted{Text: "hello"}); err != nil {
			b.Fatal(err)
		}
	}
}
