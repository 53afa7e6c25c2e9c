// Package llmtest is a scripted Ollama-compatible HTTP server for tests. It
// speaks the parts of the Ollama HTTP API that pkg/llm uses (/api/chat,
// /api/embed, /api/show, /api/tags, /api/version, /api/pull) with the
// github.com/ollama/ollama/api package's own request and response types, so
// the real llm.Client is exercised over real HTTP and the wire format cannot
// drift.
//
// A test scripts the replies and faults, then asserts on what was sent:
//
//	srv := llmtest.New(t)
//	srv.OnChat(llmtest.HasFormat(), llmtest.JSON(myResult))            // structured reply
//	srv.OnChat(llmtest.HasTool("remember"),
//		llmtest.ToolCall("remember", map[string]any{"label": "x"}),    // first call
//		llmtest.Text("done"))                                          // second call
//	srv.OnEmbed(llmtest.ModelMissing())                                // next embed: 404
//	client := srv.Client()                                             // *llm.Client on srv.Config()
//	... run the code under test ...
//	req := srv.LastChat()                                              // api.ChatRequest as received
//
// Replies are matched by rules in the order they were added (OnChat: each
// reply used once; OnChatAlways: forever); a chat request no rule matches
// gets a 500 whose message says so (SetDefault changes that). Faults: Status,
// ModelMissing (Ollama's exact 404 wording per path), ServerError, Busy,
// InvalidSchema, Hang, MalformedBody, Truncated (done_reason "length"), and
// any reply can be delayed (After, SetLatency). Down/Up toggle connection
// refused; SetUnavailable toggles 503. Embeddings come from the hashing
// embedder (hashembed), so retrieval in worker tests behaves sensibly.
//
// Context windows as Ollama handles them: /api/show reports each model's
// context length (DefaultContextLength, or SetContextLength), and every chat
// request is recorded with the num_ctx it sent, the server's count of its
// prompt (PromptTokens: UTF-8 bytes / 4 per message) and whether a real
// Ollama would have cut it (the prompt over num_ctx, or DefaultNumCtx
// without one, at most the model's length): Chats returns those records.
// A request with truncate=false whose prompt does not fit is answered 400
// "the input length exceeds the context length", as Ollama does.
// WithOutputLimit cuts replies at the request's num_predict with
// done_reason "length".
//
// By default every model name is installed; WithModels makes the server
// strict and RemoveModel uninstalls one. ChatModel and EmbedModel are always
// installed and are what Config uses.
package llmtest
