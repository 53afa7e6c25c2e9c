package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/inject/injectfx"
	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/pkg/events"
)

// engram status says when dead letters are refused: against a running
// process whose ENGRAM_DLQ is full, the poison events' letters wait in the
// store and status lists it among the problems (degraded: events flow).
func TestStatusReportsParkedLetters(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.NATS.Listen = "127.0.0.1:-1"
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.Idle.Enabled = false
	cfg.Log = config.Log{Format: config.LogJSON, Level: "error"}
	cfg.Events.DLQMaxBytes = 4 << 10
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := app.Start(ctx, cfg, true, "status-parked", injectfx.Module())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	auth, _, err := app.ConnectOptions(cfg, natsauth.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(p.Bus.URL, auth...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for i := 0; ; i++ {
		m := nats.NewMsg(cfg.Topology().Subjects().DLQ("filler"))
		m.Data = make([]byte, 512)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			break
		}
		if i > 100 {
			t.Fatal("the DLQ never filled")
		}
	}
	for i := range 10 {
		if _, err := js.Publish(ctx, cfg.Topology().Subjects().In(events.TypeTurnStarted, "", "p", fmt.Sprintf("s%d", i)), []byte("not an event")); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"-data", cfg.DataDir, "-nats-url", p.Bus.URL, "-http", strings.TrimPrefix(p.HTTP.URL(), "http://")}
	want := regexp.MustCompile(`(?m)^  DEGRADED dead-letters: 10 dead letters parked in the store since \S+: ENGRAM_DLQ refuses them \(.*maximum bytes exceeded.*\)`)
	var out bytes.Buffer
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out.Reset()
		if err := status(ctx, &out, args); err != nil {
			t.Fatalf("status: %v\n%s", err, out.String())
		}
		if want.MatchString(out.String()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status lacks %s:\n%s", want, out.String())
		}
	}
	if !regexp.MustCompile(`(?m)^dead-letters\s+degraded\s+10 dead letters parked`).MatchString(out.String()) {
		t.Fatalf("readiness table lacks the dead-letters check:\n%s", out.String())
	}
}
