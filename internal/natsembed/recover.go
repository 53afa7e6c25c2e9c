package natsembed

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StoreFailure reports why the JetStream store does not take writes, nil
// when it does: JetStream disabled (the server disables it after some
// store errors), or a stream whose file store hit a write error. A write
// error is sticky in nats-server's file store: after a "no space left on
// device" the stream refuses every publish (the publisher gets no answer)
// until the stream is loaded again, even once space has returned.
func (s *Server) StoreFailure() error {
	if !s.ns.Running() {
		return errors.New("natsembed: server not running")
	}
	if !s.ns.JetStreamEnabled() {
		return errors.New("natsembed: JetStream disabled")
	}
	hz := s.ns.Healthz(&server.HealthzOptions{Details: true})
	if hz == nil || len(hz.Errors) == 0 {
		return nil
	}
	var msgs []string
	for _, e := range hz.Errors {
		msgs = append(msgs, e.Error)
	}
	return fmt.Errorf("natsembed: JetStream store failing: %s", strings.Join(msgs, "; "))
}

// RestartJetStream shuts JetStream down and enables it again on the same
// store and limits: every stream and consumer is recovered from its files
// (as at a process start), which clears the file stores' sticky write
// errors. Clients stay connected; requests in flight during the restart
// fail and are retried by their callers, messages delivered and not yet
// acknowledged are redelivered.
func (s *Server) RestartJetStream() error {
	cfg := s.ns.JetStreamConfig()
	if cfg == nil {
		return errors.New("natsembed: JetStream not configured")
	}
	c := *cfg
	// The server keeps the store dir with its "jetstream" folder, and adds
	// that folder to the dir it is given.
	if filepath.Base(c.StoreDir) == server.JetStreamStoreDir {
		c.StoreDir = filepath.Dir(c.StoreDir)
	}
	if s.ns.JetStreamEnabled() {
		if err := s.ns.ShutdownJetStream(); err != nil {
			return fmt.Errorf("natsembed: shut JetStream down: %w", err)
		}
	}
	if err := s.ns.EnableJetStream(&c); err != nil {
		return fmt.Errorf("natsembed: enable JetStream: %w", err)
	}
	return nil
}

// StoreDir is the JetStream store folder.
func (s *Server) StoreDir() string { return s.storeDir }

// GuardOptions configure Guard.
type GuardOptions struct {
	// Interval is how often the store is checked; default 2s.
	Interval time.Duration
	// MinFree is the free space the store's volume must have before
	// JetStream is restarted; default 64 MiB. A restart with less would
	// fail again at the next write.
	MinFree int64
	// RetryAfter is the least time between two restarts; default 10s.
	RetryAfter time.Duration
	// OnFailure is called when the store starts failing, OnRecovered when
	// a restart brought it back, OnRestartFailed when a restart did not
	// (each may be nil; calls come from the guard's goroutine).
	OnFailure       func(err error)
	OnRecovered     func(after time.Duration)
	OnRestartFailed func(err error)
}

// GuardStatus is what the guard knows of the store.
type GuardStatus struct {
	// Failing is the store's failure, nil while it takes writes.
	Failing error
	Since   time.Time
	// Free is the free space of the store's volume when last measured
	// (-1: unknown), MinFree what a restart waits for.
	Free, MinFree int64
	// Restarts counts the JetStream restarts, Recovered those after which
	// the store took writes again.
	Restarts, Recovered int
}

// Problem describes a failing store for a readiness check ("" when it
// takes writes).
func (g GuardStatus) Problem() string {
	if g.Failing == nil {
		return ""
	}
	free := "unknown"
	if g.Free >= 0 {
		free = HumanBytes(g.Free)
	}
	next := "restarting JetStream once " + HumanBytes(g.MinFree) + " are free"
	if g.Free >= g.MinFree {
		next = "restarting JetStream"
	}
	return fmt.Sprintf("%v (since %s; %s free on the store's volume; %s; events published meanwhile are refused, not lost)",
		g.Failing, g.Since.UTC().Format(time.RFC3339), free, next)
}

// Guard watches the JetStream store and restarts JetStream once the store
// has failed (a sticky write error after a full disk, or JetStream
// disabled) and the volume has MinFree bytes free again, so that the
// streams take events again without a process restart. Stop ends it.
type Guard struct {
	s    *Server
	o    GuardOptions
	stop context.CancelFunc
	done chan struct{}

	mu sync.Mutex
	st GuardStatus
	// last restart
	lastTry time.Time
	// suspect is a failure one check saw and the next has not confirmed.
	suspect error
	// probe is StoreFailure (tests give their own).
	probe func() error
}

// Guard starts a guard of the server's store.
func (s *Server) Guard(o GuardOptions) *Guard {
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
	}
	if o.MinFree <= 0 {
		o.MinFree = 64 << 20
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = 10 * time.Second
	}
	return s.guard(o, s.StoreFailure)
}

func (s *Server) guard(o GuardOptions, probe func() error) *Guard {
	ctx, cancel := context.WithCancel(context.Background())
	g := &Guard{s: s, o: o, stop: cancel, done: make(chan struct{}), st: GuardStatus{Free: -1, MinFree: o.MinFree}, probe: probe}
	go g.run(ctx)
	return g
}

// Stop ends the guard and waits for it.
func (g *Guard) Stop() {
	g.stop()
	<-g.done
}

// Status returns the guard's view of the store.
func (g *Guard) Status() GuardStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.st
}

func (g *Guard) run(ctx context.Context) {
	defer close(g.done)
	t := time.NewTicker(g.o.Interval)
	defer t.Stop()
	for {
		g.check()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check is one round: look at the store, restart JetStream when it fails
// and there is room. A failure counts once the next round, an interval
// later, sees the store failing still: nats-server's health check calls a
// stream being created "could not be recovered" for a moment, and a
// process that creates its streams while the guard's first round runs
// (every start) would have JetStream restarted under the creation, which
// then fails ("stream not found").
func (g *Guard) check() {
	if !g.s.ns.Running() {
		return // shutting down
	}
	err := g.probe()
	free := FreeBytes(g.s.storeDir)
	g.mu.Lock()
	was := g.st.Failing
	g.st.Free = free
	if err != nil && was == nil && g.suspect == nil {
		g.suspect = err // to be confirmed
		g.mu.Unlock()
		return
	}
	g.suspect = nil
	if err == nil {
		recovered := was != nil
		since := g.st.Since
		g.st.Failing, g.st.Since = nil, time.Time{}
		g.mu.Unlock()
		if recovered && g.o.OnRecovered != nil {
			g.o.OnRecovered(time.Since(since))
		}
		return
	}
	if was == nil {
		g.st.Since = time.Now()
	}
	g.st.Failing = err
	try := (free < 0 || free >= g.o.MinFree) && time.Since(g.lastTry) >= g.o.RetryAfter
	if try {
		g.lastTry = time.Now()
		g.st.Restarts++
	}
	since := g.st.Since
	g.mu.Unlock()
	if was == nil && g.o.OnFailure != nil {
		g.o.OnFailure(err)
	}
	if !try {
		return
	}
	if rerr := g.s.RestartJetStream(); rerr != nil {
		if g.o.OnRestartFailed != nil {
			g.o.OnRestartFailed(rerr)
		}
		return
	}
	if err := g.probe(); err != nil {
		if g.o.OnRestartFailed != nil {
			g.o.OnRestartFailed(err)
		}
		return
	}
	g.mu.Lock()
	g.st.Failing, g.st.Since = nil, time.Time{}
	g.st.Recovered++
	g.mu.Unlock()
	if g.o.OnRecovered != nil {
		g.o.OnRecovered(time.Since(since))
	}
}

// HumanBytes renders n in KiB, MiB or GiB ("unknown" when negative).
func HumanBytes(n int64) string {
	if n < 0 {
		return "unknown"
	}
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
