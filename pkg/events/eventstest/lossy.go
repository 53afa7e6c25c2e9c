package eventstest

import (
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Loss is what a lossy relay (LossyJetStream) does with one API request.
type Loss int

const (
	Pass        Loss = iota // relayed; the server answers the requester
	LoseRequest             // never reaches the server
	LoseReply               // reaches the server, which answers nobody
)

// lossyPrefix is the API prefix of LossyJetStream's handles.
const lossyPrefix = "LOSSY.API"

// LossyJetStream returns a JetStream handle whose API requests (and, under
// its prefix, key-value writes) go through a relay on nc that asks decide
// what to do with each: a stand-in for a cluster losing a node under
// requests. decide gets the request's subject without the prefix
// ("STREAM.INFO.ENGRAM_IN", "DIRECT.GET...", "$KV.<bucket>.<key>").
func LossyJetStream(t testing.TB, nc *nats.Conn, decide func(subject string) Loss) jetstream.JetStream {
	t.Helper()
	sub, err := nc.Subscribe(lossyPrefix+".>", func(m *nats.Msg) {
		rest := strings.TrimPrefix(m.Subject, lossyPrefix+".")
		reply := m.Reply
		switch decide(rest) {
		case LoseRequest:
			return
		case LoseReply:
			reply = "LOST.reply"
		}
		to := "$JS.API." + rest
		if strings.HasPrefix(rest, "$KV.") {
			to = rest // a bucket's write, prefixed by the API prefix too
		}
		_ = nc.PublishMsg(&nats.Msg{Subject: to, Reply: reply, Data: m.Data, Header: m.Header})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.NewWithAPIPrefix(nc, lossyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// FirstOfEachKind is a LossyJetStream policy that loses the first request
// of each kind of API call (its subject's first two tokens: "STREAM.INFO",
// "CONSUMER.CREATE", "DIRECT.GET", ...) with how (LoseRequest or
// LoseReply, by kind; LoseRequest when how is nil) and passes the rest;
// lost counts them.
type FirstOfEachKind struct {
	How  func(kind string) Loss
	mu   sync.Mutex
	seen map[string]int
	lost int
}

// Decide implements the policy.
func (f *FirstOfEachKind) Decide(subject string) Loss {
	kind := strings.Join(strings.SplitN(subject, ".", 3)[:min(2, strings.Count(subject, ".")+1)], ".")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]int{}
	}
	if f.seen[kind]++; f.seen[kind] > 1 {
		return Pass
	}
	f.lost++
	if f.How != nil {
		return f.How(kind)
	}
	return LoseRequest
}

// Lost is how many requests were lost, and the count of each kind seen.
func (f *FirstOfEachKind) Lost() (int, map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := make(map[string]int, len(f.seen))
	for k, v := range f.seen {
		seen[k] = v
	}
	return f.lost, seen
}
