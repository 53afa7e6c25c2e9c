package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/engram-memory/engram/internal/credurl"
)

// ErrDegraded marks a check result that is reported but does not make the
// process unready.
var ErrDegraded = errors.New("degraded")

// Degraded wraps err as a degraded (non-failing) check result.
func Degraded(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrDegraded, err)
}

// Check is one readiness check.
type Check struct {
	Name string
	// Run returns nil when ready, an error wrapping ErrDegraded when
	// impaired but usable, any other error when not ready.
	Run func(ctx context.Context) error
}

// Check statuses in the /readyz body.
const (
	StatusOK       = "ok"
	StatusDegraded = "degraded"
	StatusFailed   = "failed"
)

// CheckResult is one check in the /readyz body.
type CheckResult struct {
	Name   string  `json:"name"`
	Status string  `json:"status"`
	Error  string  `json:"error,omitempty"`
	Millis float64 `json:"ms"`
}

// Report is the /readyz body.
type Report struct {
	Status string        `json:"status"` // ready | unready
	Checks []CheckResult `json:"checks"`
}

// Ready reports whether no check failed.
func (r Report) Ready() bool { return r.Status == "ready" }

// Checks is a concurrency-safe list of readiness checks; components add
// theirs as they start.
type Checks struct {
	mu     sync.Mutex
	checks []Check
}

// Add appends checks.
func (c *Checks) Add(cs ...Check) {
	c.mu.Lock()
	c.checks = append(c.checks, cs...)
	c.mu.Unlock()
}

// Run runs every check concurrently, each bounded by timeout, and returns
// the report in the order the checks were added.
func (c *Checks) Run(ctx context.Context, timeout time.Duration) Report {
	c.mu.Lock()
	checks := append([]Check(nil), c.checks...)
	c.mu.Unlock()
	res := make([]CheckResult, len(checks))
	var wg sync.WaitGroup
	for i, ch := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			start := time.Now()
			err := ch.Run(cctx)
			r := CheckResult{Name: ch.Name, Status: StatusOK, Millis: float64(time.Since(start).Microseconds()) / 1000}
			switch {
			case err == nil:
			case errors.Is(err, ErrDegraded):
				r.Status, r.Error = StatusDegraded, strings.TrimPrefix(err.Error(), ErrDegraded.Error()+": ")
			default:
				r.Status, r.Error = StatusFailed, err.Error()
			}
			// /readyz needs no credentials: a URL's password (Ollama's, in
			// the model check's error) never goes out
			r.Error = credurl.Redact(r.Error)
			res[i] = r
		}()
	}
	wg.Wait()
	rep := Report{Status: "ready", Checks: res}
	for _, r := range res {
		if r.Status == StatusFailed {
			rep.Status = "unready"
		}
	}
	return rep
}

// Handler returns the HTTP handler of /healthz, /readyz and /metrics.
// gatherer may be nil (no /metrics).
func Handler(checks *Checks, gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rep := checks.Run(r.Context(), 2*time.Second)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if !rep.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	})
	if gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	}
	return mux
}

// Server is the HTTP endpoint.
type Server struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
	err  error
}

// Listen binds addr (port 0: random) and serves h in the background.
func Listen(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("health: listen %s: %w", addr, err)
	}
	s := &Server{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
	}()
	return s, nil
}

// Addr is the address the server listens on (the real port).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is http://<addr>.
func (s *Server) URL() string { return "http://" + s.Addr() }

// Done is closed when the server has stopped serving; Err says why.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err is the serving error after Done (nil after Shutdown).
func (s *Server) Err() error { <-s.done; return s.err }

// Shutdown stops accepting, lets requests finish until ctx is done, and
// waits for the serving goroutine.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	<-s.done
	if err != nil {
		return fmt.Errorf("health: shutdown: %w", err)
	}
	return nil
}
