// Package eventstest starts a real embedded nats-server with JetStream for
// tests, so that every package tests against the real thing.
//
//	srv, nc := eventstest.RunServer(t)
//	js := eventstest.Setup(t, nc, eventstest.Topology())
package eventstest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/pkg/events"
)

// RunServer starts a nats-server with JetStream on a random loopback port,
// storing in t.TempDir(), and returns it with a connection. Both are closed
// (and the server waited for) when the test ends.
func RunServer(t testing.TB) (*server.Server, *nats.Conn) {
	t.Helper()
	srv, err := StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv, Connect(t, srv)
}

// StartServer starts a nats-server with JetStream on a random loopback port
// storing in dir (for examples and benchmarks without a *testing.T). The
// caller shuts it down: srv.Shutdown(); srv.WaitForShutdown().
func StartServer(dir string) (*server.Server, error) {
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  dir,
		NoLog:     true,
		NoSigs:    true,
		// Keep the test server small.
		JetStreamMaxMemory: 128 << 20,
		JetStreamMaxStore:  256 << 20,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("eventstest: new server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, errors.New("eventstest: nats-server not ready within 10s")
	}
	return srv, nil
}

// Connect opens another connection to srv, closed when the test ends.
func Connect(t testing.TB, srv *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatalf("eventstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Topology returns events.DefaultTopology with memory storage of 16 MiB per
// stream (fast, nothing left on disk). Tests adjust consumers' ack wait and
// max deliver as needed.
func Topology() events.Topology {
	t := events.DefaultTopology()
	for _, s := range []*events.StreamConfig{&t.In, &t.Out, &t.DLQ} {
		s.Storage = jetstream.MemoryStorage
		s.MaxBytes = 16 << 20
	}
	return t
}

// Setup creates the topology on nc's server and returns a JetStream handle.
func Setup(t testing.TB, nc *nats.Conn, topo events.Topology) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("eventstest: jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := events.EnsureTopology(ctx, js, topo); err != nil {
		t.Fatalf("eventstest: ensure topology: %v", err)
	}
	return js
}
