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
// The package does not log; pass a Logger to see the server's own messages.
package natsembed
