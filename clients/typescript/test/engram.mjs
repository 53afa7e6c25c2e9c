// A real `engram serve` for the tests: started on random ports with a data
// dir of its own, its generated credentials read back from the data dir.
//
// ENGRAM_BIN is the engram binary and ENGRAM_TEST_OLLAMA_HOST a scripted
// Ollama-compatible server (pkg/llm/llmtest); the Go test
// clients/typescript (go test ./clients/typescript) sets both. Without them
// the tests that need serve are skipped, except under CI, where they fail.
import { spawn, execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { repo } from "./helpers.mjs";

const run = promisify(execFile);

export const bin = process.env.ENGRAM_BIN;
export const ollama = process.env.ENGRAM_TEST_OLLAMA_HOST;

/** The skip option of a test that needs serve: a reason, or false. Under CI a missing binary fails instead. */
export function needsServe() {
  if (bin && ollama) return false;
  const why = "needs ENGRAM_BIN and ENGRAM_TEST_OLLAMA_HOST (run: go test ./clients/typescript)";
  if (process.env.CI) throw new Error(why + ", required under CI");
  return why;
}

function env(dataDir, configDir, extra = {}) {
  return {
    ...process.env,
    ENGRAM_DATA: dataDir,
    XDG_CONFIG_HOME: configDir,
    ENGRAM_OLLAMA_HOST: ollama ?? "http://127.0.0.1:1",
    ENGRAM_EMBED_MODEL: "",
    ENGRAM_LOG_FORMAT: "json",
    ...extra,
  };
}

/** Runs an engram CLI command on a data dir (serve not running, or running on it). */
export async function engram(dataDir, configDir, args, extra = {}) {
  const { stdout } = await run(bin, args, { env: env(dataDir, configDir, extra), cwd: repo, maxBuffer: 16 << 20 });
  return stdout;
}

/** A fresh data dir and config dir (the store key's), removed by cleanup(). */
export function dirs() {
  const root = mkdtempSync(path.join(tmpdir(), "engram-ts-"));
  return {
    dataDir: path.join(root, "data"),
    configDir: path.join(root, "config"),
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

/**
 * Starts `engram serve` on dataDir and waits for its ready line. Returns
 * its NATS URL, the role passwords it generated, its log, and stop().
 */
export async function startServe(dataDir, configDir, extra = {}, args = []) {
  const proc = spawn(bin, ["serve", "-nats-listen", "127.0.0.1:-1", "-http", "127.0.0.1:0", "-log-format", "json", "-data", dataDir, ...args], {
    env: env(dataDir, configDir, extra),
    cwd: repo,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  const exited = new Promise((resolve) => proc.on("exit", (code, signal) => resolve({ code, signal })));
  const ready = new Promise((resolve, reject) => {
    let buf = "";
    proc.stderr.on("data", (chunk) => {
      buf += chunk;
      log += chunk;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        try {
          const m = JSON.parse(line);
          if (m.msg === "engram ready") resolve(m);
        } catch {
          // not a JSON line
        }
      }
    });
    exited.then(({ code, signal }) => reject(new Error(`engram serve exited (${code ?? signal}) before ready:\n${log}`)));
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 120_000);
  const m = await ready;
  clearTimeout(timer);
  const creds = JSON.parse(readFileSync(path.join(dataDir, "nats-credentials.json"), "utf8")).users;
  let stopped = false;
  return {
    url: m.nats,
    creds,
    log: () => log,
    exited,
    /** SIGTERM and wait for the exit (idempotent). */
    async stop() {
      if (!stopped) {
        stopped = true;
        proc.kill("SIGTERM");
      }
      const to = setTimeout(() => proc.kill("SIGKILL"), 60_000);
      const r = await exited;
      clearTimeout(to);
      return r;
    },
  };
}

/** Polls cond (async) every 100 ms until it is truthy or 60 s passed. */
export async function waitFor(what, cond) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
