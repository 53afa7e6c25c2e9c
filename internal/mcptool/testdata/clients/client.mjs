// client.mjs drives the `memory` tool with the official TypeScript SDK
// client (@modelcontextprotocol/sdk), as an agent host built on it would,
// and prints what it saw as one JSON object for the Go test to judge.
//
//   node client.mjs stdio <command> [args...]
//   node client.mjs http <url>            (bearer token in MCP_TOKEN)
//
// MCP_CLIENTS_MODULES is the node_modules directory of scripts/mcp-clients.sh;
// MCP_CALLS is a JSON array of tool arguments ({"ops": [...]}), each called in
// order. The SDK's client validates each call's structured content against
// the tool's output schema (listed first), so a reply that breaks the schema
// fails here.
import { createRequire } from "node:module";
import { join } from "node:path";

const modules = process.env.MCP_CLIENTS_MODULES;
if (!modules) {
  console.error("MCP_CLIENTS_MODULES is not set");
  process.exit(2);
}
const require = createRequire(join(modules, "noop.js"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");

const [mode, target, ...args] = process.argv.slice(2);
let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({ command: target, args, env: { ...process.env }, stderr: "inherit" });
} else if (mode === "http") {
  const headers = process.env.MCP_TOKEN ? { Authorization: `Bearer ${process.env.MCP_TOKEN}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
} else {
  console.error("usage: client.mjs stdio <command> [args...] | http <url>");
  process.exit(2);
}

const client = new Client({ name: "engram-ts-sdk-test", version: "0.0.0" });
const report = { calls: [] };
try {
  await client.connect(transport);
  report.serverInfo = client.getServerVersion();
  const { tools } = await client.listTools();
  report.tools = tools;
  for (const a of JSON.parse(process.env.MCP_CALLS || "[]")) {
    try {
      const res = await client.callTool({ name: "memory", arguments: a });
      report.calls.push({ arguments: a, isError: !!res.isError, structuredContent: res.structuredContent ?? null,
        text: (res.content || []).filter((c) => c.type === "text").map((c) => c.text).join("") });
    } catch (e) {
      report.calls.push({ arguments: a, thrown: String(e && e.message ? e.message : e) });
    }
  }
} catch (e) {
  report.error = String(e && e.message ? e.message : e);
  if (e && e.code !== undefined) report.code = e.code;
} finally {
  await client.close().catch(() => {});
}
process.stdout.write(JSON.stringify(report) + "\n");
