package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// AdvisorySubject is the server's max-deliveries advisory subject of a
// consumer. The advisory is a core NATS message: nobody stores it, so a
// message that exhausts its deliveries is lost unless a watcher captures it.
func AdvisorySubject(stream, consumer string) string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + stream + "." + consumer
}

// ReasonMaxDeliveries is the reason of a letter captured from the advisory.
const ReasonMaxDeliveries = "max deliveries exceeded (server advisory)"

// advisory is io.nats.jetstream.advisory.v1.max_deliver.
type advisory struct {
	Type       string `json:"type"`
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// Watcher captures the messages a consumer gave up on (max deliveries
// advisories) into the DLQ: it fetches each message by stream sequence and
// puts it with Writer.Put, whose Nats-Msg-Id makes a message that the runner
// already dead-lettered (or another replica captured) a duplicate.
type Watcher struct {
	sub     *nats.Subscription
	ch      chan *nats.Msg
	done    chan struct{}
	stop    context.CancelFunc
	stopped sync.Once
}

// Watch starts capturing the advisories of (stream, consumer) on nc. Errors
// (message already gone, DLQ unavailable) are reported to onErr, which may be
// nil. Captured reports each letter put. Stop ends it.
func Watch(nc *nats.Conn, js jetstream.JetStream, w *Writer, stream, consumer string,
	captured func(Letter), onErr func(error)) (*Watcher, error) {
	ch := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(AdvisorySubject(stream, consumer), ch)
	if err != nil {
		return nil, fmt.Errorf("dlq: watch %s/%s: %w", stream, consumer, err)
	}
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("dlq: watch %s/%s: flush: %w", stream, consumer, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wt := &Watcher{sub: sub, ch: ch, done: make(chan struct{}), stop: cancel}
	if onErr == nil {
		onErr = func(error) {}
	}
	if captured == nil {
		captured = func(Letter) {}
	}
	go func() {
		defer close(wt.done)
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-ch:
				l, err := capture(ctx, js, w, m.Data)
				if err != nil {
					onErr(err)
					continue
				}
				captured(l)
			}
		}
	}()
	return wt, nil
}

func capture(ctx context.Context, js jetstream.JetStream, w *Writer, data []byte) (Letter, error) {
	var a advisory
	if err := json.Unmarshal(data, &a); err != nil {
		return Letter{}, fmt.Errorf("dlq: bad max-deliveries advisory: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, a.Stream)
	if err != nil {
		return Letter{}, fmt.Errorf("dlq: capture %s seq %d: %w", a.Stream, a.StreamSeq, err)
	}
	m, err := st.GetMsg(ctx, a.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Letter{}, fmt.Errorf("dlq: capture %s seq %d: message already gone from the stream: %w", a.Stream, a.StreamSeq, err)
	}
	if err != nil {
		return Letter{}, fmt.Errorf("dlq: capture %s seq %d: %w", a.Stream, a.StreamSeq, err)
	}
	l := Letter{
		Consumer:   a.Consumer,
		Reason:     ReasonMaxDeliveries,
		Subject:    m.Subject,
		Stream:     a.Stream,
		Sequence:   a.StreamSeq,
		Deliveries: a.Deliveries,
		MsgID:      m.Header.Get(jetstream.MsgIDHeader),
		Header:     m.Header,
		Data:       m.Data,
	}
	if err := w.Put(ctx, l); err != nil {
		return Letter{}, err
	}
	return l, nil
}

// Stop unsubscribes and waits for the capture in progress, if any.
func (wt *Watcher) Stop() {
	wt.stopped.Do(func() {
		_ = wt.sub.Unsubscribe()
		wt.stop()
		<-wt.done
	})
}
