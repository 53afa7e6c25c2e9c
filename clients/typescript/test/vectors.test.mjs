// The shared vectors (api/vectors.json, generated from Go's decoder): this
// client must encode tokens, build subjects, decode and refuse exactly as
// pkg/events does.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  decodeEvent, decodeToken, encodeEvent, encodeToken, InvalidEventError, newId, Subjects, tenantInbox,
  SCHEMA_VERSION, MAX_ID_BYTES, DEFAULT_MAX_EVENT_BYTES, DEFAULT_PREFIX,
} from "../dist/index.js";
import { bodyOf, canon, vectors } from "./helpers.mjs";

test("the vectors are the contract this client was built for", () => {
  assert.equal(vectors.schema_version, SCHEMA_VERSION);
  assert.equal(vectors.max_id_bytes, MAX_ID_BYTES);
  assert.equal(vectors.max_event_bytes, DEFAULT_MAX_EVENT_BYTES);
  assert.equal(vectors.prefix, DEFAULT_PREFIX);
  assert.ok(vectors.decode.length > 50 && vectors.refuse.length > 200, "too few vectors");
});

test("tokens encode and decode", () => {
  for (const { id, token } of vectors.tokens) {
    assert.equal(encodeToken(id), token, `encodeToken(${JSON.stringify(id)})`);
    assert.equal(decodeToken(token), id, `decodeToken(${JSON.stringify(token)})`);
  }
  for (const { token } of vectors.bad_tokens) {
    assert.throws(() => decodeToken(token), undefined, `decodeToken(${JSON.stringify(token)}) must fail`);
  }
});

test("subjects and inboxes", () => {
  const s = new Subjects(vectors.prefix);
  for (const v of vectors.subjects) {
    let got;
    switch (v.kind) {
      case "in": got = s.in(v.type, v.tenant, v.project, v.session); break;
      case "out": got = s.out(v.type, v.tenant, v.project, v.session); break;
      case "context": got = s.contextApi(v.tenant, v.project, v.session); break;
      case "dlq": got = s.dlq(v.project); break;
    }
    assert.equal(got, v.subject, JSON.stringify(v));
  }
  for (const { tenant, inbox } of vectors.inboxes) assert.equal(tenantInbox(tenant), inbox);
});

test("bodies that decode", () => {
  for (const v of vectors.decode) {
    let e;
    try {
      e = decodeEvent(bodyOf(v));
    } catch (err) {
      assert.fail(`${v.name}: refused: ${err.message}`);
    }
    assert.deepEqual(canon(e), canon(v.event), v.name);
  }
});

function matches(got, want) {
  if (got.field !== want.field) return false;
  if (want.match === "exact") return got.reason === want.reason;
  return got.reason.startsWith(want.match);
}

test("bodies that are refused, for Go's reasons", () => {
  for (const v of vectors.refuse) {
    let err;
    try {
      decodeEvent(bodyOf(v));
    } catch (e) {
      err = e;
    }
    assert.ok(err instanceof InvalidEventError, `${v.name}: decoded, want ${JSON.stringify(v.errors)}`);
    const ok = err.problems.length === v.errors.length && err.problems.every((p, i) => matches(p, v.errors[i]));
    assert.ok(ok, `${v.name}:\n got  ${JSON.stringify(err.problems)}\n want ${JSON.stringify(v.errors)}`);
  }
});

test("validation before sending gives the decoder's reasons", () => {
  let n = 0;
  for (const v of vectors.refuse) {
    if (v.stage !== "fields" || v.body === undefined) continue;
    const obj = JSON.parse(v.body);
    if (obj === null || typeof obj !== "object" || Array.isArray(obj)) continue;
    let err;
    try {
      encodeEvent(obj);
    } catch (e) {
      err = e;
    }
    assert.ok(err instanceof InvalidEventError, `${v.name}: encoded`);
    assert.ok(err.problems.every((p, i) => matches(p, v.errors[i])), `${v.name}: ${JSON.stringify(err.problems)}`);
    n++;
  }
  assert.ok(n > 200, `only ${n} vectors checked`);
});

test("ids are ULID-like and sort by time", () => {
  const re = new RegExp(vectors.id_pattern);
  let prev = "";
  for (let i = 0; i < 50; i++) {
    const id = newId(Date.UTC(2026, 0, 1) + i);
    assert.match(id, re);
    assert.ok(id > prev, "ids sort by time");
    prev = id;
  }
  assert.notEqual(newId(), newId());
});
