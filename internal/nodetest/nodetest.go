// Package nodetest runs the TypeScript client (clients/typescript) from Go
// tests: it installs the package's npm dependencies, pinned by its
// package-lock.json, into a cache outside the repository (npm ci, once per
// lock file), builds a working copy of the package there and runs node in
// it. The tests that use it (go test ./clients/typescript, the Node-beside-Go
// benchmark of cmd/engram) run under `make test` like any other.
//
// A test that needs node is skipped, with the reason, when node or npm is
// missing, except under CI (CI set), where that fails it: CI must not pass
// without having run them.
package nodetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Root is the repository's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// PackageDir is the TypeScript client's directory.
func PackageDir() string { return filepath.Join(Root(), "clients", "typescript") }

// Require skips t when node or npm is missing (fails it under CI).
func Require(t testing.TB) {
	t.Helper()
	RequireFor(t, "the TypeScript client's tests")
}

// RequireFor skips t when node or npm is missing (fails it under CI: the
// suite must not pass there without running them); who names the tests
// in the message.
func RequireFor(t testing.TB, who string) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := "nodetest: " + tool + " is not installed: " + who + " need Node 20+ and npm"
			if os.Getenv("CI") != "" {
				t.Fatal(msg + " (required under CI)")
			}
			t.Skip(msg)
		}
	}
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// Package returns a directory holding a built copy of the TypeScript client
// (package.json, src, test, README.md, dist, node_modules, and
// examples/typescript as examples), made once
// per test binary. It installs the dependencies on first use.
func Package(t testing.TB) string {
	t.Helper()
	Require(t)
	buildOnce.Do(func() { built, buildErr = build() })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

func build() (string, error) {
	mods, err := modules()
	if err != nil {
		return "", err
	}
	work, err := os.MkdirTemp("", "engram-ts-client")
	if err != nil {
		return "", err
	}
	src := PackageDir()
	for _, name := range []string{"package.json", "package-lock.json", "tsconfig.json", "README.md", "src", "test"} {
		if err := copyTree(filepath.Join(src, name), filepath.Join(work, name)); err != nil {
			return "", fmt.Errorf("nodetest: copy %s: %w", name, err)
		}
	}
	// The examples import the package by its name, which a file inside
	// the package resolves to itself (its package.json's exports).
	if err := copyTree(filepath.Join(Root(), "examples", "typescript"), filepath.Join(work, "examples")); err != nil {
		return "", fmt.Errorf("nodetest: copy the examples: %w", err)
	}
	if err := os.Symlink(mods, filepath.Join(work, "node_modules")); err != nil {
		return "", err
	}
	out, err := Node(work, nil, 5*time.Minute, filepath.Join("node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json")
	if err != nil {
		return "", fmt.Errorf("nodetest: tsc: %w\n%s", err, out)
	}
	return work, nil
}

// modules installs the package's dependencies (npm ci, scripts off) into
// the cache, keyed by package.json and package-lock.json, and returns the
// node_modules directory. Concurrent test binaries wait for each other.
func modules() (string, error) {
	src := PackageDir()
	var sum []byte
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", fmt.Errorf("nodetest: %w", err)
		}
		sum = append(sum, b...)
	}
	h := sha256.Sum256(sum)
	cache := os.Getenv("ENGRAM_CACHE")
	if cache == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("nodetest: cache dir: %w", err)
		}
		cache = filepath.Join(d, "engram")
	}
	root := filepath.Join(cache, "ts-client")
	dir := filepath.Join(root, hex.EncodeToString(h[:8]))
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if _, err := os.Stat(filepath.Join(dir, ".installed")); err == nil {
		return filepath.Join(dir, "node_modules"), nil
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		if err := copyTree(filepath.Join(src, f), filepath.Join(tmp, f)); err != nil {
			return "", err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = tmp
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("nodetest: npm ci in %s: %w\n%s", tmp, err, out.String())
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, ".installed"), nil, 0o644); err != nil {
		return "", err
	}
	return filepath.Join(dir, "node_modules"), nil
}

// Node runs node with args in dir (environment: this process's plus env)
// and returns its combined output.
func Node(dir string, env []string, timeout time.Duration, args ...string) (string, error) {
	return Run(dir, env, timeout, "node", args...)
}

// Run runs a command in dir and returns its combined output.
func Run(dir string, env []string, timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s %s: no end within %v: %w", name, strings.Join(args, " "), timeout, ctx.Err())
	}
	return out.String(), err
}

var (
	engramOnce sync.Once
	engramBin  string
	engramErr  error
)

// Engram builds the engram binary once per test binary and returns its
// path.
func Engram(t testing.TB) string {
	t.Helper()
	engramOnce.Do(func() {
		dir, err := os.MkdirTemp("", "engram-bin")
		if err != nil {
			engramErr = err
			return
		}
		engramBin = filepath.Join(dir, "engram")
		out, err := Run(Root(), nil, 10*time.Minute, "go", "build", "-o", engramBin, "./cmd/engram")
		if err != nil {
			engramErr = fmt.Errorf("go build ./cmd/engram: %w\n%s", err, out)
		}
	})
	if engramErr != nil {
		t.Fatal(engramErr)
	}
	return engramBin
}

// copyTree copies a file or a directory tree.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}

// Cleanup removes what Package and Engram made; call it from TestMain.
func Cleanup() {
	if built != "" {
		_ = os.RemoveAll(built)
	}
	if engramBin != "" {
		_ = os.RemoveAll(filepath.Dir(engramBin))
	}
}
