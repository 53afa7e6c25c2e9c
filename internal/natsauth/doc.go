// Package natsauth is who may do what on Engram's NATS: the roles, their
// least-privilege permissions, the credentials `engram serve` generates
// into its data dir, the clients' authentication and TLS options, and the
// start-up check that a connection has the permissions its process needs.
//
// # Roles
//
// One NATS user per role (Roles): admin (everything: serve's own
// connection, the CLI), setup (creates the streams, consumers and the idle
// detector's bucket, updates ENGRAM_IN, ENGRAM_OUT and the bucket:
// `engram setup`), platform (the default tenant's platform: publishes its
// input events <prefix>.in.*.%.> and context requests
// <prefix>.api.context.%.>, receives its replies on _INBOX.>; nothing else),
// one platform user per named tenant (TenantUser, "tenant-<token>":
// ForTenant, the same with the tenant's token and its inbox
// _INBOX_TENANT.<token>.>), outputs (a platform that only reads the
// output events, to react to memory_changed: subscribes <prefix>.out.>
// and its own inbox, publishes only $SYS.REQ.USER.INFO; no JetStream
// request, because a consumer it created could deliver ENGRAM_OUT's
// messages to any subject, unchecked by the server, nats-server#8274; it
// sees every tenant's outputs, so it is the operator's, not a tenant's),
// and one per worker: injector, extractor,
// consolidator, compactor and idle. For gives each role's allow lists;
// everything not listed is denied. What the lists hold was read off the
// code, and is checked by running each real worker with its user
// (internal/app's tests), the matrix test of this package and the property
// test over random tenants (TestNoCredentialCrossesTenants):
//
//   - every worker: $SYS.REQ.USER.INFO (Verify), $JS.API.INFO (readiness),
//     STREAM.INFO and CONSUMER.LIST of the three streams (lag gauges), its
//     own consumer's CONSUMER.INFO and CONSUMER.MSG.NEXT, $JS.ACK of its
//     consumer, its dead-letter subject, and its own reply inbox
//     InboxPrefix(role).>. No worker may get an ENGRAM_IN message by
//     sequence (STREAM.MSG.GET, DIRECT.GET without a subject): it reads
//     only what its consumer delivers;
//   - injector: <prefix>.out.injection_ready.> and the inboxes _INBOX.> and
//     _INBOX_TENANT.> (the reply to the platform that waits; the handler
//     answers a tenant only in its own, events.CheckReplyFor); extractor:
//     <prefix>.out.memory_changed.>, and the same consumer permissions for
//     the transcript consumer it also runs (events.ConsumerTranscript: the
//     model-free part of turn_ended); consolidator: consolidation_done and
//     memory_changed, and the last turn_started and turn_ended of a
//     session's subject ($JS.API.DIRECT.GET.ENGRAM_IN.<prefix>.in.<type>.>:
//     the server refuses a sequence on this form); compactor:
//     compaction_done, the last turn_ended of a subject, the transcript
//     consumer's info (events.NewTranscriptLag), and the context API
//     (subscribe <prefix>.api.context.*.*.*, allow_responses: one answer
//     to each request's reply subject, which ServeContext checks is the
//     request's tenant's inbox); idle: <prefix>.in.session_idle.> and its
//     ENGRAM_ACTIVITY key-value bucket.
//   - setup: may create ENGRAM_DLQ but not update it (new limits, one
//     message or one second, would make the server delete every dead
//     letter): an admin applies a change of the DLQ's limits, and `engram
//     setup` as setup reports it as not applied (events.EnsureOptions).
//     It creates only the worker roles' durable consumers.
//
// Engram's own processes use inbox prefixes of their own (InboxPrefix,
// under events.EngramInboxRoot: workers, serve, setup, the CLI as admin),
// never _INBOX.: the default tenant's platform may subscribe to _INBOX.>,
// and must not see their JetStream traffic, which carries every event and
// dead letter they read. ClientInbox says which inbox a user's connection
// must use.
//
// The same set ships as a nats-server configuration, deploy/nats/accounts.conf
// (AccountsConf; passwords from the server's environment,
// ENGRAM_<ROLE>_PASSWORD), for an external NATS; `engram nats-config
// -tenants` adds the data dir's tenants (their bcrypt hashes inline).
// `engram serve` gives its embedded server the same users (ServerUsers)
// and reloads the tenants' when their file changes. A test keeps the file
// equal to AccountsConf.
//
// # Credentials in the data dir
//
// EnsureCredentials writes one random password per role into
// <data>/nats-credentials.json; AddTenant gives a tenant a random password,
// returned once, and keeps only its bcrypt hash in <data>/nats-tenants.json
// (both mode 0600, the data dir 0700; looser modes are tightened when
// read). Clients of a local server read the role passwords when no
// credentials are configured (internal/app.ClientAuth); they are never sent
// to a non-local server (IsLocal).
//
// # The store key, apart from the store
//
// The embedded server's JetStream store is encrypted; a key kept beside it
// (as before issue 31, <data>/nats-store.key) makes the encryption worth
// nothing against whoever copies the data dir (a backup, a volume
// snapshot). EnsureStoreKey keeps it in the user's configuration dir
// instead (StoreKeyDir: $XDG_CONFIG_HOME/engram/nats-store-keys, or
// ~/.config/...), in a file named by the key's id, which the store records
// (CheckStoreKey): a data dir moved elsewhere still finds its key, two
// data dirs on one machine have two keys, and a store whose key is gone is
// refused with the id to look for, never opened empty. A key of an older
// version in the data dir is moved out at the next start (written and
// synced in the key dir, then removed). ENGRAM_NATS_STORE_KEY_FILE gives
// the key from elsewhere (a mounted secret). Back the key up apart from
// the data.
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
