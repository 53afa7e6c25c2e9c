// Subject tokens and subjects: the same as pkg/events (EncodeToken,
// DecodeToken, Subjects, TenantInbox), checked by the shared vectors.

import { DEFAULT_PREFIX, INPUT_TYPES, TENANT_INBOX_ROOT, type EventType, type InputType, type OutputType } from "./contract.js";

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });
const HEX = "0123456789ABCDEF";

/** A byte a token keeps as it is: letters, digits and - _ : @. */
function tokenSafe(c: number): boolean {
  return (
    (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) ||
    c === 0x2d || c === 0x5f || c === 0x3a || c === 0x40
  );
}

/**
 * Turns any id into one valid subject token, reversibly: letters, digits and
 * - _ : @ stay as they are, every other byte of its UTF-8 is %XX (upper-case
 * hex), and the empty id is "%".
 */
export function encodeToken(id: string): string {
  if (id === "") return "%";
  const b = encoder.encode(id);
  let out = "";
  for (const c of b) {
    out += tokenSafe(c) ? String.fromCharCode(c) : "%" + HEX[c >> 4] + HEX[c & 15];
  }
  return out;
}

/** Thrown for a token or subject that does not decode. */
export class InvalidSubjectError extends Error {
  constructor(message: string) {
    super("events: invalid subject: " + message);
    this.name = "InvalidSubjectError";
  }
}

function unhex(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

/** Reverses encodeToken; only its canonical form decodes. */
export function decodeToken(tok: string): string {
  if (tok === "%") return "";
  if (tok === "") throw new InvalidSubjectError("empty token");
  const raw = encoder.encode(tok);
  const out: number[] = [];
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (tokenSafe(c)) {
      out.push(c);
      continue;
    }
    if (c !== 0x25 || i + 2 >= raw.length) {
      throw new InvalidSubjectError(`token ${JSON.stringify(tok)}: bad escape at ${i}`);
    }
    const hi = unhex(raw[i + 1]!);
    const lo = unhex(raw[i + 2]!);
    if (hi < 0 || lo < 0) throw new InvalidSubjectError(`token ${JSON.stringify(tok)}: bad escape at ${i}`);
    const v = (hi << 4) | lo;
    if (tokenSafe(v)) throw new InvalidSubjectError(`token ${JSON.stringify(tok)}: ${JSON.stringify(String.fromCharCode(v))} must not be escaped`);
    out.push(v);
    i += 2;
  }
  try {
    return decoder.decode(new Uint8Array(out));
  } catch {
    throw new InvalidSubjectError(`token ${JSON.stringify(tok)}: not UTF-8`);
  }
}

/**
 * The reply-inbox prefix of a tenant: "_INBOX" for the default tenant,
 * "_INBOX_TENANT.<tenant token>" for any other. A tenant's credentials may
 * receive only there, and Engram answers a tenant's requests only there.
 */
export function tenantInbox(tenant: string | undefined): string {
  if (!tenant) return "_INBOX";
  return TENANT_INBOX_ROOT + "." + encodeToken(tenant);
}

/** Builds Engram's subjects under a prefix ("engram" by default). */
export class Subjects {
  readonly prefix: string;
  constructor(prefix: string = DEFAULT_PREFIX) {
    if (!/^[^.\s*>]+(\.[^.\s*>]+)*$/.test(prefix)) {
      throw new InvalidSubjectError(`prefix ${JSON.stringify(prefix)}: want dot-separated tokens without spaces or wildcards`);
    }
    this.prefix = prefix;
  }
  /** <prefix>.in.<type>.<tenant>.<project>.<session> */
  in(type: InputType, tenant: string | undefined, project: string, session: string): string {
    return `${this.prefix}.in.${type}.${encodeToken(tenant ?? "")}.${encodeToken(project)}.${encodeToken(session)}`;
  }
  /** <prefix>.out.<type>.<tenant>.<project>[.<session>] */
  out(type: OutputType, tenant: string | undefined, project: string, session?: string): string {
    let s = `${this.prefix}.out.${type}.${encodeToken(tenant ?? "")}.${encodeToken(project)}`;
    if (session) s += "." + encodeToken(session);
    return s;
  }
  /** The subject of an event, input or output by its type. */
  for(type: EventType, tenant: string | undefined, project: string, session?: string): string {
    return (INPUT_TYPES as readonly string[]).includes(type)
      ? this.in(type as InputType, tenant, project, session ?? "")
      : this.out(type as OutputType, tenant, project, session);
  }
  /** <prefix>.api.context.<tenant>.<project>.<session> */
  contextApi(tenant: string | undefined, project: string, session: string): string {
    return `${this.prefix}.api.context.${encodeToken(tenant ?? "")}.${encodeToken(project)}.${encodeToken(session)}`;
  }
  /** <prefix>.dlq.<consumer> */
  dlq(consumer: string): string {
    return `${this.prefix}.dlq.${encodeToken(consumer)}`;
  }
}
