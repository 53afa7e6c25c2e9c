// The platform client: connect with the credentials of an Engram role,
// inject memory into a turn (never blocking it), report turns, ask for the
// context, read the output events. pkg/events' Client is the reference.

import { readFile } from "node:fs/promises";
import { isIP } from "node:net";
import {
  connect as natsConnect, createInbox, credsAuthenticator, headers, nkeyAuthenticator, tokenAuthenticator,
  usernamePasswordAuthenticator,
  type Authenticator, type Msg, type NatsConnection, type NodeConnectionOptions, type Subscription,
} from "@nats-io/transport-node";
import { jetstream, type JetStreamClient } from "@nats-io/jetstream";
import {
  DEFAULT_CONTEXT_TIMEOUT_MS, DEFAULT_INJECT_TIMEOUT_MS, DEFAULT_MAX_EVENT_BYTES, ENGRAM_INBOX_ROOT, HEADERS,
  SCHEMA_VERSION, TENANT_INBOX_ROOT,
  type AnyEnvelope, type ContextMessage, type ContextReply, type Envelope, type EventType, type InputType,
  type OutputType, type PayloadOf, type SessionIdle, type TokensReported, type TurnEnded, type TurnStarted,
} from "./contract.js";
import { decodeEvent, encodeEvent, isInputType, newEvent, type Ref } from "./event.js";
import { decodeToken, encodeToken, Subjects, tenantInbox } from "./tokens.js";

/** An input event over the client's maximum size: nothing was sent. */
export class EventTooLargeError extends Error {
  constructor(type: string, id: string, size: number, max: number) {
    super(`events: event too large: ${type} ${id} is ${size} bytes, the maximum is ${max}`);
    this.name = "EventTooLargeError";
  }
}

/** No memory block came by the deadline: the turn runs without memory. */
export class InjectTimeoutError extends Error {
  constructor(ms: number) {
    super(`events: injection timed out after ${ms} ms`);
    this.name = "InjectTimeoutError";
  }
}

/** What the client does: subject prefix, default deadlines, size limit. */
export interface ClientOptions {
  /** The subject prefix ("engram"). */
  prefix?: string;
  /** How long inject waits for the block by default (ms; 1500). */
  injectTimeoutMs?: number;
  /** How long context waits for each page (ms; 5000). */
  contextTimeoutMs?: number;
  /**
   * The largest input event body sent (bytes; 524288, ENGRAM_IN's default;
   * -1: no limit here). Match the deployment's ENGRAM_MAX_EVENT_BYTES.
   */
  maxEventBytes?: number;
  /**
   * The connection's reply-inbox prefix, when it is not what the user name
   * says (see connect): the client's replies are waited for under it.
   */
  inboxPrefix?: string;
}

/** How to reach Engram's NATS: every credential kind its roles use, and TLS. */
export interface ConnectOptions extends ClientOptions {
  /** NATS URL(s); default nats://127.0.0.1:4222 (a local `engram serve`). */
  servers?: string | string[];
  /** A NATS user and its password: platform, tenant-<tenant token>, outputs, ... */
  user?: string;
  password?: string;
  /** A NATS token. */
  token?: string;
  /** A file holding an nkey seed (SU...). */
  nkeyFile?: string;
  /** A .creds file (a user JWT and its nkey seed). */
  credsFile?: string;
  /** TLS: the CA of the server's certificate and, for mutual TLS, a client certificate and key (PEM files). */
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
  /**
   * The tenant these credentials speak for, when the user name does not say
   * it (a token, an nkey or a creds file): the connection's replies then
   * come on the tenant's inbox, the only one its permissions allow.
   */
  tenant?: string;
  /** The connection's name on the server. */
  name?: string;
  /** How long to try to connect (ms; 5000). */
  connectTimeoutMs?: number;
  /** Reconnect after a lost connection (true). */
  reconnect?: boolean;
}

/**
 * The reply-inbox prefix a connection as user must use (internal/natsauth
 * ClientInbox): a named tenant's user "tenant-<token>" its tenant's inbox,
 * Engram's role users their own, anyone else _INBOX.
 */
export function clientInbox(user: string | undefined, tenant?: string): string {
  if (user?.startsWith("tenant-")) {
    try {
      const t = decodeToken(user.slice("tenant-".length));
      if (t !== "") return tenantInbox(t);
    } catch {
      // not a tenant's user name
    }
  }
  if (user && ["outputs", "setup", "injector", "extractor", "consolidator", "compactor", "idle"].includes(user)) {
    return `${ENGRAM_INBOX_ROOT}.${user}`;
  }
  return tenantInbox(tenant);
}

/** Connects to Engram's NATS and returns a client that owns the connection. */
export async function connect(opts: ConnectOptions = {}): Promise<EngramClient> {
  const methods = [
    opts.user !== undefined || opts.password !== undefined ? "user/password" : "",
    opts.token !== undefined ? "token" : "",
    opts.nkeyFile !== undefined ? "nkey" : "",
    opts.credsFile !== undefined ? "creds" : "",
  ].filter(Boolean);
  if (methods.length > 1) throw new Error(`engram: connect: give only one of ${methods.join(", ")}`);
  if ((opts.user === undefined) !== (opts.password === undefined)) {
    throw new Error("engram: connect: a user needs its password and a password its user");
  }
  let authenticator: Authenticator | undefined;
  if (opts.user !== undefined) authenticator = usernamePasswordAuthenticator(opts.user, opts.password);
  if (opts.token !== undefined) authenticator = tokenAuthenticator(opts.token);
  if (opts.nkeyFile !== undefined) {
    const seed = new TextEncoder().encode((await readFile(opts.nkeyFile, "utf8")).trim());
    authenticator = nkeyAuthenticator(seed);
  }
  if (opts.credsFile !== undefined) authenticator = credsAuthenticator(new Uint8Array(await readFile(opts.credsFile)));
  const inboxPrefix = opts.inboxPrefix ?? clientInbox(opts.user, opts.tenant);
  const nopts: NodeConnectionOptions = {
    servers: opts.servers ?? "nats://127.0.0.1:4222",
    inboxPrefix,
    name: opts.name ?? "engram-client-ts",
    timeout: opts.connectTimeoutMs ?? 5000,
    reconnect: opts.reconnect ?? true,
  };
  if (authenticator) nopts.authenticator = authenticator;
  if (opts.tls && (opts.tls.caFile || opts.tls.certFile || opts.tls.keyFile)) {
    const t: Record<string, string> = {};
    if (opts.tls.caFile) t["caFile"] = opts.tls.caFile;
    if (opts.tls.certFile) t["certFile"] = opts.tls.certFile;
    if (opts.tls.keyFile) t["keyFile"] = opts.tls.keyFile;
    // nats.js sends no server name for a server given by its IP address,
    // and Node then checks the certificate against "localhost": with one
    // server at an IP address, check it against that address (its
    // certificate's IP SAN), as nats.go does.
    const servers = Array.isArray(nopts.servers) ? nopts.servers : [nopts.servers];
    const host = servers.length === 1 ? hostOf(servers[0]!) : "";
    if (isIP(host)) t["host"] = host;
    nopts.tls = t;
  }
  const nc = await natsConnect(nopts);
  return new EngramClient(nc, { ...opts, inboxPrefix }, true);
}

function hostOf(url: string): string {
  try {
    const u = new URL(url.includes("://") ? url : "nats://" + url);
    return u.hostname.replace(/^\[|\]$/g, "");
  } catch {
    return "";
  }
}

/** The memory block for a turn. */
export interface Injection {
  /** The id of the turn_started event that asked. */
  eventId: string;
  /** The text to prepend to the turn's prompt; may be empty. */
  block: string;
  /** The memories the block carries. */
  nodeIds: string[];
  /** Their retrieval scores (0 for standing instructions); may be empty. */
  scores: number[];
}

/** What a platform sends its model of the earlier turns. */
export interface Context {
  /** The summary block (preamble, summary, end marker) to send as one message; empty when not compacted. */
  block: string;
  /** The summary alone. */
  summary: string;
  /** The last transcript message id the summary covers (0: none). */
  upTo: number;
  /** The stored messages after the summary, oldest first. */
  messages: ContextMessage[];
  /** An estimate of block and messages (characters / 4). */
  tokens: number;
}

/** Options of one inject. */
export interface InjectOptions {
  /** When to stop waiting: ms from now, or a Date (default: the client's inject timeout, 1.5 s). */
  deadline?: number | Date;
  /** Told why a turn got no block (no answer in time, no connection, the stream refused the event). */
  onMiss?: (reason: Error) => void;
}

/** Options of the output events' iterator. */
export interface OutputsOptions {
  /** Only these types (default: every output type). */
  types?: OutputType[];
  /** Stops the iteration. */
  signal?: AbortSignal;
  /** Told of an output event that does not decode (it is skipped). */
  onInvalid?: (err: Error, msg: Msg) => void;
}

/** Live output events: iterate with for await; stop() (or break) ends the subscription. */
export interface OutputStream extends AsyncIterable<AnyEnvelope> {
  stop(): Promise<void>;
}

interface ReplySub {
  sub: Subscription;
  prefix: string; // "<inbox>.": a turn's reply subject is prefix + token
}

/**
 * A client of Engram for a chat platform. Safe to share: keep one per
 * process. Built by connect, or on a connection of your own with
 * EngramClient.fromConnection.
 */
export class EngramClient {
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly subjects: Subjects;
  readonly inboxPrefix: string;
  private readonly injectTimeoutMs: number;
  private readonly contextTimeoutMs: number;
  private readonly maxEventBytes: number;
  private readonly owned: boolean;
  private readonly replySubs = new Map<string, ReplySub>();
  private readonly waiting = new Map<string, (m: Msg) => void>();
  private seq = 0;

  constructor(nc: NatsConnection, opts: ClientOptions = {}, owned = false) {
    this.nc = nc;
    this.js = jetstream(nc);
    this.subjects = new Subjects(opts.prefix);
    this.inboxPrefix = opts.inboxPrefix ?? "_INBOX";
    this.injectTimeoutMs = opts.injectTimeoutMs ?? DEFAULT_INJECT_TIMEOUT_MS;
    this.contextTimeoutMs = opts.contextTimeoutMs ?? DEFAULT_CONTEXT_TIMEOUT_MS;
    this.maxEventBytes = opts.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
    this.owned = owned;
    if (!(this.injectTimeoutMs > 0)) throw new Error(`engram: inject timeout ${this.injectTimeoutMs} ms must be positive`);
    if (!(this.contextTimeoutMs > 0)) throw new Error(`engram: context timeout ${this.contextTimeoutMs} ms must be positive`);
    if (this.maxEventBytes === 0 || this.maxEventBytes < -1) {
      throw new Error(`engram: max event bytes ${this.maxEventBytes}: want > 0 or -1`);
    }
  }

  /** A client on a connection you own (close() leaves it open). Give inboxPrefix when the connection set one. */
  static fromConnection(nc: NatsConnection, opts: ClientOptions = {}): EngramClient {
    return new EngramClient(nc, opts, false);
  }

  /**
   * The inbox subject of a request of tenant: the connection's own when it
   * is the tenant's inbox, else one under the tenant's (where Engram
   * answers that tenant, and only there).
   */
  private inboxFor(tenant: string | undefined): string {
    const own = createInbox(this.inboxPrefix);
    if (this.ownInbox(tenant)) return own;
    return tenantInbox(tenant) + "." + own.slice(own.lastIndexOf(".") + 1);
  }

  private ownInbox(tenant: string | undefined): boolean {
    const p = this.inboxPrefix.replace(/\.$/, "");
    if (tenant) return p === tenantInbox(tenant) || p.startsWith(tenantInbox(tenant) + ".");
    return !(p === TENANT_INBOX_ROOT || p.startsWith(TENANT_INBOX_ROOT + ".") || p === ENGRAM_INBOX_ROOT || p.startsWith(ENGRAM_INBOX_ROOT + "."));
  }

  /** The reply subscription of tenant (made on its first inject): one wildcard subscription, answers routed by their last token. */
  private replySub(tenant: string | undefined): ReplySub {
    const key = tenant ?? "";
    let rs = this.replySubs.get(key);
    if (rs && !rs.sub.isClosed()) return rs;
    const prefix = this.inboxFor(tenant) + ".";
    const sub = this.nc.subscribe(prefix + "*", {
      callback: (err, m) => {
        if (err) return;
        const token = m.subject.slice(m.subject.lastIndexOf(".") + 1);
        this.waiting.get(token)?.(m);
      },
    });
    rs = { sub, prefix };
    this.replySubs.set(key, rs);
    return rs;
  }

  /**
   * Encodes e after the checks a reader makes (InvalidEventError), refuses
   * an input event over the size limit (EventTooLargeError), and publishes
   * it to JetStream with its headers, waiting for the stream's ack.
   */
  async publish(e: Envelope, timeoutMs?: number): Promise<void> {
    const data = this.encode(e);
    const h = headers();
    h.set(HEADERS.type, e.type);
    h.set(HEADERS.version, String(e.version));
    const subject = this.subjects.for(e.type, e.tenant_id, e.project_id, e.session_id);
    const opts: { msgID: string; headers: typeof h; timeout?: number } = { msgID: e.id, headers: h };
    if (timeoutMs !== undefined) opts.timeout = Math.max(1, Math.floor(timeoutMs));
    await this.js.publish(subject, data, opts);
  }

  private encode(e: Envelope): Uint8Array {
    const data = encodeEvent(e);
    if (this.maxEventBytes > 0 && isInputType(e.type) && data.length > this.maxEventBytes) {
      throw new EventTooLargeError(e.type, e.id, data.length, this.maxEventBytes);
    }
    return data;
  }

  private async publishNew<T extends InputType>(type: T, ref: Ref, payload: PayloadOf[T]): Promise<Envelope<T>> {
    const e = newEvent(type, ref, payload);
    await this.publish(e);
    return e;
  }

  /** Publishes turn_started without waiting for the block (see inject). */
  publishTurnStarted(ref: Ref, p: TurnStarted): Promise<Envelope<"turn_started">> {
    return this.publishNew("turn_started", ref, p);
  }
  /** Publishes turn_ended: the turn's messages, for the extractor. */
  publishTurnEnded(ref: Ref, p: TurnEnded): Promise<Envelope<"turn_ended">> {
    return this.publishNew("turn_ended", ref, p);
  }
  /** Publishes tokens_reported: the conversation's size, for the compactor. */
  publishTokensReported(ref: Ref, p: TokensReported): Promise<Envelope<"tokens_reported">> {
    return this.publishNew("tokens_reported", ref, p);
  }
  /** Publishes session_idle (e.g. when the user closes a chat). */
  publishSessionIdle(ref: Ref, p: SessionIdle): Promise<Envelope<"session_idle">> {
    return this.publishNew("session_idle", ref, p);
  }

  /**
   * Publishes turn_started with a reply inbox of the turn's tenant and its
   * deadline, and resolves with the memory block, or with null when none
   * came by the deadline (1.5 s by default) or Engram could not be asked:
   * a turn is never blocked by Engram. An invalid or too large event
   * rejects (a bug of the caller), before anything is sent.
   */
  async inject(ref: Ref, turn: TurnStarted, opts: InjectOptions = {}): Promise<Injection | null> {
    const deadline =
      opts.deadline instanceof Date ? opts.deadline.getTime() : Date.now() + (opts.deadline ?? this.injectTimeoutMs);
    const miss = (reason: Error): null => {
      opts.onMiss?.(reason);
      return null;
    };
    let rs: ReplySub;
    try {
      rs = this.replySub(ref.tenant);
    } catch (err) {
      return miss(err as Error);
    }
    const token = (++this.seq).toString(36);
    const e = newEvent("turn_started", ref, { ...turn, reply_to: rs.prefix + token, reply_by: new Date(deadline).toISOString() });
    const data = this.encode(e); // throws before anything is sent
    let timer: NodeJS.Timeout | undefined;
    try {
      return await new Promise<Injection | null>((resolve) => {
        this.waiting.set(token, (m) => {
          let r: AnyEnvelope;
          try {
            r = decodeEvent(m.data);
          } catch {
            return; // not ours to judge: keep waiting for a valid answer
          }
          if (r.type !== "injection_ready" || r.payload.in_reply_to !== e.id) return;
          resolve({ eventId: e.id, block: r.payload.block ?? "", nodeIds: r.payload.node_ids ?? [], scores: r.payload.scores ?? [] });
        });
        const wait = Math.max(0, deadline - Date.now());
        timer = setTimeout(() => resolve(miss(new InjectTimeoutError(wait))), wait);
        const h = headers();
        h.set(HEADERS.type, e.type);
        h.set(HEADERS.version, String(e.version));
        this.js
          .publish(this.subjects.in("turn_started", ref.tenant, ref.project, ref.session ?? ""), data, {
            msgID: e.id, headers: h, timeout: Math.max(1, deadline - Date.now()),
          })
          .catch((err: Error) => resolve(miss(new Error(`events: inject: ${err.message}`, { cause: err }))));
      });
    } finally {
      clearTimeout(timer);
      this.waiting.delete(token);
    }
  }

  /**
   * Asks the context service (the compactor) what to send the model of a
   * session's earlier turns: the summary block and the messages after it,
   * every page. Null when no service answered in time or it failed: send
   * the conversation as the platform has it.
   */
  async context(ref: Ref, opts: { onMiss?: (reason: Error) => void } = {}): Promise<Context | null> {
    if (!ref.project || !ref.session) throw new Error("events: context: project and session are required");
    const subject = this.subjects.contextApi(ref.tenant, ref.project, ref.session);
    const miss = (reason: Error): null => {
      opts.onMiss?.(reason);
      return null;
    };
    const out: Context = { block: "", summary: "", upTo: 0, messages: [], tokens: 0 };
    let afterId = 0;
    for (let page = 0; ; page++) {
      const body: { tenant_id?: string; after_id?: number } = {};
      if (ref.tenant) body.tenant_id = ref.tenant;
      if (afterId > 0) body.after_id = afterId;
      let m: Msg;
      try {
        const h = headers();
        h.set(HEADERS.version, String(SCHEMA_VERSION));
        const data = new TextEncoder().encode(JSON.stringify(body));
        m = this.ownInbox(ref.tenant)
          ? await this.nc.request(subject, data, { timeout: this.contextTimeoutMs, headers: h })
          : await this.nc.request(subject, data, { timeout: this.contextTimeoutMs, headers: h, noMux: true, reply: this.inboxFor(ref.tenant) });
      } catch (err) {
        return miss(new Error(`events: context unavailable: ${subject}: ${(err as Error).message}`, { cause: err }));
      }
      let r: ContextReply;
      try {
        r = JSON.parse(new TextDecoder().decode(m.data)) as ContextReply;
      } catch (err) {
        return miss(new Error(`events: context unavailable: undecodable reply: ${(err as Error).message}`));
      }
      if (r.error) return miss(new Error(`events: context unavailable: ${r.error}`));
      if (page === 0) {
        out.block = r.block ?? "";
        out.summary = r.summary ?? "";
        out.upTo = r.up_to ?? 0;
        out.tokens = r.tokens ?? 0;
      }
      out.messages.push(...(r.messages ?? []));
      if (!r.more) return out;
      if ((r.last_id ?? 0) <= afterId) return miss(new Error(`events: context unavailable: the service's paging did not advance (last id ${r.last_id})`));
      afterId = r.last_id!;
    }
  }

  /**
   * The output events of a project (of every session, and its project-level
   * memory_changed), or of one session, as they are published: for a
   * platform that reacts to memory_changed. Needs a user that may read
   * them: the outputs role (it reads every tenant's outputs and nothing
   * else). Events that do not decode are skipped (onInvalid).
   */
  outputs(where: { tenant?: string; project: string; session?: string }, opts: OutputsOptions = {}): OutputStream {
    const types = opts.types && opts.types.length > 0 ? opts.types : ["*"];
    const base = (t: string) => `${this.subjects.prefix}.out.${t}.${encodeToken(where.tenant ?? "")}.${encodeToken(where.project)}`;
    const subjects: string[] = [];
    for (const t of types) {
      if (where.session) subjects.push(base(t) + "." + encodeToken(where.session));
      else subjects.push(base(t), base(t) + ".*");
    }
    const queue: AnyEnvelope[] = [];
    let wake: (() => void) | undefined;
    let failure: Error | undefined;
    let done = false;
    const subs: Subscription[] = [];
    const notify = () => {
      const w = wake;
      wake = undefined;
      w?.();
    };
    for (const subject of subjects) {
      const sub = this.nc.subscribe(subject, {
        callback: (err, m) => {
          if (err) {
            failure ??= err;
            notify();
            return;
          }
          try {
            queue.push(decodeEvent(m.data));
          } catch (e) {
            opts.onInvalid?.(e as Error, m);
            return;
          }
          notify();
        },
      });
      sub.closed.then((err) => {
        if (err) failure ??= err;
        notify();
      });
      subs.push(sub);
    }
    const stop = async () => {
      if (done) return;
      done = true;
      for (const s of subs) if (!s.isClosed()) s.unsubscribe();
      notify();
    };
    opts.signal?.addEventListener("abort", () => void stop(), { once: true });
    if (opts.signal?.aborted) void stop();
    return {
      stop,
      [Symbol.asyncIterator]: () => ({
        next: async (): Promise<IteratorResult<AnyEnvelope>> => {
          for (;;) {
            if (queue.length > 0) return { value: queue.shift()!, done: false };
            if (failure) {
              const f = failure;
              await stop();
              throw f;
            }
            if (done) return { value: undefined, done: true };
            await new Promise<void>((r) => (wake = r));
          }
        },
        return: async (): Promise<IteratorResult<AnyEnvelope>> => {
          await stop();
          return { value: undefined, done: true };
        },
      }),
    };
  }

  /** Ends the reply subscriptions; closes the connection when connect made it. */
  async close(): Promise<void> {
    for (const rs of this.replySubs.values()) if (!rs.sub.isClosed()) rs.sub.unsubscribe();
    this.replySubs.clear();
    if (this.owned && !this.nc.isClosed()) await this.nc.close();
  }
}

export type { EventType };
