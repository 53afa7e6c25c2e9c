package injectfx_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/fx"

	"github.com/engram-memory/engram/internal/app/apptest"
	"github.com/engram-memory/engram/internal/inject/injectfx"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

// The disk-full finding on a whole `engram serve` process whose
// data dir (NATS store and SQLite) is on a small volume (a tmpfs; root
// only, skipped elsewhere): once the volume fills, turns are refused and
// the readiness check "nats" says why; once space returns the process
// recovers by itself (the guard restarts JetStream) and turns are answered
// again. Before the guard, ENGRAM_IN refused every event until a restart
// (0 of 10 after space returned) and /readyz said all was well.
func TestServeRecoversFromADiskFull(t *testing.T) {
	vol := t.TempDir()
	if err := syscall.Mount("tmpfs", vol, "tmpfs", 0, "size=160m"); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(vol, syscall.MNT_DETACH) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := llmtest.New(t)
	cfg := apptest.Config(t, srv.Config())
	cfg.DataDir = filepath.Join(vol, "data")
	// Limits the volume can hold (a sizing error otherwise).
	cfg.Events.InMaxBytes, cfg.Events.OutMaxBytes, cfg.Events.DLQMaxBytes = 16<<20, 8<<20, 8<<20
	run := apptest.StartConfig(ctx, t, cfg, "injectfx-diskfull", events.ConsumerInjector, []fx.Option{injectfx.Module()},
		events.WithInjectTimeout(1500*time.Millisecond))
	check := run.Process.Bus.Check()
	turn := func(i int) error {
		_, err := run.Client.Inject(ctx, events.Ref{ProjectID: "p1", SessionID: "s1", TurnID: fmt.Sprintf("t%d", i)},
			events.TurnStarted{Text: "what did we decide?"})
		return err
	}
	if err := turn(0); err != nil {
		t.Fatal(err)
	}

	filler := filepath.Join(vol, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	_ = f.Close()
	// The last pages of the files in use take a few small events more;
	// then every one is refused.
	refused, taken := 0, 0
	for i := 1; i <= 400 && refused < 5; i++ {
		if turn(i) != nil {
			refused++
		} else if refused == 0 {
			taken++
		}
	}
	var cerr error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cerr = check.Run(ctx); cerr != nil {
			break
		}
	}
	if refused == 0 || cerr == nil || !strings.Contains(cerr.Error(), "no space left on device") ||
		!strings.Contains(cerr.Error(), "restarting JetStream once 64.0 MiB are free") {
		t.Fatalf("full volume: %d turns refused, readiness %v", refused, cerr)
	}
	t.Logf("while full: %d turns taken, then %d refused; readiness: %v", taken, refused, cerr)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cerr = check.Run(ctx); cerr == nil {
			break
		}
	}
	if cerr != nil {
		t.Fatalf("readiness a minute after space returned: %v", cerr)
	}
	answered := 0
	for i := 10; i < 20; i++ {
		var err error
		for try := 0; try < 20; try++ {
			if err = turn(i); err == nil {
				answered++
				break
			}
		}
		if err != nil {
			t.Errorf("turn %d after recovery: %v", i, err)
		}
	}
	t.Logf("ready again %v after space returned; %d of 10 turns answered after", time.Since(start).Round(time.Millisecond), answered)
	if answered != 10 {
		t.Fatalf("%d of 10 turns answered after space returned", answered)
	}
}
