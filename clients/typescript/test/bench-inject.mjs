// The Node half of cmd/engram's BenchmarkInjectNodeBesideGo: inject round
// trips of this client against a running engram serve, as a platform
// makes them (the platform user, the default 1.5 s deadline, one turn at a
// time). Prints one JSON line: each answered turn's latency (ms) and the
// number of turns without a block.
//
//   ENGRAM_NATS_URL, ENGRAM_NATS_PASSWORD (the platform's),
//   ENGRAM_BENCH_QUERIES (a JSON file of query texts), ENGRAM_BENCH_FROM,
//   ENGRAM_BENCH_TURNS, ENGRAM_BENCH_WARMUP, ENGRAM_BENCH_PROJECT
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { connect } from "../dist/index.js";

const env = process.env;
const queries = JSON.parse(readFileSync(env.ENGRAM_BENCH_QUERIES, "utf8"));
const from = Number(env.ENGRAM_BENCH_FROM ?? 0);
const turns = Number(env.ENGRAM_BENCH_TURNS ?? 1000);
const warmup = Number(env.ENGRAM_BENCH_WARMUP ?? 20);
const project = env.ENGRAM_BENCH_PROJECT ?? "bench";

const client = await connect({ servers: env.ENGRAM_NATS_URL, user: "platform", password: env.ENGRAM_NATS_PASSWORD });
const lat = [];
let misses = 0;
try {
  for (let i = -warmup; i < turns; i++) {
    const n = from + i;
    const ref = { project, session: `s${((n % 200) + 200) % 200}`, turn: `node-${n}` };
    const text = queries[((n % queries.length) + queries.length) % queries.length];
    const t0 = performance.now();
    const inj = await client.inject(ref, { text });
    const ms = performance.now() - t0;
    if (i < 0) continue;
    if (inj === null) misses++;
    else lat.push(ms);
  }
} finally {
  await client.close();
}
console.log(JSON.stringify({ lat_ms: lat, misses }));
