package deploy

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// TestDockerfile parses deploy/Dockerfile with BuildKit's own parser:
// multi-stage, a static build (CGO_ENABLED=0), a non-root final user, the
// Go of go.mod, every binary of cmd/ in /usr/local/bin.
func TestDockerfile(t *testing.T) {
	res, err := parser.Parse(bytes.NewReader(read(t, "deploy", "Dockerfile")))
	if err != nil {
		t.Fatalf("deploy/Dockerfile: %v", err)
	}
	var lint []string
	stages, _, err := instructions.Parse(res.AST, linter.New(&linter.Config{Warn: func(rule, desc, url, msg string, _ []parser.Range) {
		lint = append(lint, rule+": "+msg)
	}}))
	if err != nil {
		t.Fatalf("deploy/Dockerfile: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("deploy/Dockerfile: %s", w.Short)
	}
	for _, l := range lint {
		t.Errorf("deploy/Dockerfile lint: %s", l)
	}
	if len(stages) < 2 {
		t.Fatalf("deploy/Dockerfile has %d stage(s), want a build stage and a runtime stage", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	if want := "golang:" + goModVersion(t, "go"); !strings.HasPrefix(build.BaseName, want) {
		t.Errorf("build stage FROM %s, want %s (go.mod's go directive)", build.BaseName, want)
	}
	if strings.HasPrefix(final.BaseName, "golang") || !strings.Contains(final.BaseName, "static") {
		t.Errorf("runtime stage FROM %s, want a static base without a toolchain (distroless static)", final.BaseName)
	}

	// The build: CGO_ENABLED=0 in effect when go build runs.
	cgo, built := "", false
	for _, c := range build.Commands {
		switch c := c.(type) {
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				if kv.Key == "CGO_ENABLED" {
					cgo = kv.Value
				}
			}
		case *instructions.RunCommand:
			line := strings.Join(c.CmdLine, " ")
			if strings.Contains(line, "CGO_ENABLED=") {
				cgo = strings.Fields(line[strings.Index(line, "CGO_ENABLED=")+len("CGO_ENABLED="):])[0]
			}
			if strings.Contains(line, "go build") {
				built = true
				if cgo != "0" {
					t.Errorf("go build runs with CGO_ENABLED=%q, want 0 (static binaries)", cgo)
				}
				if !strings.Contains(line, "./cmd/...") || !strings.Contains(line, "-o /out/") {
					t.Errorf("go build %q: want every binary of ./cmd/... in /out/", line)
				}
			}
		}
	}
	if !built {
		t.Error("the build stage runs no go build")
	}
	// Static needs a pure-Go SQLite: modernc.org/sqlite, never a cgo driver.
	gomod := string(read(t, "go.mod"))
	if !strings.Contains(gomod, "modernc.org/sqlite ") {
		t.Error("go.mod lacks modernc.org/sqlite, the pure-Go SQLite driver a CGO_ENABLED=0 build needs")
	}
	for _, cgoDriver := range []string{"github.com/mattn/go-sqlite3", "github.com/ncruces/go-sqlite3 "} {
		if strings.Contains(gomod, cgoDriver) {
			t.Errorf("go.mod requires %s, which a static build cannot link", cgoDriver)
		}
	}

	// The runtime: binaries copied from the build, a non-root user, the
	// engram entrypoint.
	var user string
	var copied, entry bool
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.CopyCommand:
			if c.From == build.Name && slices.Contains(c.SourcePaths, "/out/") && c.DestPath == "/usr/local/bin/" {
				copied = true
			}
		case *instructions.EntrypointCommand:
			entry = slices.Equal(c.CmdLine, []string{"/usr/local/bin/engram"})
		}
	}
	if name, _, _ := strings.Cut(user, ":"); name == "" || name == "root" || name == "0" {
		t.Errorf("final USER %q, want a non-root user", user)
	}
	if !copied {
		t.Error("the runtime stage does not copy /out/ of the build stage to /usr/local/bin/")
	}
	if !entry {
		t.Error("ENTRYPOINT is not [\"/usr/local/bin/engram\"] (compose and the manifests rely on it)")
	}
	cmds, err := os.ReadDir(path("cmd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range workerRoles() {
		if !slices.ContainsFunc(cmds, func(e os.DirEntry) bool { return e.Name() == role }) {
			t.Errorf("cmd/%s does not exist: the image has no %s binary", role, role)
		}
	}
}
