package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

// engram status against a server: the fill level, a role whose events
// wait with no worker, and a deleted consumer (a failure: exit status 1).
func TestStatusReportsNoWorkerAndMissingConsumer(t *testing.T) {
	srv, nc := eventstest.RunServer(t)
	js := eventstest.Setup(t, nc, eventstest.Topology())
	cl, _ := events.NewClient(nc)
	ctx := context.Background()
	for range 3 {
		if _, err := cl.PublishSessionIdle(ctx, events.Ref{ProjectID: "p", SessionID: "s"}, events.SessionIdle{LastActivity: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"-nats-url", srv.ClientURL(), "-http", "127.0.0.1:1"}
	time.Sleep(health.IdleAfter + 500*time.Millisecond) // nobody pulls the consolidator
	wants := []*regexp.Regexp{
		regexp.MustCompile(`(?m)^ENGRAM_IN\s+\[engram\.in\.turn_started\.\*\.\*\.\* [^\]]*\]\s+interest\s+3\s+\d+\s+0\.\d% of 16M\s+max 1000\s`),
		regexp.MustCompile(`(?m)^consolidator\s+ENGRAM_IN\s+3\s+0\s+0\s+0\s+-\s+NONE RUNNING: events wait$`),
		regexp.MustCompile(`(?m)^  DEGRADED consumer consolidator: 3 events pending and no worker pulling \(none running, or all paused\)$`),
	}
	// The consumer counts the published events asynchronously: status is
	// asked again until it shows them (bounded), then judged.
	var out bytes.Buffer
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out.Reset()
		if err := status(ctx, &out, args); err != nil {
			t.Fatalf("status: %v\n%s", err, out.String())
		}
		if wants[1].MatchString(out.String()) || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range wants {
		if !want.MatchString(out.String()) {
			t.Errorf("status lacks %s:\n%s", want, out.String())
		}
	}
	if err := js.DeleteConsumer(ctx, events.StreamIn, events.ConsumerExtractor); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err := status(ctx, &out, args)
	if err == nil || !strings.Contains(err.Error(), "consumer extractor on ENGRAM_IN missing") ||
		!regexp.MustCompile(`(?m)^extractor\s+ENGRAM_IN\s+missing \(run engram setup\)`).MatchString(out.String()) ||
		!strings.Contains(out.String(), "FAILED   consumer extractor on ENGRAM_IN missing") {
		t.Fatalf("deleted consumer: %v\n%s", err, out.String())
	}
}
