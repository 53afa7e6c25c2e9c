// Package runner runs a worker's handler on a durable JetStream pull
// consumer and owns every delivery decision, so that handlers are plain
// functions:
//
//	func(ctx context.Context, ev events.Envelope) error
//
// Usage:
//
//	r, err := runner.New(js, runner.ConfigFor(topo, events.ConsumerExtractor), handle,
//		runner.WithLogger(log), runner.WithGates(modelGate, storeGate),
//		runner.WithProcessed(store), runner.WithObserver(metrics))
//	err = r.Start(ctx)   // the consumer must exist (events.EnsureTopology)
//	...
//	err = r.Stop(ctx)    // stop pulling, drain in-flight handlers until ctx's deadline
//
// # What the runner does with a delivery
//
//   - The body does not decode (events.Decode): dead-lettered at once.
//   - WithProcessed and the (consumer, event id) record exists: acked, the
//     handler is not called (ResultDuplicate). After a successful handler
//     the record is written (ttl Config.ProcessedTTL), then the message acked.
//   - nil: Ack.
//   - Permanent(err), or an error wrapping events.ErrInvalidEvent: the
//     message is copied to ENGRAM_DLQ (subject <prefix>.dlq.<consumer>, the
//     Engram-Dlq-* headers: reason, consumer, original subject, stream,
//     stream sequence, deliveries, original Nats-Msg-Id) and terminated
//     (TermWithReason). If the DLQ cannot be written the message is nak'ed
//     instead: nothing is lost.
//   - Any other error (transient): NakWithDelay with Config.Backoff(delivery)
//     = BackoffBase * 2^(delivery-1), at most BackoffMax.
//     RetryAfter(err, d) asks for delay d instead (a token budget reset).
//     Unavailable(err) (or an error with `Unavailable() bool` true) naks with
//     UnavailableDelay and pauses pulling (below).
//   - A panic is recovered, logged with its stack and is transient.
//   - A transient failure on the last allowed delivery (delivery count ==
//     the consumer's MaxDeliver) is dead-lettered rather than nak'ed, so
//     nothing exhausts silently. Messages the server gives up on anyway (a
//     process died holding it on its last delivery) are captured from the
//     max-deliveries advisory,
//     $JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>,
//     fetched by stream sequence and dead-lettered;
//     the DLQ's Nats-Msg-Id (dlq.MsgID) dedupes against what the runner or
//     another replica already dead-lettered.
//   - Shutdown past its deadline cancels the handler's ctx; a handler that
//     returns context.Canceled then is nak'ed without delay
//     (ResultInterrupted) for another replica to take.
//
// While a handler runs, the runner sends InProgress every ack wait / 3 so a
// slow handler (a model call) does not get its message redelivered. A call
// is bounded by Config.HandlerTimeout (default 15m): past it the handler's
// ctx is cancelled, the heartbeat stops and the failure is transient, so a
// stuck handler cannot hold its message forever.
//
// # Health gating
//
// Gates (WithGates: the model, the store) are checked before pulling, at
// most every GateInterval while healthy. While any gate fails the runner
// pulls nothing (events wait in the stream, no delivery is spent), checks
// again every GateInterval and resumes by itself. A handler's Unavailable
// error pauses pulling for at least GateInterval and until the gates pass.
//
// # Concurrency and shutdown
//
// Config.Concurrency handlers run at once, on as many long-lived worker
// goroutines (a worker keeps the stack a handler grew; a goroutine per
// message would grow one each time); the runner pulls only as many
// messages as it has free slots, so nothing sits in a client buffer while
// its ack wait runs. Stop stops pulling and waits for the handlers in flight
// until ctx is done, then cancels them and waits for them to return. Every
// goroutine (pull loop, workers, heartbeats, advisory watcher) has ended
// when Stop returns.
//
// # Observability
//
// The runner logs only through the injected *zap.Logger (pauses, panics,
// dead letters, failures to ack or to write the DLQ) and reports every
// delivery's Outcome (result, latency, nak delay), pauses and advisory
// captures to an Observer, which the serve engineer adapts to Prometheus.
package runner
