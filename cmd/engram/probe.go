package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/engram-memory/engram/internal/config"
)

func init() {
	register("probe", "exit 0 when a process's health endpoint answers: engram probe [-ready] (container health checks)", probe)
}

// probe is the health check of a container that has no shell or curl
// (the distroless image): it asks the process's own /healthz (running) or,
// with -ready, /readyz (ready or degraded; 503 fails) on ENGRAM_HTTP_ADDR,
// and fails with the answer's body so that `docker inspect` shows why.
func probe(ctx context.Context, stdout io.Writer, args []string) error {
	var ready bool
	var timeout time.Duration
	cfg, _, err := loadConfig("probe", args, config.Conn, func(fs *flag.FlagSet) {
		fs.BoolVar(&ready, "ready", false, "check /readyz (ready, or degraded) instead of /healthz (the process runs)")
		fs.DurationVar(&timeout, "timeout", 3*time.Second, "how long the answer may take")
	})
	if err != nil {
		return err
	}
	if strings.TrimSpace(cfg.HTTP.Addr) == "" {
		return fmt.Errorf("%w: the health endpoint is off (ENGRAM_HTTP_ADDR is empty)", errUsage)
	}
	url := cfg.HTTPURL() + "/healthz"
	if ready {
		url = cfg.HTTPURL() + "/readyz"
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe %s: HTTP %d: %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if len(body) == 0 {
		return errors.New("probe " + url + ": empty answer")
	}
	out(stdout, "%s: %s\n", url, strings.TrimSpace(string(body)))
	return nil
}
