// Shared helpers of the tests: the repository's contract files.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
/** The repository root: ENGRAM_REPO, or two levels above the package. */
export const repo = process.env.ENGRAM_REPO ?? path.resolve(here, "..", "..", "..");
export const vectors = JSON.parse(readFileSync(path.join(repo, "api", "vectors.json"), "utf8"));
export const asyncapiPath = path.join(repo, "api", "asyncapi.yaml");

/** The body of a vector as bytes. */
export function bodyOf(v) {
  return v.body_base64 !== undefined ? new Uint8Array(Buffer.from(v.body_base64, "base64")) : new TextEncoder().encode(v.body ?? "");
}

const TIME_FIELDS = new Set(["occurred_at", "reply_by", "last_activity"]);

/**
 * An event reduced for comparison: empty values dropped (Go leaves them
 * out or writes zeros), times as instants.
 */
export function canon(v, key = "") {
  if (Array.isArray(v)) return v.map((x) => canon(x));
  if (v !== null && typeof v === "object") {
    const out = {};
    for (const k of Object.keys(v).sort()) {
      const c = canon(v[k], k);
      if (c === undefined || c === "" || c === 0 || c === false || c === null) continue;
      if (Array.isArray(c) && c.length === 0) continue;
      if (typeof c === "object" && !Array.isArray(c) && Object.keys(c).length === 0 && k !== "payload") continue;
      out[k] = c;
    }
    return out;
  }
  if (TIME_FIELDS.has(key) && typeof v === "string") {
    const m = /\.(\d+)/.exec(v);
    return `${Date.parse(v)}+${(m?.[1] ?? "").padEnd(9, "0").slice(3)}`;
  }
  return v;
}
