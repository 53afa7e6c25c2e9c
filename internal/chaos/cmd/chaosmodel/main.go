// Command chaosmodel is the chaos suite's model server: the scripted
// Ollama-compatible server of pkg/llm/llmtest with the suite's replies
// (internal/chaos Install), in a process of its own so that it outlives the
// worker processes the suite kills. It prints one line on stdout,
//
//	model=http://127.0.0.1:PORT control=http://127.0.0.1:PORT
//
// and serves a control endpoint: POST /down (connection refused until
// /up), POST /up, POST /unavailable (every request answers 503 until /up),
// GET /stats (calls per API path and unmatched chat requests, JSON). It
// exits on SIGINT or SIGTERM.
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/engram-memory/engram/internal/chaos"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "chaosmodel: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	srv, err := llmtest.Start(llmtest.WithoutRecording())
	if err != nil {
		return err
	}
	defer srv.Close()
	chaos.Install(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /down", func(w http.ResponseWriter, _ *http.Request) { srv.Down() })
	mux.HandleFunc("POST /unavailable", func(w http.ResponseWriter, _ *http.Request) { srv.SetUnavailable(true) })
	mux.HandleFunc("POST /up", func(w http.ResponseWriter, _ *http.Request) {
		srv.SetUnavailable(false)
		srv.Up()
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(chaos.MustJSON(map[string]int{
			"chat": srv.Calls("/api/chat"), "embed": srv.Calls("/api/embed"), "unmatched": srv.Unmatched(),
		}))
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	fmt.Printf("model=%s control=http://%s\n", srv.URL(), ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}
