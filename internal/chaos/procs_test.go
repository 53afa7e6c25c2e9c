package chaos_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is one child process the suite starts, kills and restarts. Its
// output goes to <dir>/logs/<name>.<start>.log, one file per start, so the
// logs of a killed process stay readable.
type proc struct {
	name string
	argv []string
	env  []string
	dir  string // log dir

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	starts int
	kills  int
	logs   []string
}

func (p *proc) start(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			t.Fatalf("%s: start while running", p.name)
		}
	}
	path := filepath.Join(p.dir, fmt.Sprintf("%s.%d.log", p.name, p.starts))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a kill reaches a wrapper's child too (bash exec
	// leaves none, but a future wrapper might).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("%s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	p.starts++
	p.logs = append(p.logs, path)
}

// kill sends SIGKILL to the process (group) and waits for it to exit.
func (p *proc) kill() bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return false
	}
	select {
	case <-done:
		return false // already gone
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	p.mu.Lock()
	p.kills++
	p.mu.Unlock()
	return true
}

// stop sends SIGTERM and waits at most d, then kills.
func (p *proc) stop(d time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(d):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// exited reports whether the process has exited (not by the suite's kill).
func (p *proc) exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// running reports whether the process was started and has not exited.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// grep calls fn for every line of every log of the process.
func (p *proc) grep(fn func(line string)) error {
	p.mu.Lock()
	logs := append([]string(nil), p.logs...)
	p.mu.Unlock()
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			fn(sc.Text())
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return err
		}
	}
	return nil
}

// tail returns the last n lines of the newest log.
func (p *proc) tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.logs) == 0 {
		return ""
	}
	b, _ := os.ReadFile(p.logs[len(p.logs)-1])
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freePort returns a TCP port free on 127.0.0.1 at the time of the call.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitTCP waits until addr accepts connections.
func waitTCP(ctx context.Context, addr string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not accepting connections after %v: %w", addr, d, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
