// Package llm is Engram's model layer: the narrow interfaces the workers
// consume ([Chatter], [Embedder]), the Ollama implementation ([Client], on the
// official github.com/ollama/ollama/api client), typed structured output
// ([Structured]) and typed tools ([NewTool]).
//
// # Calling a model
//
// A worker depends on Chatter and builds a [Request]: its Role (which selects
// the configured model, keep-alive and timeout), the Project (charged to the
// project's daily token budget and used as a metrics label), messages, and
// optionally tools. Calls are non-streaming.
//
// For structured output use Structured[T]: the JSON Schema of T (see
// [SchemaFor] for the struct tags) is sent as Ollama's "format", num_predict
// is set so a valid reply always fits, the reply is decoded strictly and
// validated, and an invalid reply gets one repair attempt before the call
// fails with ErrMisbehaved. Every string in a schema must carry maxLength
// and every array maxItems: with an unbounded string a small model runs to
// the token limit in the middle of the JSON. Register each production schema
// with [RegisterSchema] (and tools with [RegisterTool]) so the real-Ollama
// suite can try them all ([Schemas]).
//
// For tools, define each one from a Go type with NewTool[T], offer
// tool.Spec() in Request.Tools, and decode the model's calls with
// tool.Decode, whose error names the wrong field (hand it back to the model
// as the tool result). A tool call that Ollama's parser left in the content
// (it counts braces without skipping strings) is recognised as a call.
//
// # Context windows
//
// Every role has a context window (Client.ContextLength): its setting
// (ModelConfig.ContextLength, e.g. ENGRAM_SUMMARIZE_CONTEXT_LENGTH), else
// the model's own from Ollama's /api/show (model_info
// "<architecture>.context_length", Client.ModelContextLength, cached per
// model for 10 minutes) capped at MaxAutoContextLength (32,768: Ollama
// allocates the KV cache for the whole window), else DefaultContextLength
// (8,192); a setting above the model's own is lowered to it. Every chat
// call sends the window as num_ctx (Request.ContextTokens may lower it for
// one call) with truncate=false and shift=false: Ollama otherwise drops the
// start of a prompt longer than its window without a word, which is where
// the instructions are. A prompt that does not fit now fails with
// ErrContextExceeded (it also wraps ErrInvalidRequest), and a reply that
// runs into the output limit or the window's end comes back with
// DoneReason "length" (Response.CutOff). A worker bounds its prompts by
// construction: it asks ContextLength for its role and keeps
// RequestTokens(req) (a high estimate: TokensUpperBound, ASCII characters
// / 3 plus one token per other character) plus req.MaxTokens within it,
// cutting its work into several calls when needed (the compactor's steps).
// Roles that share a model should share a window: Ollama reloads a model
// whose num_ctx changes.
//
// # Errors
//
// Errors wrap one sentinel, checked with errors.Is: ErrModelMissing (say
// `ollama pull <model>`), ErrUnavailable (transient), ErrInvalidRequest
// (permanent), ErrMisbehaved (transient, retry a bounded number of times),
// ErrBudgetExhausted (a *BudgetError with the time the budget resets),
// ErrContextExceeded (the prompt over the window; with ErrInvalidRequest). A
// canceled caller context comes back as the context error. [Classify] maps
// any of them to transient / permanent / canceled for a runtime.
//
// # Metrics and budgets
//
// An [Observer] gets one [CallInfo] per call (role, project, model, latency,
// tokens, error class); this package imports no metrics library. Token
// counts are Ollama's when reported, else [EstimateTokens] (characters / 4).
// A per-project daily token budget (Config.DailyTokenBudget, off by default)
// is counted in a [TokenLedger], in memory unless the runtime supplies a
// shared one.
//
// # Embeddings
//
// [Client.Embedder] embeds with the configured Ollama model. When none is
// configured the runtime uses the lexical hashing embedder in
// pkg/llm/hashembed. Every vector should be stored with Embedder.Model() so
// a change of model is detected.
//
// # Tests
//
// pkg/llm/llmtest is a scripted Ollama-compatible HTTP server built on the
// api package's own types: point a Client at it (llmtest.Server.Config) and
// script replies and faults. It reports a context length per model
// (SetContextLength), records each chat request's num_ctx and prompt size
// (Chats), refuses a prompt over num_ctx sent with truncate=false as
// Ollama does, and can hold replies to num_predict (WithOutputLimit).
package llm
