// Event ids as pkg/events makes them (NewID): 26 characters of Crockford
// base32 of 48 bits of milliseconds and 80 random bits, like a ULID, so
// that ids sort by time.

import { randomFillSync } from "node:crypto";

const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** A unique, time-ordered event id. */
export function newId(now: number = Date.now()): string {
  const rnd = new Uint8Array(10);
  randomFillSync(rnd);
  let v = BigInt(Math.floor(now)) & 0xffffffffffffn;
  for (const b of rnd) v = (v << 8n) | BigInt(b);
  let out = "";
  for (let i = 0; i < 26; i++) {
    const off = BigInt(5 * (25 - i));
    out += ALPHABET[Number((v >> off) & 31n)];
  }
  return out;
}
