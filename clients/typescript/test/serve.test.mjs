// The client against a real `engram serve` (started here, with the
// credentials it generates): a whole platform turn loop, the outputs
// reader, the shared vectors through the real decoder, a tenant, refused
// credentials, size and validation errors, and a turn that gets no block
// because serve is gone.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import path from "node:path";
import { jetstream } from "@nats-io/jetstream";
import { connect as natsConnect } from "@nats-io/transport-node";
import { connect, EventTooLargeError, InvalidEventError, Subjects } from "../dist/index.js";
import { bodyOf, repo, vectors } from "./helpers.mjs";
import { dirs, engram, needsServe, startServe, waitFor } from "./engram.mjs";

const run = promisify(execFile);
const TENANT = "acme corp";
// The scripted model's summary (client_test.go).
const SUMMARY = '## Active task\n"How do we deploy the web app?"\n\n## Goal\nDeploy the web app through the release workflow.';

describe("against engram serve", { skip: needsServe() }, () => {
  let d, serve, tenantPassword;
  const clients = [];
  const open = async (opts) => {
    const c = await connect({ servers: serve.url, ...opts });
    clients.push(c);
    return c;
  };

  before(async () => {
    d = dirs();
    // Memories of the default tenant (examples/graph.jsonl: acme/web's
    // standing instructions and decisions), imported before serve holds
    // the store.
    await engram(d.dataDir, d.configDir, ["memory", "import", path.join(repo, "examples", "graph.jsonl")]);
    const out = await engram(d.dataDir, d.configDir, ["tenant", "add", TENANT]);
    tenantPassword = /ENGRAM_NATS_PASSWORD=(\S+)/.exec(out)[1];
    // Debug logs (the Go test prints them when a test fails): the runners'
    // waits with their reasons and every redelivery, so a slow turn loop
    // says where its time went.
    serve = await startServe(d.dataDir, d.configDir, { ENGRAM_COMPACT_KEEP_RECENT: "2", ENGRAM_LOG_LEVEL: "debug" });
  });

  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await serve?.stop();
    // The Go test shows serve's log when a test failed.
    if (serve && process.env.ENGRAM_TS_SERVE_LOG) writeFileSync(process.env.ENGRAM_TS_SERVE_LOG, serve.log());
    d?.cleanup();
  });

  // The file the agent reads each turn: long enough that a summary makes
  // the context smaller (a compaction that cannot shrink it is not done).
  const DEPLOY_DOC = "# Deploying\n" + "Tag a release vX.Y.Z on main; the release workflow builds the image, runs the migration and deploys.\n".repeat(12);

  test("a whole platform turn loop: inject, turn_ended, tokens_reported, context, and the outputs", async () => {
    const platform = await open({ user: "platform", password: serve.creds.platform });
    const reader = await open({ user: "outputs", password: serve.creds.outputs });
    const ref = { project: "acme/web", session: "chat ts 1" };
    const seen = [];
    const stream = reader.outputs({ project: ref.project });
    const reading = (async () => {
      for await (const e of stream) seen.push(e);
    })();
    await reader.nc.flush(); // the subscriptions exist before the first turn

    const asked = [];
    for (let i = 1; i <= 3; i++) {
      const turn = { ...ref, turn: `t${i}` };
      const question = "How do we deploy the web app, and which package manager do we use?";
      const inj = await platform.inject(turn, { text: question }, { deadline: 10_000 });
      assert.ok(inj, `turn ${i}: no block`);
      assert.match(inj.eventId, new RegExp(vectors.id_pattern));
      assert.match(inj.block, /release workflow|pnpm/, `turn ${i}: the block lacks the imported memories:\n${inj.block}`);
      assert.ok(inj.nodeIds.length > 0 && inj.nodeIds.length === inj.scores.length);
      asked.push(inj.eventId);
      const ended = await platform.publishTurnEnded(turn, {
        messages: [
          { role: "user", content: question },
          { role: "assistant", content: "Let me check.", tool_calls: [{ id: `c${i}`, name: "read_file", arguments: '{"path":"docs/deploy.md"}' }] },
          { role: "tool", content: DEPLOY_DOC, tool_name: "read_file", tool_call_id: `c${i}`, tool_status: "ok" },
          { role: "assistant", content: `Answer ${i}: tag vX.Y.Z; the release workflow deploys. Use pnpm.` },
        ],
        input_tokens: 1000 * i,
        injected_node_ids: inj.nodeIds,
      });
      assert.equal(ended.type, "turn_ended");
    }
    await platform.publishTokensReported(ref, { input_tokens: 3000, context_window: 8000, force: true });

    const done = await waitFor("compaction_done", () => seen.find((e) => e.type === "compaction_done" && e.session_id === ref.session));
    assert.ok(done.payload.up_to > 0);
    for (const id of asked) {
      await waitFor(`injection_ready of ${id}`, () => seen.find((e) => e.type === "injection_ready" && e.payload.in_reply_to === id));
    }
    // The transcript is stored by its own consumer: the last turn may come
    // after the compaction.
    const last = "Answer 3: tag vX.Y.Z; the release workflow deploys. Use pnpm.";
    const ctx = await waitFor("the last turn in the context", async () => {
      const c = await platform.context(ref);
      return c?.messages.at(-1)?.content === last ? c : undefined;
    });
    assert.ok(ctx.block.includes(SUMMARY), `the context block lacks the summary:\n${ctx.block}`);
    assert.equal(ctx.summary.trim(), SUMMARY);
    assert.equal(ctx.upTo, done.payload.up_to);
    assert.ok(ctx.messages.length >= 1 && ctx.messages.every((m) => m.id > ctx.upTo));
    assert.ok(ctx.tokens > 0);
    await stream.stop();
    await reading;
  });

  test("the example in examples/typescript runs its turns", async () => {
    const example = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "examples", "turn-loop.mjs");
    const { stdout } = await run(process.execPath, [example, "How do we deploy the web app?", "Which package manager do we use?"], {
      env: { ...process.env, ENGRAM_NATS_URL: serve.url, ENGRAM_NATS_USER: "platform", ENGRAM_NATS_PASSWORD: serve.creds.platform },
      timeout: 60_000,
    });
    assert.match(stdout, /^turn t1: memory block of [1-9]\d* memories, \d+ messages sent$/m, stdout);
    assert.match(stdout, /release workflow|pnpm/, stdout);
    assert.match(stdout, /^turn t2: memory block of [1-9]\d* memories/m, stdout);
  });

  test("a published event: its subject, id, time and headers", async () => {
    const admin = await natsConnect({ servers: serve.url, user: "admin", pass: serve.creds.admin, inboxPrefix: "_INBOX_ENGRAM.cli" });
    try {
      const platform = await open({ user: "platform", password: serve.creds.platform });
      const ref = { project: "acme/web", session: "chat 42/b" };
      const sub = admin.subscribe(new Subjects().in("tokens_reported", "", ref.project, ref.session), { max: 1 });
      await admin.flush();
      const before = Date.now();
      const e = await platform.publishTokensReported(ref, { input_tokens: 42 });
      let got;
      for await (const m of sub) got = m;
      assert.equal(got.subject, "engram.in.tokens_reported.%.acme%2Fweb.chat%2042%2Fb");
      assert.match(e.id, new RegExp(vectors.id_pattern));
      assert.equal(got.headers.get("Nats-Msg-Id"), e.id);
      assert.equal(got.headers.get("Engram-Type"), "tokens_reported");
      assert.equal(got.headers.get("Engram-Version"), "1");
      const body = JSON.parse(new TextDecoder().decode(got.data));
      assert.deepEqual(body, { id: e.id, type: "tokens_reported", version: 1, occurred_at: e.occurred_at, project_id: "acme/web", session_id: "chat 42/b", payload: { input_tokens: 42 } });
      assert.ok(Math.abs(Date.parse(e.occurred_at) - before) < 60_000, e.occurred_at);
    } finally {
      await admin.close();
    }
  });

  test("the outputs role reads the outputs and nothing else", async () => {
    const reader = await open({ user: "outputs", password: serve.creds.outputs });
    await assert.rejects(reader.publishTurnEnded({ project: "p", session: "s", turn: "t" }, { messages: [{ role: "user", content: "x" }] }));
    let reason;
    assert.equal(await reader.inject({ project: "p", session: "s", turn: "t" }, { text: "hi" }, { deadline: 1000, onMiss: (e) => (reason = e) }), null);
    assert.ok(reason, "no reason for the miss");
    // The default tenant's platform may not read the outputs.
    const platform = await open({ user: "platform", password: serve.creds.platform });
    const it = platform.outputs({ project: "acme/web" })[Symbol.asyncIterator]();
    await assert.rejects(it.next(), /[Pp]ermission/);
  });

  test("the shared vectors through Engram's own decoder: dead-lettered with the same reasons", async () => {
    const platform = await natsConnect({ servers: serve.url, user: "platform", pass: serve.creds.platform });
    const admin = await natsConnect({ servers: serve.url, user: "admin", pass: serve.creds.admin, inboxPrefix: "_INBOX_ENGRAM.cli" });
    try {
      const js = jetstream(platform);
      const picked = vectors.refuse.filter((v) => v.name.startsWith("tokens_reported: ") && v.errors.every((e) => e.match === "exact")).slice(0, 6);
      picked.push(...vectors.refuse.filter((v) => ["a key twice in the payload", "a field spelled in upper case", "invalid UTF-8 in an id", "a lone high surrogate escape"].includes(v.name)));
      assert.equal(picked.length, 10);
      const subject = new Subjects().in("tokens_reported", "", "acme/web", "chat 42");
      for (const v of picked) await js.publish(subject, bodyOf(v));
      const ajs = jetstream(admin);
      const letters = await waitFor("the dead letters", async () => {
        const si = await (await ajs.streams.get("ENGRAM_DLQ")).info();
        if (si.state.messages < picked.length) return undefined;
        const c = await ajs.consumers.get("ENGRAM_DLQ");
        const out = [];
        for await (const m of await c.fetch({ max_messages: si.state.messages, expires: 5000 })) {
          out.push({ reason: m.headers.get("Engram-Dlq-Reason"), body: Buffer.from(m.data).toString("base64") });
          if (out.length === si.state.messages) break;
        }
        return out;
      });
      for (const v of picked) {
        const letter = letters.find((l) => l.body === Buffer.from(bodyOf(v)).toString("base64"));
        assert.ok(letter, `${v.name}: no dead letter`);
        for (const e of v.errors) {
          const want = (e.field ? e.field + ": " : "") + e.reason;
          assert.ok(letter.reason.includes(want), `${v.name}: the reason ${JSON.stringify(letter.reason)} lacks ${JSON.stringify(want)}`);
        }
      }
    } finally {
      await platform.close();
      await admin.close();
    }
  });

  test("a tenant: its own credentials, inbox and memory", async () => {
    const tenant = await open({ user: `tenant-acme%20corp`, password: tenantPassword });
    assert.equal(tenant.inboxPrefix, "_INBOX_TENANT.acme%20corp");
    const ref = { tenant: TENANT, project: "acme/web", session: "tenant chat", turn: "t1" };
    const inj = await tenant.inject(ref, { text: "How do we deploy the web app?" }, { deadline: 10_000 });
    assert.ok(inj, "the tenant's turn got no block");
    assert.doesNotMatch(inj.block, /release workflow|pnpm/, "the default tenant's memory reached another tenant");
    await tenant.publishTurnEnded(ref, { messages: [{ role: "user", content: "How do we deploy the web app?" }] });
    const ctx = await waitFor("the tenant's transcript", async () => {
      const c = await tenant.context(ref);
      return c && c.messages.length > 0 ? c : undefined;
    });
    assert.equal(ctx.messages[0].content, "How do we deploy the web app?");
    // Not another tenant's subjects, nor the default tenant's.
    await assert.rejects(tenant.publishTurnEnded({ ...ref, tenant: "other" }, { messages: [{ role: "user", content: "x" }] }));
    await assert.rejects(tenant.publishTurnEnded({ ...ref, tenant: undefined }, { messages: [{ role: "user", content: "x" }] }));
    // And the default tenant's platform cannot speak for it.
    const platform = await open({ user: "platform", password: serve.creds.platform });
    assert.equal(await platform.inject(ref, { text: "hi" }, { deadline: 1000 }), null);
  });

  test("refused credentials", async () => {
    await assert.rejects(connect({ servers: serve.url, user: "platform", password: "wrong", reconnect: false }), /[Aa]uthorization/);
    await assert.rejects(connect({ servers: serve.url, user: "nobody", password: serve.creds.platform, reconnect: false }), /[Aa]uthorization/);
    await assert.rejects(connect({ servers: serve.url, reconnect: false }), /[Aa]uthorization/);
    await assert.rejects(connect({ servers: serve.url, user: "platform", password: "x", token: "y" }), /only one of/);
  });

  test("size and validation errors, before anything is sent", async () => {
    const platform = await open({ user: "platform", password: serve.creds.platform });
    const ref = { project: "acme/web", session: "chat ts 2", turn: "t1" };
    const big = { messages: [{ role: "user", content: "x".repeat(600_000) }] };
    await assert.rejects(platform.publishTurnEnded(ref, big), (err) => {
      assert.ok(err instanceof EventTooLargeError);
      assert.match(err.message, /^events: event too large: turn_ended [0-9A-HJKMNP-TV-Z]{26} is \d+ bytes, the maximum is 524288$/);
      return true;
    });
    const small = await open({ user: "platform", password: serve.creds.platform, maxEventBytes: 1000 });
    await assert.rejects(small.publishTurnEnded(ref, { messages: [{ role: "user", content: "x".repeat(2000) }] }), EventTooLargeError);
    await assert.rejects(small.inject(ref, { text: "x".repeat(2000) }), EventTooLargeError);
    const problems = async (p) => {
      try {
        await p;
      } catch (err) {
        assert.ok(err instanceof InvalidEventError, String(err));
        return err.problems;
      }
      assert.fail("accepted");
    };
    assert.deepEqual(await problems(platform.publishTurnEnded(ref, { messages: [] })), [{ field: "payload.messages", reason: "missing" }]);
    assert.deepEqual(await problems(platform.publishTurnEnded(ref, { messages: [{ role: "tool", content: "r" }] })),
      [{ field: "payload.messages[0].tool_status", reason: "missing" }]);
    assert.deepEqual(await problems(platform.inject(ref, { text: "" })), [{ field: "payload.text", reason: "missing" }]);
    assert.deepEqual(await problems(platform.inject({ ...ref, project: "" }, { text: "hi" })), [{ field: "project_id", reason: "missing" }]);
    assert.deepEqual(await problems(platform.publishTokensReported({ ...ref, session: "a\nb" }, { input_tokens: -1 })), [
      { field: "session_id", reason: "holds a control character (U+000A at byte 1)" },
      { field: "payload.input_tokens", reason: "negative" },
    ]);
    assert.deepEqual(await problems(platform.publishTurnEnded({ ...ref, turn: "t".repeat(257) }, { messages: [{ role: "user", content: "x" }] })),
      [{ field: "turn_id", reason: "longer than 256 bytes" }]);
  });

  // Last: it stops serve.
  test("the deadline path: serve gone, the turn gets null at its deadline", async () => {
    const platform = await open({ user: "platform", password: serve.creds.platform });
    const ref = { project: "acme/web", session: "chat ts 3", turn: "t1" };
    assert.ok(await platform.inject(ref, { text: "How do we deploy?" }, { deadline: 10_000 }), "no block while serve runs");
    const { code } = await serve.stop();
    assert.equal(code, 0, serve.log());
    let reason;
    const t0 = Date.now();
    const inj = await platform.inject({ ...ref, turn: "t2" }, { text: "How do we deploy?" }, { deadline: 500, onMiss: (e) => (reason = e) });
    assert.equal(inj, null);
    assert.ok(reason instanceof Error);
    // Never blocked: back well before any timeout of the test runner.
    assert.ok(Date.now() - t0 < 10_000, `inject took ${Date.now() - t0} ms`);
    assert.equal(await platform.context(ref), null);
  });
});
