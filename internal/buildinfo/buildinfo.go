// Package buildinfo says which Engram a binary is: the module version, the
// commit it was built from and the Go version, read from the binary itself
// (runtime/debug.ReadBuildInfo), so that `engram version`, the MCP
// server's serverInfo and a bug report name the same build.
//
// `go build` and `go install` in a git clone stamp the main module's
// version (a tag, or a pseudo-version from the commit, "+dirty" when the
// checkout had changes) and the VCS settings; `go run`, test binaries and
// builds without .git (a container build context, a git worktree, whose
// .git is a file the go command does not follow, or -buildvcs=false) stamp
// neither, so their version is "devel". Such a build can name its version
// and commit with the linker:
//
//	go build -ldflags "-X github.com/engram-memory/engram/internal/buildinfo.stampedVersion=v1.2.0 \
//	  -X github.com/engram-memory/engram/internal/buildinfo.stampedCommit=$(git rev-parse HEAD)" ./cmd/...
//
// (deploy/Dockerfile does, from its ENGRAM_VERSION and ENGRAM_COMMIT build
// arguments); the stamped values win over the module's.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is what the binary knows about its build.
type Info struct {
	// Version is the main module's version ("devel" when the build
	// stamped none).
	Version string `json:"version"`
	// Commit is the VCS revision ("" when not stamped).
	Commit string `json:"commit,omitempty"`
	// CommitTime is the revision's time (RFC 3339, "" when not stamped).
	CommitTime string `json:"commit_time,omitempty"`
	// Modified: the checkout had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// Go is the Go version the binary was built with.
	Go string `json:"go"`
}

// Set by the linker (-X) for builds without VCS information.
var stampedVersion, stampedCommit string

// Read returns the binary's build information.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return read(bi, stampedVersion, stampedCommit)
}

func read(bi *debug.BuildInfo, version, commit string) (i Info) {
	i = Info{Version: "devel", Go: runtime.Version()}
	defer func() {
		if version != "" {
			i.Version = version
		}
		if commit != "" {
			i.Commit, i.CommitTime, i.Modified = commit, "", false
		}
	}()
	if bi == nil {
		return i
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		i.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Commit = s.Value
		case "vcs.time":
			i.CommitTime = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	return i
}

// Version is the version a server reports to its clients: the module
// version, or "devel" with the short commit when the build stamped one
// ("devel+1a2b3c4d5e6f", "+dirty" for a modified checkout).
func Version() string {
	return Read().Short()
}

// Short is i as one token: the module version when stamped, else "devel"
// with the short commit.
func (i Info) Short() string {
	if i.Version != "devel" || i.Commit == "" {
		return i.Version
	}
	v := "devel+" + short(i.Commit)
	if i.Modified {
		v += ".dirty"
	}
	return v
}

// String is i on one line: "engram v1.2.3 (commit 1a2b3c4d5e6f, 2026-12-06T03:00:00Z, modified) go1.26.8".
func (i Info) String() string {
	var b strings.Builder
	b.WriteString("engram " + i.Version)
	if i.Commit != "" {
		b.WriteString(" (commit " + short(i.Commit))
		if i.CommitTime != "" {
			b.WriteString(", " + i.CommitTime)
		}
		if i.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	b.WriteString(" " + i.Go)
	return b.String()
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
