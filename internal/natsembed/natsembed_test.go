package natsembed_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/engram-memory/engram/internal/natsembed"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartPersistsJetStreamAcrossRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats")
	srv, err := natsembed.Start(natsembed.Options{StoreDir: dir, Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Ready(); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if !strings.HasPrefix(srv.ClientURL(), "nats://127.0.0.1:") || strings.HasSuffix(srv.ClientURL(), ":-1") {
		t.Fatalf("client URL %q", srv.ClientURL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	publish := func(url string) {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Storage: jetstream.FileStorage}); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, "t.a", []byte("hello")); err != nil {
			t.Fatal(err)
		}
	}
	publish(srv.ClientURL())
	srv.Shutdown()
	srv.Shutdown() // idempotent
	if err := srv.Ready(); err == nil {
		t.Fatal("Ready after Shutdown should fail")
	}

	srv2, err := natsembed.Start(natsembed.Options{StoreDir: dir, Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Shutdown()
	nc, err := nats.Connect(srv2.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	s, err := js.Stream(ctx, "T")
	if err != nil {
		t.Fatalf("stream lost across restart: %v", err)
	}
	msg, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatalf("message lost across restart: %v", err)
	}
	if string(msg.Data) != "hello" {
		t.Fatalf("message data %q after restart", msg.Data)
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	for _, o := range []natsembed.Options{
		{StoreDir: ""},
		{StoreDir: t.TempDir(), Listen: "no-port"},
		{StoreDir: t.TempDir(), Listen: "127.0.0.1:http"},
		{StoreDir: t.TempDir(), Listen: "127.0.0.1:70000"},
	} {
		if srv, err := natsembed.Start(o); err == nil {
			srv.Shutdown()
			t.Errorf("Start(%+v) succeeded, want error", o)
		}
	}
}

func TestStartFailsWhenPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv, err := natsembed.Start(natsembed.Options{StoreDir: t.TempDir(), Listen: ln.Addr().String(), ReadyTimeout: 2 * time.Second})
	if err == nil {
		srv.Shutdown()
		t.Fatal("Start on a taken port succeeded")
	}
	if !errors.Is(err, natsembed.ErrNotReady) {
		t.Fatalf("err = %v, want ErrNotReady", err)
	}
}

// TestGuardWaitsForASecondFailure: a failure one round sees and the next
// does not (nats-server's health check while a stream is being created)
// neither restarts JetStream nor is reported; one that lasts is, at the
// second round.
func TestGuardWaitsForASecondFailure(t *testing.T) {
	srv, err := natsembed.Start(natsembed.Options{StoreDir: t.TempDir(), Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	var mu sync.Mutex
	fail := 1 // rounds left that see a failure
	rounds := 0
	probe := func() error {
		mu.Lock()
		defer mu.Unlock()
		rounds++
		if fail > 0 {
			fail--
			return errors.New("JetStream stream '$G > IN' could not be recovered")
		}
		return nil
	}
	failures := make(chan error, 8)
	g := srv.GuardProbed(natsembed.GuardOptions{Interval: 20 * time.Millisecond, MinFree: 1, RetryAfter: time.Hour,
		OnFailure: func(err error) { failures <- err }}, probe)
	defer g.Stop()
	waitRounds := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			r := rounds
			mu.Unlock()
			if r >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the guard ran %d rounds", r)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitRounds(4)
	if st := g.Status(); st.Failing != nil || st.Restarts != 0 || len(failures) != 0 {
		t.Fatalf("a failure seen once: %+v, %d reported", st, len(failures))
	}
	mu.Lock()
	fail, rounds = 1000, 0
	mu.Unlock()
	waitRounds(3)
	select {
	case err := <-failures:
		if st := g.Status(); st.Failing == nil || st.Restarts != 1 {
			t.Fatalf("a lasting failure (%v): %+v", err, st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a lasting failure was not reported")
	}
}

// The sync options reach the server's JetStream: an interval, or after
// every write.
func TestStartSetsTheSyncPolicy(t *testing.T) {
	for _, o := range []natsembed.Options{{SyncInterval: 250 * time.Millisecond}, {SyncAlways: true}} {
		o.StoreDir, o.Listen = t.TempDir(), "127.0.0.1:-1"
		srv, err := natsembed.Start(o)
		if err != nil {
			t.Fatal(err)
		}
		js := srv.NATS().JetStreamConfig()
		srv.Shutdown()
		if js == nil || js.SyncAlways != o.SyncAlways || (!o.SyncAlways && js.SyncInterval != o.SyncInterval) {
			t.Errorf("options %+v: JetStream config %+v", o, js)
		}
	}
}
