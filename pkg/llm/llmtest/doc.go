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
// By default every model name is installed; WithModels makes the server
// strict and RemoveModel uninstalls one. ChatModel and EmbedModel are always
// installed and are what Config uses.
package llmtest
