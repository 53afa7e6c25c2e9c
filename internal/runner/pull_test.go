package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/events/eventstest"
)

// A pull request's answers are read until the server ends the request: a
// message the server delivers just before the request expires reaches the
// handler on its first delivery, however late the client reads it. The
// client used to give up on its own deadline, a tenth of FetchWait after
// the server's expiry, and drop such a message with its subscription: it
// stayed pending on the server until the ack wait ran out and came back on
// a later delivery (29 of 100 events lost deliveries, up to five each, with
// GOMAXPROCS=1 and two busy goroutines at FetchWait 100 ms; the TypeScript
// client's test waited 60 s for a compaction, the compactor's ack wait).
// Here a proxy holds what the server sends the runner's connection while a
// message is delivered to a pull request, until that request is past the
// client's old deadline (and short of the library's own guard, a second
// after the server's expiry): the message must come on delivery 1.
func TestPullWaitsForTheServersExpiry(t *testing.T) {
	srv, nc := eventstest.RunServer(t)
	topo := eventstest.Topology()
	for i := range topo.Consumers {
		if topo.Consumers[i].Name == events.ConsumerExtractor {
			topo.Consumers[i].AckWait = 3 * time.Second // a lost delivery comes back soon
		}
	}
	eventstest.Setup(t, nc, topo)
	client, err := events.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	p := newHoldProxy(t, srv.Addr().String())
	pnc, err := nats.Connect("nats://" + p.addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pnc.Close)
	pjs, err := jetstream.New(pnc)
	if err != nil {
		t.Fatal(err)
	}
	pulls, err := nc.SubscribeSync("$JS.API.CONSUMER.MSG.NEXT." + events.StreamIn + "." + events.ConsumerExtractor)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	cfg := runner.ConfigFor(topo, events.ConsumerExtractor)
	cfg.FetchWait = time.Second
	obs := newRecorder()
	handled := make(chan string, 16)
	r, err := runner.New(pjs, cfg, func(_ context.Context, ev events.Envelope) error {
		handled <- ev.ID
		return nil
	}, runner.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.release()
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})

	for round := range 3 {
		p.hold()
		// The next pull request, sent while the server's answers are held
		// (the runner's requests reach the server; older ones expired).
		for {
			if _, err := pulls.NextMsg(0); err != nil {
				break
			}
		}
		req, err := pulls.NextMsg(waitLong)
		if err != nil {
			t.Fatalf("round %d: no pull request: %v", round, err)
		}
		seen := time.Now()
		var body struct {
			Batch   int           `json:"batch"`
			Expires time.Duration `json:"expires"`
		}
		if err := json.Unmarshal(req.Data, &body); err != nil {
			t.Fatal(err)
		}
		// The server ends the request: it expires within FetchWait.
		if body.Expires <= 0 || body.Expires > cfg.FetchWait {
			t.Fatalf("round %d: pull request %s: want an expiry within the fetch wait %v", round, req.Data, cfg.FetchWait)
		}
		e, err := client.PublishTurnEnded(context.Background(),
			events.Ref{ProjectID: "proj", SessionID: "sess", TurnID: "t" + string(rune('0'+round))},
			events.TurnEnded{Messages: []events.Message{{Role: events.RoleUser, Content: "hello"}}})
		if err != nil {
			t.Fatal(err)
		}
		// Past the client's old deadline (FetchWait after the request),
		// short of the library's guard (the expiry plus a second).
		time.Sleep(time.Until(seen.Add(cfg.FetchWait + 400*time.Millisecond)))
		p.release()
		select {
		case id := <-handled:
			if id != e.ID {
				t.Fatalf("round %d: handled %s, want %s", round, id, e.ID)
			}
		case <-time.After(waitLong):
			t.Fatalf("round %d: the event never reached the handler", round)
		}
		eventually(t, "the outcome", func() bool { return len(obs.all()) == round+1 })
		if o := obs.all()[round]; o.Result != runner.ResultAcked || o.Delivery != 1 {
			t.Fatalf("round %d: %+v: the first delivery was dropped with the pull request (want acked on delivery 1)", round, o)
		}
	}
}

// holdProxy forwards TCP connections to a server; hold stops what the
// server sends from reaching the client (in order, nothing dropped) until
// release.
type holdProxy struct {
	ln   net.Listener
	to   string
	mu   sync.Mutex
	cond *sync.Cond
	held bool
	wg   sync.WaitGroup
}

func newHoldProxy(t *testing.T, to string) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{ln: ln, to: to}
	p.cond = sync.NewCond(&p.mu)
	var conns []net.Conn
	var connMu sync.Mutex
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			connMu.Lock()
			conns = append(conns, c, s)
			connMu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(s, c); s.Close() })
			p.wg.Go(func() { p.down(c, s); c.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.release()
		connMu.Lock()
		for _, c := range conns {
			c.Close()
		}
		connMu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *holdProxy) addr() string { return p.ln.Addr().String() }

// down copies from the server to the client, waiting while held.
func (p *holdProxy) down(client, server net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.held {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				return
			}
			return
		}
	}
}

func (p *holdProxy) hold() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

func (p *holdProxy) release() {
	p.mu.Lock()
	p.held = false
	p.cond.Broadcast()
	p.mu.Unlock()
}
