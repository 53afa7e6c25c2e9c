// Package mcptool is the `memory` MCP tool: deliberate look-up and
// correction of Engram's memory by the agent, over stdio (`engram mcp`)
// and streamable HTTP (`engram serve` with ENGRAM_MCP_ADDR).
//
// Injection (package inject) covers what an agent did not know to ask;
// this tool covers the follow-up that depends on what the agent finds
// mid-task, which no block could carry in advance. Every memory block
// already tells the agent to "use the `memory` tool" to look something up
// or to correct what is stored.
//
// # Shape
//
// Tool (tool.go, ops.go) runs the operations over a memory store and knows
// no transport: Run takes a Caller (project, optional session, principal)
// and a Request, an ordered list of operations, and answers each in order.
// One failing operation reports its error in its Result and the others
// still run; Run itself fails only for a request that cannot run at all
// (no project, more than MaxOps operations, memory off for the project).
// NewServer (server.go) puts the tool on an MCP server of the official SDK
// (github.com/modelcontextprotocol/go-sdk), with an input schema that
// enumerates the operations, kinds and relations; HTTPHandler (http.go)
// serves it over the SDK's streamable HTTP handler behind bearer tokens;
// NewProxy (proxy.go) forwards a stdio server to a running serve's
// endpoint. Package mcptoolfx mounts the endpoint in serve.
//
// There is deliberately no "remember": recording is the extractor's and
// the consolidator's, as the block tells the agent. A "remember" op
// answers with that explanation.
//
// # The operations
//
//   - recall: memory.Retrieve in precise mode with graph expansion and the
//     injector's confidence floor (ENGRAM_INJECT_MIN_CONFIDENCE), so a
//     look-up ranks as the block does; scope "project" (the project's and
//     global memories) or "all" (also other projects' memories whose reach
//     is anywhere, when ENGRAM_INJECT_CROSS_PROJECT is on); optional kind;
//     limit 1-40 (10). It is refused with inject.SkipNotReady while a
//     memory of the project (or a global one) waits for a vector of the
//     configured embedder: the injector's readiness gate
//     (HasPendingEmbeddings), because lexical-only hits look complete and
//     are not. A failed query embedding is refused for the same reason.
//     The hits are touched (a deliberate access counts). With explain,
//     each memory carries why it ranks there (memory.Why, from
//     memory.Query.Explain: computed after the ranking, which it does not
//     change).
//   - update: label, body and/or subkind replaced through Store.Update with
//     source agent, as the issue has it: the text is replaced and the
//     source becomes the agent (a user-sourced memory too: the patch names
//     its writer, memory.ApplyPatch); the authority (asserted-by) never
//     rises, so an agent cannot turn an inference into a user's rule, and
//     a user's rule the agent rewrites is asserted by the assistant and
//     unpinned (the text is no longer what the user said or a person
//     pinned): it leaves the block's standing instructions. The new
//     text is embedded at once; if that fails the memory waits in the
//     embedding backlog (the extractor embeds it) and the result's note
//     says so.
//   - neighbours (hops 1-3), timeline (this session by default, or the
//     memories updated in [since, until), searched among the TimelineScan
//     most recently updated), link (supersedes through Store.Supersede and
//     its rules; any other relation through Store.Link), forget (archives;
//     the reason is required and logged with the caller, it is not stored
//     on the node), restore (memory.Restore clears archived and superseded,
//     then the supersedes edges into the memory are unlinked; a retried
//     restore finishes what a failed one left), stats (memory.Counter
//     counts, recall readiness, and the session's consolidation cursor and
//     latest summary from memory.Sessions).
//
// # Untrusted text
//
// Every text that leaves the tool is neutralised as in the block
// (memory.Neutralise, before and after the cut to TextChars; provenance in
// the block's words, memory.Provenance); errors and notes, which may quote
// the input or a dependency's error, and the echoed op, too. Every text that enters (labels, bodies, queries, reasons) is
// redacted (memory.Redact) before it is stored, embedded or logged.
//
// # Tenancy
//
// The caller's tenant and project bound every operation. An id is looked
// up and then judged by memory.Visible under the caller's tenant, project
// and session (archived and closed nodes included): never another
// tenant's; for writes only the project's own memories and the tenant's
// global ones, for reads also the tenant's other projects' memories whose
// reach is anywhere. Anything else answers `memory "<id>" not found`, the
// same words as an id that does not exist, and nothing of its content.
// Session-scoped memories of other sessions are not the caller's either.
// Global memories (no project; every project of the tenant sees them) are
// read by the tenant's callers but changed (update, forget, restore, link)
// only by a caller that WritesGlobal: the local user over stdio, or a
// token reaching every project (*) of its tenant; anyone else is "not
// allowed", so one project's token cannot archive the user's preference
// that every project follows.
//
// # Transports and auth
//
// stdio: `engram mcp [-tenant T] -project P [-session S]` serves one caller on the
// configured store; with -remote it forwards to serve's endpoint (serve
// holds the SQLite store, which one process may open). The forwarding
// session (Dial, Remote) pings every DefaultKeepAlive, because serve's idle
// timer counts only requests and an agent may be quiet for longer than the
// timeout; if serve has dropped the session anyway (a restart), the call
// is dialled again once and repeated (only when the session is gone; see
// Remote).
//
// HTTP: HTTPHandler wraps the SDK's StreamableHTTPHandler (which keeps the
// Mcp-Session-Id sessions, with their idle timeout) in the SDK's
// auth.RequireBearerToken with Tokens as the verifier: no token or an
// unknown one is 401. A token names a principal, the projects it reaches
// (a tokens file, ParseTokens; per project or per principal) and, in an
// optional fourth field, the one tenant it is bound to (none: the default
// tenant; a caller cannot name another: there is no ?tenant=); the
// principal becomes the SDK's TokenInfo.UserID, which binds an MCP
// session to it. The project comes from ?project= (optional when the
// token reaches exactly one) and the session from ?session=; a project the
// token does not reach is 403. Tokens are compared as SHA-256 digests in
// constant time against every entry, and the file may hold the digests
// instead of the tokens. A refused token's 401 carries a WWW-Authenticate
// Bearer challenge (RFC 6750). Each token has an MCP server of its own, so
// that its live sessions can be counted: a token holding
// MaxSessionsPerToken sessions gets 429 for another (a session costs
// memory until it ends or idles out; a client that opens sessions without
// end would otherwise grow the process without bound).
//
// # Real clients
//
// The schemas are exact (server.go's exact: no ["null", ...] type lists,
// which jsonschema.For gives every slice and pointer; the MCP Inspector
// CLI 0.15 could not pass an array to a ["null", "array"] parameter and
// strict hosts refuse type lists), the tool carries the specification's
// annotations, and serverInfo names the binary's version (buildinfo).
// TestTypeScriptSDK and TestInspector run the official TypeScript SDK's
// client and the Inspector CLI (current and 0.15) from npm against the tool
// over stdio and HTTP (internal/mcpclients).
//
// # Not here
//
// forget's reason is logged, not stored.
// Project display names ("learned in <name>") are not known to the tool:
// another project's memory says "another project".
package mcptool
