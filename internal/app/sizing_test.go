package app_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/app"
)

// The finding: on a volume smaller than the streams' limits, serve
// failed with fx's dependency-graph dump. It fails with one line: what the
// streams reserve, what the store may use, the settings to change. (A
// small tmpfs: root only, skipped elsewhere.)
func TestStartOnATooSmallVolumeSaysHowToSizeIt(t *testing.T) {
	vol := t.TempDir()
	if err := syscall.Mount("tmpfs", vol, "tmpfs", 0, "size=64m"); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(vol, syscall.MNT_DETACH) })
	cfg := testConfig(t)
	cfg.DataDir = filepath.Join(vol, "data")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := app.Start(ctx, cfg, true, "sizing")
	if err == nil {
		_ = p.Stop(ctx)
		t.Fatal("started with 1.5 GiB of stream limits on a 64 MiB volume")
	}
	msg := err.Error()
	t.Log(msg)
	if !errors.Is(err, app.ErrSizing) || strings.Contains(msg, "\n") || strings.Contains(msg, "could not build") ||
		!strings.Contains(msg, "the streams reserve 1.5 GiB") || !strings.Contains(msg, "ENGRAM_IN_MAX_BYTES") ||
		!strings.Contains(msg, filepath.Join(vol, "data", "nats")) {
		t.Fatalf("start error is not the sizing line: %v", err)
	}
	// Sized to the volume, the same data dir starts.
	cfg.Events.InMaxBytes, cfg.Events.OutMaxBytes, cfg.Events.DLQMaxBytes = 16<<20, 8<<20, 8<<20
	p, err = app.Start(ctx, cfg, true, "sizing")
	if err != nil {
		t.Fatalf("sized to the volume: %v", err)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
