package health

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Lag keeps gauges of the JetStream lag of every consumer of some streams,
// refreshed by Run (or Refresh):
//
//	engram_consumer_pending{stream,consumer}       messages not yet delivered
//	engram_consumer_ack_pending{stream,consumer}   delivered, not yet acked
//	engram_consumer_redelivered{stream,consumer}   delivered more than once, not yet acked
//	engram_stream_messages{stream}                 messages stored
//	engram_stream_bytes{stream}                    bytes stored
//	engram_stream_fill_ratio{stream}               bytes stored / the stream's max bytes (0 when unlimited)
//	engram_consumer_waiting{stream,consumer}       pull requests waiting (0 with pending events: no worker)
//
// KEDA's NATS JetStream scaler reads the same numbers from the server's
// monitoring endpoint; these are for dashboards and alerts.
type Lag struct {
	js      jetstream.JetStream
	streams []string

	pending     *prometheus.GaugeVec
	ackPending  *prometheus.GaugeVec
	redelivered *prometheus.GaugeVec
	messages    *prometheus.GaugeVec
	bytes       *prometheus.GaugeVec
	fill        *prometheus.GaugeVec
	waiting     *prometheus.GaugeVec
	lastRefresh prometheus.Gauge

	mu   sync.Mutex
	seen map[[2]string]bool
}

// NewLag creates the lag gauges for streams and registers them with reg.
func NewLag(reg prometheus.Registerer, js jetstream.JetStream, streams ...string) (*Lag, error) {
	l := &Lag{
		js: js, streams: streams, seen: map[[2]string]bool{},
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "engram_consumer_pending",
			Help: "Messages of a consumer's filter not yet delivered."}, []string{"stream", "consumer"}),
		ackPending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "engram_consumer_ack_pending",
			Help: "Messages delivered to a consumer and not yet acknowledged."}, []string{"stream", "consumer"}),
		redelivered: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "engram_consumer_redelivered",
			Help: "Messages delivered more than once and not yet acknowledged."}, []string{"stream", "consumer"}),
		messages: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "engram_stream_messages",
			Help: "Messages stored in a stream."}, []string{"stream"}),
		bytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "engram_stream_bytes",
			Help: "Bytes stored in a stream."}, []string{"stream"}),
		fill: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "engram_stream_fill_ratio",
			Help: "Bytes stored over the stream's max bytes (0 when unlimited); a full ENGRAM_IN or ENGRAM_DLQ refuses publishes: alert over 0.8."}, []string{"stream"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "engram_consumer_waiting",
			Help: "Pull requests waiting on a consumer: a running worker has one; 0 with pending events means no worker pulls."}, []string{"stream", "consumer"}),
		lastRefresh: prometheus.NewGauge(prometheus.GaugeOpts{Name: "engram_lag_refreshed_timestamp_seconds",
			Help: "When the lag gauges were last refreshed (Unix time)."}),
	}
	for _, c := range []prometheus.Collector{l.pending, l.ackPending, l.redelivered, l.messages, l.bytes, l.fill, l.waiting, l.lastRefresh} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Refresh reads stream and consumer info once and updates the gauges. What
// no longer exists loses its series: a consumer the server no longer lists
// on its stream, and a stream the server says is gone (with its
// consumers'). A stream that cannot be read for another reason (the server
// unreachable) keeps its last values, and the error is returned.
func (l *Lag) Refresh(ctx context.Context) error {
	var errs []error
	type result struct {
		gone, failed bool
		consumers    map[string]bool
	}
	res := map[string]*result{}
	for _, name := range l.streams {
		r := &result{consumers: map[string]bool{}}
		res[name] = r
		s, err := l.js.Stream(ctx, name)
		var si *jetstream.StreamInfo
		if err == nil {
			si, err = s.Info(ctx)
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			r.gone = true
			errs = append(errs, fmt.Errorf("health: lag: stream %s: %w", name, err))
			continue
		}
		if err != nil {
			r.failed = true
			errs = append(errs, fmt.Errorf("health: lag: stream %s: %w", name, err))
			continue
		}
		l.messages.WithLabelValues(name).Set(float64(si.State.Msgs))
		l.bytes.WithLabelValues(name).Set(float64(si.State.Bytes))
		fill := 0.0
		if si.Config.MaxBytes > 0 {
			fill = float64(si.State.Bytes) / float64(si.Config.MaxBytes)
		}
		l.fill.WithLabelValues(name).Set(fill)
		lister := s.ListConsumers(ctx)
		for ci := range lister.Info() {
			r.consumers[ci.Name] = true
			l.pending.WithLabelValues(name, ci.Name).Set(float64(ci.NumPending))
			l.ackPending.WithLabelValues(name, ci.Name).Set(float64(ci.NumAckPending))
			l.redelivered.WithLabelValues(name, ci.Name).Set(float64(ci.NumRedelivered))
			l.waiting.WithLabelValues(name, ci.Name).Set(float64(ci.NumWaiting))
		}
		if err := lister.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
			r.failed = true // the list may be partial: keep what is not in it
			errs = append(errs, fmt.Errorf("health: lag: consumers of %s: %w", name, err))
		}
	}
	l.mu.Lock()
	for k := range l.seen {
		r := res[k[0]]
		if r == nil || r.failed || r.consumers[k[1]] {
			continue
		}
		l.pending.DeleteLabelValues(k[0], k[1])
		l.ackPending.DeleteLabelValues(k[0], k[1])
		l.redelivered.DeleteLabelValues(k[0], k[1])
		l.waiting.DeleteLabelValues(k[0], k[1])
		delete(l.seen, k)
	}
	for name, r := range res {
		if r.gone {
			l.messages.DeleteLabelValues(name)
			l.bytes.DeleteLabelValues(name)
			l.fill.DeleteLabelValues(name)
		}
		for c := range r.consumers {
			l.seen[[2]string{name, c}] = true
		}
	}
	l.mu.Unlock()
	if len(errs) == 0 {
		l.lastRefresh.SetToCurrentTime()
	}
	return errors.Join(errs...)
}

// Run refreshes every interval until ctx is done; errors go to onErr (may
// be nil). It returns when ctx is done.
func (l *Lag) Run(ctx context.Context, interval time.Duration, onErr func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := l.Refresh(ctx); err != nil && onErr != nil && ctx.Err() == nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
