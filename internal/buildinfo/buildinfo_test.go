package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	i := Read()
	if i.Go != runtime.Version() {
		t.Errorf("Go = %q, want %q", i.Go, runtime.Version())
	}
	// A test binary stamps no module version.
	if i.Version != "devel" {
		t.Errorf("Version = %q, want devel in a test binary", i.Version)
	}
	if !strings.HasPrefix(i.String(), "engram devel") || !strings.HasSuffix(i.String(), " "+runtime.Version()) {
		t.Errorf("String = %q", i.String())
	}
}

func TestShortAndString(t *testing.T) {
	for _, c := range []struct {
		in           Info
		short, human string
	}{
		{Info{Version: "v1.2.3", Commit: "0123456789abcdef", Go: "go1.26.8"}, "v1.2.3", "engram v1.2.3 (commit 0123456789ab) go1.26.8"},
		{Info{Version: "devel", Go: "go1.26.8"}, "devel", "engram devel go1.26.8"},
		{Info{Version: "devel", Commit: "0123456789abcdef", CommitTime: "2026-12-06T03:00:00Z", Modified: true, Go: "go1.26.8"},
			"devel+0123456789ab.dirty", "engram devel (commit 0123456789ab, 2026-12-06T03:00:00Z, modified) go1.26.8"},
	} {
		if got := c.in.Short(); got != c.short {
			t.Errorf("Short(%+v) = %q, want %q", c.in, got, c.short)
		}
		if got := c.in.String(); got != c.human {
			t.Errorf("String(%+v) = %q, want %q", c.in, got, c.human)
		}
	}
}
