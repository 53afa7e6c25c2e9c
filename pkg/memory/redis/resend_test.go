package redis_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// slowReplyProxy relays connections to a Redis server and, once armed,
// holds back the reply to the first command holding marker (upper-cased) for delay: a
// reply that arrives after the client's read timeout, as during a
// failover, so that go-redis sends the command again.
type slowReplyProxy struct {
	ln     net.Listener
	target string
	marker []byte
	delay  time.Duration
	armed  atomic.Bool
	held   atomic.Int32
	wg     sync.WaitGroup
}

func newSlowReplyProxy(t *testing.T, target, marker string, delay time.Duration) *slowReplyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowReplyProxy{ln: ln, target: target, marker: []byte(marker), delay: delay}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.relay(c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *slowReplyProxy) relay(c net.Conn) {
	defer c.Close()
	r, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer r.Close()
	var hold atomic.Bool // the next reply on this connection is held back
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if p.armed.Load() && bytes.Contains(bytes.ToUpper(buf[:n]), p.marker) && p.held.Add(1) == 1 {
					hold.Store(true)
				}
				if _, werr := r.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				r.Close()
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if hold.CompareAndSwap(true, false) {
				time.Sleep(p.delay)
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed side
		}
	}
}

// A summary whose save is sent again by go-redis (its reply came after the
// read timeout, the first send applied) is stored once.
func TestSaveSummaryResentIsStoredOnce(t *testing.T) {
	base := testClient(t)
	proxy := newSlowReplyProxy(t, base.Options().Addr, "SHIP IT", 1500*time.Millisecond)
	opt := *base.Options()
	opt.Addr = proxy.ln.Addr().String()
	// Retries enough to outlast another test's long command on the shared
	// server: with 3, a script busy for 1.2 s beside the test failed the
	// save itself (i/o timeout) in 4 of 12 runs.
	opt.ReadTimeout, opt.MaxRetries, opt.MinRetryBackoff = 300*time.Millisecond, 20, time.Millisecond
	c := goredis.NewClient(&opt)
	t.Cleanup(func() { c.Close() })
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	s := openStore(t, c, redis.WithClock(func() time.Time { return at }))
	ctx := context.Background()
	ref := memory.SessionRef{Project: "acme", Session: "s1"}
	// The script loaded first (a first save), so that the held command is
	// the save itself.
	if err := s.SaveSummary(ctx, ref, memory.Summary{Content: "warm", UpTo: 1}); err != nil {
		t.Fatal(err)
	}
	proxy.armed.Store(true)
	if err := s.SaveSummary(ctx, ref, memory.Summary{Content: "## Active task\nship it", UpTo: 7}); err != nil {
		t.Fatalf("save: %v", err)
	}
	if proxy.held.Load() == 0 {
		t.Fatal("no reply was held back: the test does not exercise a re-send")
	}
	time.Sleep(2 * time.Second) // the held reply has gone by now (the command ran before it)
	var keys []string
	// This store's keys only: a run before this one in the process may
	// have had a save land in its namespace after its clean-up.
	iter := base.Scan(ctx, 0, s.Namespace()+":*sum", 0).Iterator()
	for iter.Next(ctx) {
		if base.Type(ctx, iter.Val()).Val() == "list" {
			keys = append(keys, iter.Val())
		}
	}
	var found []string
	for _, k := range keys {
		vals, err := base.LRange(ctx, k, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if strings.Contains(v, "ship it") {
				found = append(found, k)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("the summary is stored %d times (keys %v)", len(found), keys)
	}
}
