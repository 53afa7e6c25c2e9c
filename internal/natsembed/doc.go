// Package natsembed runs a NATS server with JetStream inside the process.
//
// It is what `engram serve` uses so that Engram needs nothing but Go: the
// server keeps its JetStream file store in a folder of the data dir and
// listens on a TCP address (127.0.0.1:4222 by default) so that chat platforms
// and the other `engram` subcommands can connect to it like to any NATS
// server. Tests start one on a random port with Listen "127.0.0.1:-1".
//
//	srv, err := natsembed.Start(natsembed.Options{StoreDir: dir, Listen: "127.0.0.1:-1"})
//	if err != nil { ... }
//	defer srv.Shutdown()
//	nc, err := nats.Connect(srv.ClientURL())
//
// Options.Users makes the server require those users (engram serve gives
// it the role users of internal/natsauth); Options.StoreKey encrypts the
// file store (an existing plaintext store is converted at start);
// Options.ConfigFile reads a nats-server configuration first (tests start a
// server configured with deploy/nats/accounts.conf). Without Users the
// server accepts anyone: tests only, or ENGRAM_INSECURE.
//
// # A full disk
//
// nats-server's file store keeps a write error: once a write to a stream's
// files fails with "no space left on device", that stream refuses every
// publish (the publisher gets no answer at all) until the stream is loaded
// again, even after space has returned, while JetStream stays enabled and
// the account looks healthy. Only the server's own health report
// (Server.Healthz) names the write error. Server.StoreFailure reads it;
// Server.RestartJetStream shuts JetStream down and enables it again on the
// same store, which loads every stream and consumer from its files as a
// process start would (clearing the error; acknowledged events are all
// there, publishes refused meanwhile were never acknowledged, so their
// publishers retry them; deliveries not yet acknowledged come again).
// Server.Guard does both by itself: it checks the store every interval,
// takes a failure that two checks in a row see (the server's health check
// reports a stream being created as not recovered for a moment), reports
// it (the readiness check "nats" of internal/app), waits
// until the volume has GuardOptions.MinFree bytes free (64 MiB) and
// restarts JetStream (at most every RetryAfter). TestGuardRecoversTheStoreAfterADiskFull
// reproduces the real failure on a small tmpfs.
//
// The package does not log; pass a Logger to see the server's own messages.
package natsembed
