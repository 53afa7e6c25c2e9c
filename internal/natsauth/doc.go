// Package natsauth is who may do what on Engram's NATS: the roles, their
// least-privilege permissions, the credentials `engram serve` generates
// into its data dir, the clients' authentication and TLS options, and the
// start-up check that a connection has the permissions its process needs.
//
// # Roles
//
// One NATS user per role (Roles): admin (everything: serve's own
// connection, the CLI), setup (creates and updates the streams, consumers
// and the idle detector's bucket: `engram setup`), platform (publishes
// input events engram.in.> and context requests, receives its replies on
// _INBOX.>; nothing else: it cannot read ENGRAM_OUT, the DLQ or the other
// platforms' events, nor delete a stream or consumer), and one per worker:
// injector, extractor, consolidator, compactor and idle. For gives each
// role's allow lists; everything not listed is denied. What the lists hold
// was read off the code, and is checked by running each real worker with
// its user (internal/app's tests) and the matrix test of this package:
//
//   - every worker: $SYS.REQ.USER.INFO (Verify), $JS.API.INFO (readiness),
//     STREAM.INFO and CONSUMER.LIST of the three streams (lag gauges), its
//     own consumer's CONSUMER.INFO and CONSUMER.MSG.NEXT, $JS.ACK of its
//     consumer, STREAM.MSG.GET of ENGRAM_IN and the max-deliveries advisory
//     of its consumer (the dead-letter watcher), its dead-letter subject,
//     and its own reply inbox InboxPrefix(role).>;
//   - injector: engram.out.injection_ready.> and _INBOX.> (the reply to the
//     platform that waits); extractor: engram.out.memory_changed.>, and
//     the same consumer permissions for the transcript consumer it also
//     runs (events.ConsumerTranscript: the model-free part of turn_ended);
//     consolidator: consolidation_done and memory_changed, and direct gets
//     of ENGRAM_IN (the session's last turn_started) and the extractor
//     consumer's info (events.ExtractorLag); compactor: compaction_done,
//     the context API (subscribe engram.api.context.*.*, answers allowed
//     only to the requests' reply subjects), direct gets of ENGRAM_IN and
//     the transcript consumer's info (events.NewTranscriptLag); idle:
//     engram.in.session_idle.> and its ENGRAM_ACTIVITY key-value bucket.
//
// Worker processes use their own inbox prefix (InboxPrefix), not _INBOX.:
// the messages a worker pulls arrive on its inbox, and a platform may
// subscribe to _INBOX.>.
//
// The same set ships as a nats-server configuration, deploy/nats/accounts.conf
// (AccountsConf; passwords from the server's environment,
// ENGRAM_<ROLE>_PASSWORD), for an external NATS; `engram serve` gives its
// embedded server the same users (ServerUsers). A test keeps the file equal
// to AccountsConf.
//
// # Credentials in the data dir
//
// EnsureCredentials writes one random password per role into
// <data>/nats-credentials.json and EnsureStoreKey the JetStream store key
// into <data>/nats-store.key (mode 0600, the data dir 0700; looser modes are
// tightened when read). Clients of a local server read them when no
// credentials are configured (internal/app.ClientAuth); they are never sent
// to a non-local server (IsLocal).
//
// # Failing loudly
//
// NATS reports a permission violation asynchronously, after the call that
// caused it returned: a worker denied its consumer would start, look
// healthy and never work. Verify asks the server for the connection's own
// permissions ($SYS.REQ.USER.INFO) and returns ErrDenied naming every
// subject the process's roles need and may not use, after checking
// synchronously that the reply inbox itself may be subscribed to.
//
// The package does not log and never puts a password or token in an error;
// internal/credurl hides the ones in URLs.
package natsauth
