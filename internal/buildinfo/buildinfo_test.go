package buildinfo

import (
	"runtime"
	"runtime/debug"
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

// TestRead: the module version and VCS settings of a build, and the values
// the linker stamps, which win.
func TestReadBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261206035910-f79dc22158f6"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "f79dc22158f67a6a4ba83d990bb171e2277fa58d"}, {Key: "vcs.time", Value: "2026-12-06T03:59:10Z"},
		{Key: "vcs.modified", Value: "true"}}}
	i := read(bi, "", "")
	if i.Version != "v0.0.0-20261206035910-f79dc22158f6" || i.Commit != "f79dc22158f67a6a4ba83d990bb171e2277fa58d" || !i.Modified || i.CommitTime == "" {
		t.Errorf("from the module: %+v", i)
	}
	if i := read(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "", ""); i.Version != "devel" || i.Commit != "" {
		t.Errorf("unstamped: %+v", i)
	}
	if i := read(bi, "v1.2.0", "abc"); i.Version != "v1.2.0" || i.Commit != "abc" || i.Modified || i.CommitTime != "" {
		t.Errorf("stamped by the linker: %+v", i)
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
