// The envelope: building, encoding (validated before sending) and decoding
// events as pkg/events does, with the same checks in the same order and
// the same reasons. api/vectors.json holds the bodies both must accept and
// refuse; the tests run them.

import {
  EARLIEST_TIME, INPUT_TYPES, KNOWN_FIELDS, MAP_FIELDS, MAX_CLOCK_AHEAD_MS, MAX_ID_BYTES, OUTPUT_TYPES,
  PAYLOAD_OBJECT, SCHEMA_VERSION, SHAPES,
  type AnyEnvelope, type Envelope, type EventType, type PayloadOf, type Shape,
} from "./contract.js";
import { newId } from "./id.js";

/** One problem of an event: the field (a JSON path, "" for the whole body) and why. */
export interface FieldProblem {
  field: string;
  reason: string;
}

/**
 * An event that does not decode or validate. problems lists every problem
 * found, each as pkg/events' FieldError words it; message is Go's error text
 * ("events: invalid event: payload.text: missing", one line per problem).
 */
export class InvalidEventError extends Error {
  readonly problems: FieldProblem[];
  constructor(problems: FieldProblem[]) {
    super(problems.map((p) => "events: invalid event: " + (p.field ? p.field + ": " : "") + p.reason).join("\n"));
    this.name = "InvalidEventError";
    this.problems = problems;
  }
}

/** Where an event belongs: a tenant (absent: the default tenant), a project, a session and, for turn events, a turn. */
export interface Ref {
  tenant?: string;
  project: string;
  session?: string;
  turn?: string;
}

const encoder = new TextEncoder();
const utf8 = new TextDecoder("utf-8", { fatal: true });
const EARLIEST_MS = Date.parse(EARLIEST_TIME);

/**
 * Builds an event of type for ref with a fresh id, the current schema
 * version and occurred_at now.
 */
export function newEvent<T extends EventType>(type: T, ref: Ref, payload: PayloadOf[T]): Envelope<T> {
  const e: Envelope<T> = {
    id: newId(),
    type,
    version: SCHEMA_VERSION,
    occurred_at: new Date().toISOString(),
    project_id: ref.project,
    payload,
  };
  if (ref.tenant) e.tenant_id = ref.tenant;
  if (ref.session) e.session_id = ref.session;
  if (ref.turn) e.turn_id = ref.turn;
  return e;
}

/**
 * Encodes an event as JSON (UTF-8), after the checks a reader makes:
 * InvalidEventError with every problem, as pkg/events' Decode reports them.
 */
export function encodeEvent(e: Envelope): Uint8Array {
  const body = encoder.encode(JSON.stringify(e));
  decodeEvent(body);
  return body;
}

/**
 * Decodes and validates one event as pkg/events' Decode does: invalid
 * UTF-8 or a lone surrogate escape, malformed JSON, a key twice in an
 * object or spelled otherwise than its field, a mistyped field, a missing
 * required field, an id too long or with a control character, an unknown
 * type, a newer version, a timestamp outside the clock window: each is an
 * InvalidEventError with the reasons Go gives. Unknown fields are dropped.
 */
export function decodeEvent(data: Uint8Array | string): AnyEnvelope {
  if (typeof data === "string" && !wellFormed(data)) {
    // TextEncoder would make a lone surrogate U+FFFD, as Go's decoder
    // would an invalid byte: refused, not merged.
    throw new InvalidEventError([{ field: "", reason: "not valid UTF-8 (a lone surrogate in the string)" }]);
  }
  const bytes = typeof data === "string" ? encoder.encode(data) : data;
  const textProblem = checkText(bytes);
  if (textProblem) throw new InvalidEventError([{ field: "", reason: textProblem }]);
  let raw: unknown;
  try {
    raw = JSON.parse(utf8.decode(bytes));
  } catch (err) {
    throw new InvalidEventError([{ field: "", reason: "malformed JSON: " + (err as Error).message }]);
  }
  if (raw === null) throw new InvalidEventError([{ field: "", reason: "malformed JSON: not an object" }]);
  if (typeof raw !== "object" || Array.isArray(raw)) {
    throw new InvalidEventError([{ field: "", reason: "malformed JSON: not an object (" + jsonKind(raw) + ")" }]);
  }
  const keyProblem = checkKeys(bytes);
  if (keyProblem) throw new InvalidEventError([keyProblem]);

  const obj = raw as Record<string, unknown>;
  const p = new Problems();
  const e: Record<string, unknown> = {};
  // A field of the wrong JSON type is reported (by name) here; a missing
  // one by validateHead.
  const headShapes = SHAPES["Envelope"]!;
  for (const name of ["id", "type", "version", "occurred_at", "tenant_id", "project_id", "session_id", "turn_id"]) {
    const v = obj[name];
    if (v === undefined || v === null) continue;
    const bad = shapeProblem(v, headShapes[name]!, name);
    if (bad) p.add(name, "malformed: " + bad);
    else e[name] = v;
  }
  const malformed = p.list.length > 0;
  validateHead(e, p);
  const type = e["type"] as EventType | undefined;
  const payload = obj["payload"];
  if (payload === undefined || payload === null) {
    p.add("payload", "missing");
  } else if (typeof payload !== "object" || Array.isArray(payload)) {
    p.add("payload", "not a JSON object");
  } else if (type !== undefined && isType(type)) {
    const shape: Shape = { ref: PAYLOAD_OBJECT[type] };
    const bad = shapeProblem(payload, shape, "payload");
    if (bad) {
      p.add("payload", "malformed: " + bad);
    } else {
      e["payload"] = project(payload, shape);
      p.prefix = "payload.";
      validatePayload(type, e["payload"] as Record<string, unknown>, p);
    }
  }
  if (p.list.length > 0) {
    throw new InvalidEventError(malformed ? dedupe(p.list) : p.list);
  }
  return e as unknown as AnyEnvelope;
}

function isType(t: string): t is EventType {
  return (INPUT_TYPES as readonly string[]).includes(t) || (OUTPUT_TYPES as readonly string[]).includes(t);
}

/** Whether t is an input type (a platform publishes it). */
export function isInputType(t: string): boolean {
  return (INPUT_TYPES as readonly string[]).includes(t);
}

function dedupe(list: FieldProblem[]): FieldProblem[] {
  const seen = new Set<string>();
  return list.filter((p) => {
    if (seen.has(p.field)) return false;
    seen.add(p.field);
    return true;
  });
}

function jsonKind(v: unknown): string {
  if (Array.isArray(v)) return "an array";
  if (v === null) return "null";
  return "a " + typeof v;
}

// ---------------------------------------------------------------- shapes

/** The first JSON type mismatch of v against shape, as "path: want ...", or "". */
function shapeProblem(v: unknown, shape: Shape, path: string): string {
  if (v === null || v === undefined) return ""; // null is absent (the zero value)
  if (typeof shape === "string") {
    switch (shape) {
      case "string":
        return typeof v === "string" ? "" : `${path}: want a string, not ${jsonKind(v)}`;
      case "integer":
        return typeof v === "number" && Number.isInteger(v) && Math.abs(v) <= 2 ** 63 ? "" : `${path}: want an integer, not ${describe(v)}`;
      case "number":
        return typeof v === "number" ? "" : `${path}: want a number, not ${jsonKind(v)}`;
      case "boolean":
        return typeof v === "boolean" ? "" : `${path}: want a boolean, not ${jsonKind(v)}`;
      case "time":
        if (typeof v !== "string") return `${path}: want an RFC 3339 time, not ${jsonKind(v)}`;
        return parseTime(v) ? "" : `${path}: ${JSON.stringify(v)} is not an RFC 3339 time`;
      case "object":
        return typeof v === "object" && !Array.isArray(v) ? "" : `${path}: want an object, not ${jsonKind(v)}`;
    }
  }
  if ("array" in shape) {
    if (!Array.isArray(v)) return `${path}: want an array, not ${jsonKind(v)}`;
    for (let i = 0; i < v.length; i++) {
      const bad = shapeProblem(v[i], shape.array, `${path}[${i}]`);
      if (bad) return bad;
    }
    return "";
  }
  if ("map" in shape) {
    if (typeof v !== "object" || Array.isArray(v)) return `${path}: want an object, not ${jsonKind(v)}`;
    for (const [k, el] of Object.entries(v as Record<string, unknown>)) {
      const bad = shapeProblem(el, shape.map, `${path}.${k}`);
      if (bad) return bad;
    }
    return "";
  }
  if (typeof v !== "object" || Array.isArray(v)) return `${path}: want an object, not ${jsonKind(v)}`;
  const fields = SHAPES[shape.ref]!;
  for (const [name, fs] of Object.entries(fields)) {
    const bad = shapeProblem((v as Record<string, unknown>)[name], fs, `${path}.${name}`);
    if (bad) return bad;
  }
  return "";
}

function describe(v: unknown): string {
  return typeof v === "number" ? `the number ${v}` : jsonKind(v);
}

/** v reduced to the fields of shape (unknown fields dropped, null absent). */
function project(v: unknown, shape: Shape): unknown {
  if (v === null || v === undefined) return undefined;
  if (typeof shape === "string") return v;
  if ("array" in shape) return (v as unknown[]).map((el) => project(el, shape.array) ?? zeroOf(shape.array));
  if ("map" in shape) {
    const out: Record<string, unknown> = {};
    for (const [k, el] of Object.entries(v as Record<string, unknown>)) out[k] = project(el, shape.map) ?? zeroOf(shape.map);
    return out;
  }
  const out: Record<string, unknown> = {};
  for (const [name, fs] of Object.entries(SHAPES[shape.ref]!)) {
    const pv = project((v as Record<string, unknown>)[name], fs);
    if (pv !== undefined) out[name] = pv;
  }
  return out;
}

function zeroOf(shape: Shape): unknown {
  if (typeof shape === "string") {
    switch (shape) {
      case "string":
      case "time":
        return "";
      case "integer":
      case "number":
        return 0;
      case "boolean":
        return false;
    }
    return {};
  }
  if ("array" in shape) return [];
  return {};
}

// ------------------------------------------------------------ validation

class Problems {
  prefix = "";
  list: FieldProblem[] = [];
  add(field: string, reason: string): void {
    this.list.push({ field: this.prefix + field, reason });
  }
  id(field: string, v: unknown, required: boolean): void {
    const s = typeof v === "string" ? v : "";
    if (s === "") {
      if (required) this.add(field, "missing");
      return;
    }
    const n = utf8Length(s);
    if (n > MAX_ID_BYTES) {
      this.add(field, `longer than ${MAX_ID_BYTES} bytes`);
      return;
    }
    if (!wellFormed(s)) {
      this.add(field, "not valid UTF-8");
      return;
    }
    let at = 0;
    for (const ch of s) {
      const cp = ch.codePointAt(0)!;
      if (cp <= 0x1f || (cp >= 0x7f && cp <= 0x9f)) {
        this.add(field, `holds a control character (U+${cp.toString(16).toUpperCase().padStart(4, "0")} at byte ${at})`);
        return;
      }
      at += utf8Length(ch);
    }
  }
  time(field: string, v: unknown): void {
    if (typeof v !== "string" || v === "") return;
    const t = parseTime(v);
    if (!t || t.zero) return;
    if (t.ms < EARLIEST_MS || (t.ms === EARLIEST_MS && t.subMs < 0)) {
      this.add(field, `${formatRFC3339(t.ms)} is before ${EARLIEST_TIME.slice(0, 10)}`);
    } else if (t.ms > Date.now() + MAX_CLOCK_AHEAD_MS) {
      this.add(field, `${formatRFC3339(t.ms)} is more than 24h0m0s ahead of this reader's clock`);
    }
  }
}

function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/** No lone surrogate (a JavaScript string that is not valid UTF-16 has no UTF-8 form). */
function wellFormed(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      if (i + 1 >= s.length || (s.charCodeAt(i + 1) & 0xfc00) !== 0xdc00) return false;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) return false;
  }
  return true;
}

function needsSession(t: EventType): boolean {
  return t !== "memory_changed";
}

function needsTurn(t: string | undefined): boolean {
  return t === "turn_started" || t === "turn_ended" || t === "injection_ready";
}

function validateHead(e: Record<string, unknown>, p: Problems): void {
  p.id("id", e["id"], true);
  const type = e["type"] as string | undefined;
  if (type === undefined || type === "") p.add("type", "missing");
  else if (!isType(type)) p.add("type", `unknown event type ${goQuote(type)}`);
  const version = e["version"] as number | undefined;
  if (version === undefined || version === 0) p.add("version", "missing");
  else if (version < 0 || version > SCHEMA_VERSION) {
    p.add("version", `unsupported schema version ${version} (this reader knows up to ${SCHEMA_VERSION})`);
  }
  const at = e["occurred_at"] as string | undefined;
  if (at === undefined || parseTime(at)?.zero) p.add("occurred_at", "missing");
  p.time("occurred_at", at);
  p.id("tenant_id", e["tenant_id"], false);
  p.id("project_id", e["project_id"], true);
  p.id("session_id", e["session_id"], type !== undefined && isType(type) && needsSession(type));
  p.id("turn_id", e["turn_id"], needsTurn(type));
}

type Obj = Record<string, unknown>;

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

function num(v: unknown): number {
  return typeof v === "number" ? v : 0;
}

function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

function validatePayload(type: EventType, pl: Obj, p: Problems): void {
  switch (type) {
    case "turn_started": {
      if (str(pl["text"]) === "") p.add("text", "missing");
      nonEmpty(p, "paths", pl["paths"], "empty path");
      for (const id of Object.keys((pl["project_names"] as Obj | undefined) ?? {})) {
        if (id === "") p.add("project_names", "empty project id");
      }
      const replyTo = str(pl["reply_to"]);
      if (replyTo !== "" && !validSubject(replyTo)) p.add("reply_to", "not a valid subject");
      p.time("reply_by", pl["reply_by"]);
      return;
    }
    case "turn_ended": {
      const msgs = arr(pl["messages"]);
      if (msgs.length === 0) p.add("messages", "missing");
      msgs.forEach((m, i) => {
        const mo = (m ?? {}) as Obj;
        const f = `messages[${i}].`;
        const role = str(mo["role"]);
        switch (role) {
          case "user":
          case "assistant":
            break;
          case "tool": {
            const st = str(mo["tool_status"]);
            if (st === "") p.add(f + "tool_status", "missing");
            else if (st !== "ok" && st !== "failed") p.add(f + "tool_status", `unknown status ${goQuote(st)} (want ok or failed)`);
            break;
          }
          case "":
            p.add(f + "role", "missing");
            break;
          default:
            p.add(f + "role", `unknown role ${goQuote(role)}`);
        }
        arr(mo["tool_calls"]).forEach((c, j) => {
          if (str(((c ?? {}) as Obj)["name"]) === "") p.add(`${f}tool_calls[${j}].name`, "missing");
        });
      });
      nonEmpty(p, "changed_paths", pl["changed_paths"], "empty path");
      nonEmpty(p, "injected_node_ids", pl["injected_node_ids"], "empty id");
      if (num(pl["input_tokens"]) < 0) p.add("input_tokens", "negative");
      return;
    }
    case "session_idle": {
      const at = pl["last_activity"] as string | undefined;
      if (at === undefined || at === "" || parseTime(at)?.zero) p.add("last_activity", "missing");
      p.time("last_activity", at);
      return;
    }
    case "tokens_reported":
      if (num(pl["input_tokens"]) < 0) p.add("input_tokens", "negative");
      if (num(pl["context_window"]) < 0) p.add("context_window", "negative");
      if (utf8Length(str(pl["stack_id"])) > MAX_ID_BYTES) p.add("stack_id", `longer than ${MAX_ID_BYTES} bytes`);
      return;
    case "injection_ready": {
      p.id("in_reply_to", pl["in_reply_to"], true);
      const scores = arr(pl["scores"]);
      const ids = arr(pl["node_ids"]);
      if (scores.length > 0 && scores.length !== ids.length) p.add("scores", `${scores.length} scores for ${ids.length} node ids`);
      return;
    }
    case "memory_changed": {
      const changes = arr(pl["changes"]);
      if (changes.length === 0) p.add("changes", "missing");
      changes.forEach((c, i) => {
        const co = (c ?? {}) as Obj;
        if (str(co["id"]) === "") p.add(`changes[${i}].id`, "missing");
        if (str(co["kind"]) === "") p.add(`changes[${i}].kind`, "missing");
      });
      return;
    }
    case "consolidation_done":
      if (num(pl["up_to"]) < 0) p.add("up_to", "negative");
      if (num(pl["from"]) < 0) p.add("from", "negative");
      if (num(pl["steps"]) < 0) p.add("steps", "negative");
      for (const f of ["stored", "revised", "forgotten", "linked", "duplicates", "held", "restored", "prompt_tokens", "completion_tokens"]) {
        if (num(pl[f]) < 0) p.add(f, "negative");
      }
      return;
    case "compaction_done":
      if (num(pl["up_to"]) < 0) p.add("up_to", "negative");
      return;
  }
}

/** Reports each empty element of a list field with reason. */
function nonEmpty(p: Problems, field: string, v: unknown, reason: string): void {
  arr(v).forEach((s, i) => {
    if (str(s) === "") p.add(`${field}[${i}]`, reason);
  });
}

/** A NATS subject: dot-separated tokens, none empty or a lone wildcard, no whitespace. */
export function validSubject(s: string): boolean {
  if (s === "" || utf8Length(s) > 4096) return false;
  for (const tok of s.split(".")) {
    if (tok === "" || tok === "*" || tok === ">") return false;
    if (/[ \t\r\n\f\v\u0000]/.test(tok)) return false;
  }
  return true;
}

// ------------------------------------------------------------------ time

interface ParsedTime {
  ms: number; // epoch milliseconds (the instant, truncated to the millisecond)
  subMs: number; // nanoseconds beyond the millisecond
  zero: boolean; // Go's zero time, 0001-01-01T00:00:00Z
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|([+-])(\d{2}):(\d{2}))$/;
const ZERO_MS = -62135596800000;

/** Parses an RFC 3339 time as Go's time.Time decodes it from JSON; undefined if it does not. */
export function parseTime(s: string): ParsedTime | undefined {
  const m = RFC3339.exec(s);
  if (!m) return undefined;
  const [y, mo, d, h, mi, se] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i]));
  if (mo! < 1 || mo! > 12 || d! < 1 || d! > daysIn(y!, mo!) || h! > 23 || mi! > 59 || se! > 59) return undefined;
  let offset = 0;
  if (m[8] !== "Z") {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return undefined;
    offset = (oh * 60 + om) * 60_000 * (m[9] === "-" ? -1 : 1);
  }
  const frac = (m[7] ?? "").padEnd(9, "0").slice(0, 9);
  const date = new Date(0);
  date.setUTCFullYear(y!, mo! - 1, d!);
  date.setUTCHours(h!, mi!, se!, Number(frac.slice(0, 3)));
  const ms = date.getTime() - offset;
  const subMs = Number(frac.slice(3));
  return { ms, subMs, zero: ms === ZERO_MS && subMs === 0 };
}

function daysIn(y: number, m: number): number {
  if (m === 2) return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(m) ? 30 : 31;
}

function formatRFC3339(ms: number): string {
  const d = new Date(ms);
  const y = d.getUTCFullYear();
  const pad = (n: number, w = 2) => String(n).padStart(w, "0");
  return `${y < 0 ? "-" + pad(-y, 4) : pad(y, 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}T${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}Z`;
}

/** strconv.Quote's quoting, for the reasons that quote a value. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    switch (ch) {
      case '"':
        out += '\\"';
        continue;
      case "\\":
        out += "\\\\";
        continue;
      case "\x07":
        out += "\\a";
        continue;
      case "\b":
        out += "\\b";
        continue;
      case "\f":
        out += "\\f";
        continue;
      case "\n":
        out += "\\n";
        continue;
      case "\r":
        out += "\\r";
        continue;
      case "\t":
        out += "\\t";
        continue;
      case "\v":
        out += "\\v";
        continue;
    }
    if (cp === 0x20 || /[\p{L}\p{M}\p{N}\p{P}\p{S}]/u.test(ch)) out += ch;
    else if (cp < 0x80) out += "\\x" + cp.toString(16).padStart(2, "0");
    else if (cp < 0x10000) out += "\\u" + cp.toString(16).padStart(4, "0");
    else out += "\\U" + cp.toString(16).padStart(8, "0");
  }
  return out + '"';
}

// ------------------------------------------------------- text and keys

/**
 * The byte checks of Decode before any JSON is read: invalid UTF-8, and a
 * \u escape of a lone surrogate (both would become U+FFFD and merge
 * distinct ids). The reason, or "".
 */
function checkText(b: Uint8Array): string {
  const bad = firstInvalidUTF8(b);
  if (bad >= 0) return `not valid UTF-8 (byte ${bad} is 0x${b[bad]!.toString(16).padStart(2, "0")})`;
  let hasEscape = false;
  for (let i = 0; i + 1 < b.length; i++) {
    if (b[i] === 0x5c && b[i + 1] === 0x75) {
      hasEscape = true;
      break;
    }
  }
  if (!hasEscape) return "";
  let inString = false;
  for (let i = 0; i < b.length; i++) {
    const c = b[i]!;
    if (!inString) {
      if (c === 0x22) inString = true;
      continue;
    }
    if (c === 0x22) {
      inString = false;
    } else if (c === 0x5c) {
      if (i + 1 < b.length && b[i + 1] === 0x75) {
        const r = hex4(b, i + 2);
        if (r >= 0xd800 && r <= 0xdbff) {
          let lo = -1;
          if (i + 7 < b.length && b[i + 6] === 0x5c && b[i + 7] === 0x75) lo = hex4(b, i + 8);
          if (lo < 0xdc00 || lo > 0xdfff) return `lone UTF-16 surrogate escape at byte ${i}`;
          i += 11;
          continue;
        }
        if (r >= 0xdc00 && r <= 0xdfff) return `lone UTF-16 surrogate escape at byte ${i}`;
      }
      i++; // the escaped byte
    }
  }
  return "";
}

function hex4(b: Uint8Array, i: number): number {
  if (i + 4 > b.length) return -1;
  let r = 0;
  for (let k = i; k < i + 4; k++) {
    const c = b[k]!;
    let v: number;
    if (c >= 0x30 && c <= 0x39) v = c - 0x30;
    else if (c >= 0x61 && c <= 0x66) v = c - 0x61 + 10;
    else if (c >= 0x41 && c <= 0x46) v = c - 0x41 + 10;
    else return -1;
    r = (r << 4) | v;
  }
  return r;
}

/** The offset of the first byte that does not start a well-formed UTF-8 sequence (Unicode table 3-7), or -1. */
function firstInvalidUTF8(b: Uint8Array): number {
  let i = 0;
  while (i < b.length) {
    const c = b[i]!;
    if (c < 0x80) {
      i++;
      continue;
    }
    let n = 0;
    let lo = 0x80;
    let hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) n = 1;
    else if (c === 0xe0) (n = 2), (lo = 0xa0);
    else if ((c >= 0xe1 && c <= 0xec) || c === 0xee || c === 0xef) n = 2;
    else if (c === 0xed) (n = 2), (hi = 0x9f);
    else if (c === 0xf0) (n = 3), (lo = 0x90);
    else if (c >= 0xf1 && c <= 0xf3) n = 3;
    else if (c === 0xf4) (n = 3), (hi = 0x8f);
    else return i;
    const b1 = b[i + 1];
    if (b1 === undefined || b1 < lo || b1 > hi) return i;
    for (let k = 2; k <= n; k++) {
      const bk = b[i + k];
      if (bk === undefined || bk < 0x80 || bk > 0xbf) return i;
    }
    i += n + 1;
  }
  return -1;
}

const KNOWN = new Map<string, string>(KNOWN_FIELDS.map((f) => [fold(f), f]));

/** A JSON name folded as Go's encoding/json matches field names (case-insensitively). */
function fold(s: string): string {
  let out = "";
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (cp < 0x80) {
      out += cp >= 0x61 && cp <= 0x7a ? String.fromCharCode(cp - 32) : ch;
      continue;
    }
    const f = ch.toLowerCase().toUpperCase();
    out += [...f].length === 1 ? f : ch;
  }
  return out;
}

interface Frame {
  isObj: boolean;
  isMap: boolean;
  expect: boolean; // an object expecting a key
  idx: number; // an array's current index
  key: string; // an object's current key
  keys: Set<string>;
}

/**
 * Decode's check of keys: a key twice in one object (two readers would see
 * two events), and a key that differs from a field's name only in case
 * (Go's JSON decoder would take it for the field). Keys of a map
 * (payload.project_names) are data: only exact duplicates are refused.
 */
function checkKeys(b: Uint8Array): FieldProblem | undefined {
  const stack: Frame[] = [];
  const valueDone = () => {
    const f = stack[stack.length - 1];
    if (!f) return;
    if (f.isObj) f.expect = true;
    else f.idx++;
  };
  for (let i = 0; i < b.length; i++) {
    const c = b[i]!;
    switch (c) {
      case 0x7b: // {
      case 0x5b: {
        // [
        const parent = stack[stack.length - 1];
        const isMap = parent !== undefined && parent.isObj && MAP_FIELDS.includes(parent.key);
        stack.push({ isObj: c === 0x7b, isMap, expect: c === 0x7b, idx: 0, key: "", keys: new Set() });
        break;
      }
      case 0x7d: // }
      case 0x5d: // ]
        if (stack.length === 0) return undefined;
        stack.pop();
        valueDone();
        break;
      case 0x22: {
        // "
        let j = i + 1;
        let esc = false;
        for (; j < b.length; j++) {
          if (b[j] === 0x5c) {
            esc = true;
            j++;
            continue;
          }
          if (b[j] === 0x22) break;
        }
        if (j >= b.length) return undefined;
        const start = i;
        i = j;
        const f = stack[stack.length - 1];
        if (!f) continue;
        if (!f.isObj || !f.expect) {
          valueDone();
          continue;
        }
        f.expect = false;
        let key: string;
        try {
          key = esc ? (JSON.parse(utf8.decode(b.subarray(start, j + 1))) as string) : utf8.decode(b.subarray(start + 1, j));
        } catch {
          return undefined; // the decoder reports a bad escape
        }
        const id = f.isMap ? key : fold(key);
        if (!f.isMap) {
          const name = KNOWN.get(id);
          if (name !== undefined && name !== key) {
            return { field: keyPath(stack, key), reason: `spelled otherwise than the field ${goQuote(name)} (names are case-sensitive here)` };
          }
        }
        if (f.keys.has(id)) return { field: keyPath(stack, key), reason: "duplicate key (an object names each key once)" };
        f.keys.add(id);
        f.key = key;
        break;
      }
      case 0x2c:
      case 0x3a:
      case 0x20:
      case 0x09:
      case 0x0d:
      case 0x0a:
        break;
      default:
        // A number, true, false or null: skip to its end.
        while (i + 1 < b.length && !",}] \t\r\n".includes(String.fromCharCode(b[i + 1]!))) i++;
        valueDone();
    }
  }
  return undefined;
}

function keyPath(stack: Frame[], key: string): string {
  let out = "";
  for (const f of stack.slice(0, -1)) {
    if (!f.isObj) out += `[${f.idx}]`;
    else if (out.length > 0) out += "." + f.key;
    else out += f.key;
  }
  return out.length > 0 ? out + "." + key : key;
}
