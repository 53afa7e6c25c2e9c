// Every credential kind Engram's roles use: user and password, a token, an
// nkey, a creds file, over TLS with the server's CA and a client
// certificate. The servers are NATS servers the Go test starts for it
// (ENGRAM_TS_AUTH_FIXTURE).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { connect } from "../dist/index.js";

const path = process.env.ENGRAM_TS_AUTH_FIXTURE;
let skip = false;
if (!path) {
  const why = "needs ENGRAM_TS_AUTH_FIXTURE (run: go test ./clients/typescript)";
  if (process.env.CI) throw new Error(why + ", required under CI");
  skip = why;
}
const f = path ? JSON.parse(readFileSync(path, "utf8")) : {};

/** Connects, makes a round trip to the server, closes. */
async function roundTrip(opts) {
  const c = await connect({ reconnect: false, connectTimeoutMs: 5000, ...opts });
  try {
    await c.nc.flush();
    assert.ok((await c.nc.rtt()) >= 0);
  } finally {
    await c.close();
  }
}

const tls = (x) => ({ caFile: x.ca, certFile: x.cert, keyFile: x.key });

test("user and password over mutual TLS", { skip }, async () => {
  await roundTrip({ servers: f.tls.url, user: f.tls.user, password: f.tls.password, tls: tls(f.tls) });
  await assert.rejects(roundTrip({ servers: f.tls.url, user: f.tls.user, password: "wrong", tls: tls(f.tls) }));
  // Without the client certificate the server refuses the handshake.
  await assert.rejects(roundTrip({ servers: f.tls.url, user: f.tls.user, password: f.tls.password, tls: { caFile: f.tls.ca } }));
});

test("a token", { skip }, async () => {
  await roundTrip({ servers: f.token.url, token: f.token.token, tls: tls(f.token) });
  await assert.rejects(roundTrip({ servers: f.token.url, token: "not-it", tls: tls(f.token) }));
});

test("an nkey seed file", { skip }, async () => {
  await roundTrip({ servers: f.nkey.url, nkeyFile: f.nkey.seedFile, tls: tls(f.nkey) });
});

test("a creds file", { skip }, async () => {
  await roundTrip({ servers: f.creds.url, credsFile: f.creds.credsFile });
  await assert.rejects(roundTrip({ servers: f.creds.url, credsFile: f.creds.strangerCredsFile }));
});
