package natsembed_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/natsembed"
)

// smallVolume mounts a tmpfs of size bytes (root only; the test is skipped
// elsewhere) and returns its path.
func smallVolume(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fillVolume writes a file until the volume is full and returns its path.
func fillVolume(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !strings.Contains(err.Error(), "no space left") {
				t.Fatal(err)
			}
			return path
		}
	}
}

// The finding, on a real full disk (a small tmpfs): after a write
// fails with "no space left on device", nats-server's file store refuses
// every publish to the stream even once space has returned (0 of 10 in the
// issue), and the server says nothing is wrong. The guard sees the store
// failing, waits for space, restarts JetStream, and the stream takes events
// again with every event it had acknowledged still there and delivered.
func TestGuardRecoversTheStoreAfterADiskFull(t *testing.T) {
	vol := smallVolume(t, 12<<20)
	srv, err := natsembed.Start(natsembed.Options{StoreDir: filepath.Join(vol, "nats"), Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "IN", Subjects: []string{"in.>"},
		Retention: jetstream.InterestPolicy, MaxBytes: 4 << 20}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, "IN", jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	publish := func(id string) error {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := js.Publish(pctx, "in.e", []byte(id+strings.Repeat(".", 2000)), jetstream.WithMsgID(id))
		return err
	}
	acked := map[string]bool{}
	for i := range 20 {
		id := fmt.Sprintf("before-%d", i)
		if err := publish(id); err != nil {
			t.Fatal(err)
		}
		acked[id] = true
	}

	var failures, recoveries = make(chan error, 4), make(chan time.Duration, 4)
	g := srv.Guard(natsembed.GuardOptions{Interval: 50 * time.Millisecond, MinFree: 1 << 20, RetryAfter: 100 * time.Millisecond,
		OnFailure: func(err error) { failures <- err }, OnRecovered: func(d time.Duration) { recoveries <- d }})
	defer g.Stop()

	filler := fillVolume(t, vol)
	refused := 0
	for i := range 5 {
		if err := publish(fmt.Sprintf("full-%d", i)); err != nil {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("a full disk refused no publish")
	}
	select {
	case err := <-failures:
		if !strings.Contains(err.Error(), "no space left on device") {
			t.Fatalf("failure %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the guard never saw the store fail")
	}
	// No room: no restart, the status says what it waits for.
	time.Sleep(300 * time.Millisecond)
	st := g.Status()
	if st.Failing == nil || st.Restarts != 0 || !strings.Contains(st.Problem(), "once 1.0 MiB are free") {
		t.Fatalf("status while full: %+v %q", st, st.Problem())
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-recoveries:
		t.Logf("store recovered %v after it failed (%d restarts)", d.Round(time.Millisecond), g.Status().Restarts)
	case <-ctx.Done():
		t.Fatalf("the guard never recovered the store: %+v", g.Status())
	}
	if srv.StoreFailure() != nil || g.Status().Problem() != "" {
		t.Fatalf("still failing: %v", srv.StoreFailure())
	}
	// The publisher retries what was refused (same ids), and goes on.
	for i := range 5 {
		id := fmt.Sprintf("full-%d", i)
		var err error
		for try := 0; try < 50; try++ {
			if err = publish(id); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("retry of %s after recovery: %v", id, err)
		}
		acked[id] = true
	}
	for i := range 10 {
		id := fmt.Sprintf("after-%d", i)
		if err := publish(id); err != nil {
			t.Fatal(err)
		}
		acked[id] = true
	}
	// Every acknowledged event is delivered to the consumer, once.
	cons, err := js.Consumer(ctx, "IN", "w")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for len(got) < len(acked) {
		b, err := cons.Fetch(50, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range b.Messages() {
			n++
			got[strings.TrimRight(string(m.Data()), ".")]++
			_ = m.Ack()
		}
		if n == 0 {
			break
		}
	}
	for id := range acked {
		if got[id] != 1 {
			t.Errorf("event %s delivered %d times", id, got[id])
		}
	}
	if len(got) != len(acked) {
		t.Fatalf("%d events delivered, %d acknowledged", len(got), len(acked))
	}
	t.Logf("%d of %d acknowledged events delivered after the disk-full recovery (%d publishes refused while full, retried)",
		len(got), len(acked), refused)
}
