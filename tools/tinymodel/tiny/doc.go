// Package tiny generates a tiny llama-architecture model as a GGUF v3 file,
// with the Modelfiles that make it an Ollama chat model and embedding model,
// for the end-to-end tests against a real Ollama server
// (pkg/llm/ollamae2e; docs/ollama.md explains the whole setup).
//
// The model is about 108k F32 parameters: width 64, 2 layers, 4 heads / 2
// KV heads, feed-forward 128, context 32768, a GPT-2 style byte-level BPE
// vocabulary with ChatML special tokens. Its weights are seeded random noise
// (it babbles) plus a few hand-set channels that make its behaviour usable
// in tests:
//
//   - replies stay printable ASCII, are never empty and end by themselves;
//   - JSON strings and arrays tend to close early, so grammar-constrained
//     replies stay far below their limits;
//   - the control token CallControl(i) in a user message makes the model
//     emit the fixed tool call Options.Calls[i] (one token holding the whole
//     <tool_call>...</tool_call>, or, for a Bare call, the JSON in pieces
//     split after each '}'), then the end token; a tool result (wrapped in
//     the <tool_response> control token by the template) switches the call
//     off so the model answers in text.
//
// Everything is deterministic: the same Options give the same bytes.
// Generate writes the files; Encode returns the GGUF bytes; WriteGGUF and
// ReadGGUF are the plain GGUF v3 writer and a bounded reader for checks.
package tiny
