// Package mcptool is the `memory` MCP tool: deliberate look-up and
// correction of Engram's memory by the agent, over stdio (`engram mcp`) and
// streamable HTTP (`engram serve` with ENGRAM_MCP_ADDR).
//
// Injection covers what an agent did not know to ask; this tool covers the
// follow-up that depends on what the agent finds mid-task. Every memory
// block already tells the agent to "use the `memory` tool" to look
// something up or to correct what is stored.
package mcptool
