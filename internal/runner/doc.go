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
//   - The body does not decode (events.Decode: malformed, invalid, or not
//     valid UTF-8), or the subject's type, project or session is not the
//     body's (events.Subjects.Check): dead-lettered at once, the reason
//     naming the field.
//   - WithProcessed and the event id was handled by this consumer with the
//     same content: acked, the handler is not called (ResultDuplicate). The
//     records carry the SHA-256 of the decoded event (processed.go): an id
//     handled before with other content (a publisher reusing an id for
//     another turn, without the Nats-Msg-Id header that lets the stream drop
//     a copy) is dead-lettered with the reason "event id reused with other
//     content", never acknowledged and dropped. After a successful handler
//     the records are written (ttl Config.ProcessedTTL), then the message
//     acked.
//   - nil: Ack.
//   - Permanent(err), or an error wrapping events.ErrInvalidEvent: the
//     message is copied to ENGRAM_DLQ (subject <prefix>.dlq.<consumer>, the
//     Engram-Dlq-* headers: reason, consumer, original subject, stream,
//     stream sequence, deliveries, original Nats-Msg-Id) and terminated
//     (TermWithReason), in that order: Term only after the DLQ acknowledged
//     the letter. If the DLQ refuses the letter (full, unreachable) and the
//     runner has a parking (WithParking: the process's memory store, one
//     dlq.Parking per process), the letter is parked in the store and the
//     message terminated (Outcome.Parked, metric engram_dlq_parked_total):
//     a poison event never holds the consumer's ack-pending slots, so valid
//     events keep flowing while the DLQ refuses letters, and the parking
//     moves the letters to the DLQ once it has room. Only when the letter
//     can be stored nowhere (no parking, or the store refuses too) is the
//     message nak'ed with backoff (Outcome.DeadLetterFailed, metric
//     engram_dlq_write_failures_total) and dead-lettered on a later
//     delivery: nothing is lost either way. A letter over the server's
//     maximum payload keeps the first bytes of the body
//     (dlq.Letter.Truncated).
//   - Any other error (transient): NakWithDelay with Config.Backoff(delivery)
//     = BackoffBase * 2^(delivery-1), at most BackoffMax.
//     RetryAfter(err, d) asks for delay d instead (a token budget reset).
//     Unavailable(err) (or an error with `Unavailable() bool` true) naks with
//     UnavailableDelay and pauses pulling (below).
//   - Wait(err) (or an error with `Wait() bool` true): not a failure, the
//     event waits for another worker or another run (the transcript the
//     extractor has not stored yet, a session another run holds). The
//     runner keeps the message, frees its handler slot, sends InProgress
//     while it waits, and calls the handler again after BackoffBase
//     doubling up to Config.WaitMax (15s): no delivery is spent
//     (ResultWaiting). A delivery that has waited Config.MaxWait (1h) in
//     all is treated as a transient failure. Before, such waits were nak'ed
//     with the failure backoff (up to 256 s apart, silently) and spent a
//     delivery each: after an outage upstream the chaos suite's compactor
//     held 13 events ack-pending for minutes with no log line, one wait
//     away from dead-lettering valid events.
//   - A panic is recovered, logged with its stack and is transient.
//   - A transient failure on the last allowed delivery (delivery count ==
//     Config.MaxDeliver, the topology consumer's MaxDeliver) is
//     dead-lettered rather than nak'ed. The runner, not the server, keeps
//     this limit: the topology's JetStream consumers have MaxDeliver -1,
//     because a server that gives up on a message after its last delivery
//     drops it when its letter could not be stored (the DLQ was full). A
//     message delivered more than MaxDeliver times without a result (a
//     process died holding it, its letter was refused) is dead-lettered on
//     its next delivery without calling the handler.
//   - A consumer made outside the topology with a server-side MaxDeliver
//     (Config.MaxDeliver 0 takes it) is also watched on the max-deliveries
//     advisory, $JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>:
//     the message is fetched by stream sequence and dead-lettered; the
//     DLQ's Nats-Msg-Id (dlq.MsgID) dedupes against what the runner or
//     another replica already dead-lettered. This path cannot retry a
//     refused letter; the topology's consumers do not use it.
//   - Shutdown past its deadline cancels the handler's ctx; a handler that
//     returns context.Canceled then is nak'ed without delay
//     (ResultInterrupted) for another replica to take.
//
// While a handler runs, the runner sends InProgress every ack wait / 3 so a
// slow handler (a model call) does not get its message redelivered. A call
// is bounded by Config.HandlerTimeout (default 15m): past it the handler's
// ctx is cancelled, the heartbeat stops and the failure is transient, so a
// stuck handler cannot hold its message forever. The steps after a
// handler returns (its processed record, Durable) are kept alive the same
// way, from the handler's last heartbeat (keepAlive): a slow store there
// got the event delivered and handled again (TestStepsAfterTheHandlerAreKeptAlive).
//
// # Durability
//
// WithDurable: an event is acknowledged only once the store says its
// writes would survive the loss of a server (the Redis store: on a
// replica); until then it waits, no delivery spent, and is then
// acknowledged without being handled again. A store that also counts its
// failovers (Failovers: a Redis cluster primary replaced by its replica,
// which may lack the last writes) gets a handler that began before the
// count moved run again in the same delivery, up to maxRedo times: its
// writes are made again where they are kept now. A run again is recorded
// as owed before it begins and as done when it succeeded (processed.go):
// a worker stopped in between hands the event back with the first run's
// processed records, and the next delivery runs the handler again instead
// of acknowledging it as handled (TestRunAgainOwedAcrossAStop).
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
// message would grow one each time). By default the runner pulls only as
// many messages as it has free handlers, so nothing waits in the process
// while its ack wait runs. Stop stops pulling, naks what no handler took
// yet (for another replica), and waits for the handlers in flight until ctx
// is done, then cancels them and waits for them to return. Every goroutine
// (pull loop, workers, keeper, heartbeats, advisory watcher) has ended when
// Stop returns.
//
// A pull request is read until the server ends it (its expiry, about 90%
// of Config.FetchWait, answered with a 408 status that follows every
// message of the request); only the stop and a pause cancel one early.
// The runner used to give up on its own deadline, a tenth of FetchWait
// after the server's expiry, and a message the server had delivered to the
// request just before was dropped with the subscription: pending on the
// server, never seen, it came back only when the consumer's ack wait ran
// out, a delivery spent. A process short of CPU at a request's end lost
// one so, with no log line (the TypeScript client's test waited 60 s, the
// compactor's ack wait, for a compaction). A delivery that waits (Wait) is
// kept alive with InProgress every third of the ack wait, whatever its
// backoff. Every redelivery is logged at debug ("event delivered again").
//
// A session's events are handed to handlers one at a time, in stream order
// (the queue keys each delivery by the tenant, project and session of its
// subject): with two handlers the transcript worker used to store a
// session's turns out of order now and then (t3 before t2), and events of
// one session mostly wait for each other anyway (session leases). Other
// sessions' events run beside them.
//
// # Fairness and deadlines
//
// A JetStream consumer delivers in stream order, so a flood from one
// sender (the 50 sessions x 1,000 turn_started) stands in front of
// everyone else's events: 71% of other sessions' turns timed out, and the
// stream's per-subject limit stops only one session. WithFairness makes
// the runner hold a window of messages (the consumer's max ack pending)
// instead of one per handler and hand them out round-robin over tenants,
// then their projects, then their sessions (queue.go): another tenant's turn
// is served within one round of the flood's, and one session's backlog
// never comes before another session's next event. WithDeadline gives the
// runner each event's deadline: a first delivery already past it is
// acknowledged as soon as it is pulled (a decode and an ack, no store
// work, no handler: ResultExpired), and a queued one is dropped by the
// keeper the moment it expires, so late turns free their window slots at
// once. "First delivery" means a delivery count of 1 and a message stored
// after the connection's latest (re)connect: a server that restarts may
// have lost its consumer's delivery records and deliver a message handled
// before as a first delivery (the chaos suite caught a turn whose block was
// recorded before a NATS kill dropped that way, its injection_ready never
// published); every server restart makes the connection reconnect, and
// what was stored before goes to the handler. The keeper also sends
// InProgress for a message that waits in the window more than a third of
// the ack wait.
//
// What the window cannot protect: a flood published faster than the
// runner can pull and acknowledge (50 sessions x 1,000 turns came in at
// about twice the pull rate on a 2-core machine) waits in the stream in
// front of the others' turns, and the round-robin only reorders what has
// been pulled: other tenants' turns answered with a p99 of 1,090 ms on an
// idle machine. WithLanes pulls more consumers into the same queue: the
// injector's lanes, each filtered on a few named tenants
// (events.EnsureLanes), so each tenant's turns are pulled from their own
// position in the stream. The injector's own consumer still delivers every
// turn (it covers the tenants without a lane and what was stored before a
// lane existed); what a running lane delivers, it acknowledges at intake
// without handling (ResultLaned: a parse and an ack). The runner takes a
// lane's cover from the stream's last sequence when it first sees the
// lane's filter (what is stored after it, that lane delivers), so a turn
// never falls between the two: one stored before may be handled twice,
// which the injector tolerates. That holds because lanes only grow
// (events.PlanLanes never narrows or deletes one: the main consumer would
// go on acknowledging a tenant's turns for a lane that no longer delivers
// them until the runner's next look). A lane deleted by hand is noticed
// at the next look or failed pull (a pull to a deleted consumer may get
// only "no responders", so the runner asks); what it had not delivered,
// and the turns stored before the runner noticed, are lost with it. A
// lane deleted and made again is covered afresh (its creation time). Pull requests are capped (maxFetch, 256):
// the server sends a request's messages back to back on the connection
// that carries every consumer's, and one request of 16,384 put megabytes
// of the flood in front of another lane's turn.
//
// Decoding moves to the pull loop for such a runner (the sender and the
// deadline are in the body); the other runners decode in their handlers.
//
// # Observability
//
// The runner logs only through the injected *zap.Logger (pauses, panics,
// dead letters, failures to ack or to write the DLQ) and reports every
// delivery's Outcome (result, latency, nak delay), pauses and advisory
// captures to an Observer, which the serve engineer adapts to Prometheus.
package runner
