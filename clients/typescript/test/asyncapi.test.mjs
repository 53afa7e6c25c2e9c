// api/asyncapi.yaml: valid for the official AsyncAPI parser, its schemas
// agree with the shared vectors (what Go's decoder accepts and refuses)
// and with this client's generated types.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Parser } from "@asyncapi/parser";
import AjvModule from "ajv";
import formatsModule from "ajv-formats";
import {
  SHAPES, PAYLOAD_OBJECT, INPUT_TYPES, OUTPUT_TYPES, ROLE_VALUES, TOOL_STATUS_VALUES, CHANGE_KIND_VALUES, HEADERS,
  SCHEMA_VERSION, MAX_ID_BYTES,
} from "../dist/index.js";
import { asyncapiPath, bodyOf, vectors } from "./helpers.mjs";

const Ajv = AjvModule.default ?? AjvModule;
const addFormats = formatsModule.default ?? formatsModule;

const parsed = await new Parser().parse(readFileSync(asyncapiPath, "utf8"));
const doc = parsed.document;
const schemas = doc ? Object.fromEntries(doc.components().schemas().all().map((s) => [s.id(), s.json()])) : {};

test("the official AsyncAPI parser accepts the document", () => {
  const problems = parsed.diagnostics.filter((d) => d.severity <= 1);
  assert.deepEqual(problems.map((d) => `${d.code}: ${d.message} at ${d.path.join(".")}`), []);
  assert.ok(doc, "no document");
  assert.match(doc.version(), /^3\./);
  assert.equal(doc.info().version(), String(SCHEMA_VERSION));
  assert.equal(doc.servers().all()[0].protocol(), "nats");
  const channels = doc.channels().all().map((c) => c.address());
  for (const t of INPUT_TYPES) assert.ok(channels.includes(`engram.in.${t}.{tenant}.{project}.{session}`), t);
  for (const t of OUTPUT_TYPES) assert.ok(channels.includes(`engram.out.${t}.{tenant}.{project}.{session}`), t);
  assert.ok(channels.includes("engram.out.memory_changed.{tenant}.{project}"));
  assert.ok(channels.includes("engram.api.context.{tenant}.{project}.{session}"));
  const ops = Object.fromEntries(doc.operations().all().map((o) => [o.id(), o]));
  assert.equal(ops.receiveTurnStarted.action(), "receive");
  assert.ok(ops.receiveTurnStarted.reply(), "turn_started is request/reply");
  assert.ok(ops.receiveContextRequest.reply(), "the context API is request/reply");
  assert.equal(ops.sendInjectionReady.action(), "send");
  const headers = doc.components().messages().get("turnStarted").headers().json();
  for (const h of [HEADERS.msgId, HEADERS.type, HEADERS.version]) assert.ok(headers.properties[h], h);
  const dlq = doc.components().messages().get("deadLetter").headers().json();
  for (const h of [HEADERS.dlqReason, HEADERS.dlqConsumer, HEADERS.dlqSubject, HEADERS.dlqMsgId]) assert.ok(dlq.properties[h], h);
});

const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
const camel = (t) => t.split("_").map((w, i) => (i ? w[0].toUpperCase() + w.slice(1) : w)).join("");
const eventSchema = (type) => {
  const name = PAYLOAD_OBJECT[type] ? PAYLOAD_OBJECT[type] + "Event" : "Envelope";
  return ajv.compile(schemas[name]);
};
const validators = {};
const validatorFor = (body) => {
  const type = body && typeof body === "object" && PAYLOAD_OBJECT[body.type] ? body.type : "";
  return (validators[type] ??= eventSchema(type));
};

test("every message's example is valid for its schema", () => {
  for (const m of doc.components().messages().all()) {
    for (const ex of m.examples().all()) {
      const payload = m.payload().json();
      const v = ajv.compile(payload);
      assert.ok(v(ex.payload()), `${m.id()}: ${ajv.errorsText(v.errors)}`);
    }
  }
});

test("the schemas accept what Go's decoder accepts", () => {
  for (const v of vectors.decode) {
    const body = JSON.parse(new TextDecoder().decode(bodyOf(v)));
    const validate = validatorFor(body);
    const valid = validate(body);
    assert.equal(!valid, v.schema_refuses === true, `${v.name}: ${valid ? "valid" : ajv.errorsText(validate.errors)}`);
  }
});

test("the schemas refuse what they can of what Go's decoder refuses", () => {
  let refused = 0;
  for (const v of vectors.refuse) {
    // Bytes a JSON parser cannot take, and keys twice (a parser keeps one
    // of them: the schema sees another body), are the decoder's alone.
    if (v.stage === "text" || v.body === undefined || v.errors[0].reason.startsWith("duplicate key")) continue;
    let body;
    try {
      body = JSON.parse(v.body);
    } catch {
      continue; // malformed JSON: nothing for a schema to see
    }
    const validate = validatorFor(body);
    const valid = validate(body);
    assert.equal(!valid, v.schema_refuses, `${v.name}: schema_refuses ${v.schema_refuses}, the schema says ${valid ? "valid" : ajv.errorsText(validate.errors)}`);
    if (!valid) refused++;
  }
  assert.ok(refused > 200, `only ${refused} refused by the schemas`);
});

test("this client's types are the document's", () => {
  for (const [name, fields] of Object.entries(SHAPES)) {
    const s = schemas[name];
    assert.ok(s, `no schema ${name}`);
    assert.deepEqual(Object.keys(s.properties).sort(), Object.keys(fields).sort(), name);
  }
  for (const [type, obj] of Object.entries(PAYLOAD_OBJECT)) {
    const ev = schemas[obj + "Event"];
    assert.ok(ev, `no schema ${obj}Event`);
    assert.equal(ev.allOf[1].properties.type.const, type);
    assert.ok(doc.components().messages().get(camel(type)), `no message ${camel(type)}`);
  }
  assert.deepEqual(schemas.Envelope.properties.type.enum, [...INPUT_TYPES, ...OUTPUT_TYPES]);
  assert.deepEqual(schemas.Message.properties.role.enum, [...ROLE_VALUES]);
  assert.deepEqual(schemas.Message.properties.tool_status.enum, [...TOOL_STATUS_VALUES]);
  assert.deepEqual(schemas.Change.properties.kind["x-engram-known-values"], [...CHANGE_KIND_VALUES]);
  assert.equal(schemas.Envelope.properties.project_id["x-engram-max-bytes"], MAX_ID_BYTES);
});
