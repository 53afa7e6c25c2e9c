package llm_test

import (
	"context"
	"fmt"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

// Summary is what a structured call returns. Every string is bounded with
// maxLength and every list with maxItems, or SchemaFor refuses the type.
type Summary struct {
	Title  string   `json:"title" llm:"maxLength=80" desc:"one-line title"`
	Points []string `json:"points" llm:"maxItems=5,maxLength=200"`
	Mood   string   `json:"mood" llm:"enum=calm|tense"`
}

// Production schemas are registered so the real-Ollama suite tries them all.
var _ = llm.RegisterSchema[Summary]("example.summary")

func ExampleStructured() {
	srv, _ := llmtest.Start() // in a test: llmtest.New(t)
	defer srv.Close()
	srv.Enqueue(llmtest.JSON(Summary{Title: "Deploy plan", Points: []string{"staging first"}, Mood: "calm"}))

	var chat llm.Chatter = srv.Client()
	sum, resp, err := llm.Structured[Summary](context.Background(), chat, llm.Request{
		Role:     llm.RoleSummarize,
		Project:  "acme",
		Messages: []llm.Message{llm.System("Summarise the conversation."), llm.User("...")},
	})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(sum.Title, sum.Points, sum.Mood, resp.DoneReason)
	// Output: Deploy plan [staging first] calm stop
}

type RecallArgs struct {
	Query string `json:"query" llm:"maxLength=200" desc:"what to look for"`
	Limit int    `json:"limit" llm:"minimum=1,maximum=10,optional"`
}

var recallTool = llm.MustTool[RecallArgs]("recall", "Search stored memories")

func Example_toolLoop() {
	srv, _ := llmtest.Start()
	defer srv.Close()
	srv.OnChat(llmtest.LastFrom("user"), llmtest.ToolCall("recall", map[string]any{"query": "editor"}))
	srv.OnChat(llmtest.LastFrom("tool"), llmtest.Text("You use vim."))

	chat := srv.Client()
	req := llm.Request{
		Role:     llm.RoleConsolidate,
		Project:  "acme",
		Messages: []llm.Message{llm.User("Which editor do I use?")},
		Tools:    []llm.ToolSpec{recallTool.Spec()},
	}
	for step := 0; step < 5; step++ { // a real loop also counts steps
		resp, err := chat.Chat(context.Background(), req)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		req.Messages = append(req.Messages, resp.Message)
		if len(resp.Message.ToolCalls) == 0 {
			fmt.Println("answer:", resp.Message.Content)
			return
		}
		for _, call := range resp.Message.ToolCalls {
			args, err := recallTool.Decode(call)
			result := ""
			if err != nil {
				result = err.Error() // tell the model which field was wrong
			} else {
				result = "preference: vim (searched " + args.Query + ")"
			}
			fmt.Println("tool:", call.Name, result)
			req.Messages = append(req.Messages, llm.ToolResult(call.Name, result))
		}
	}
	// Output:
	// tool: recall preference: vim (searched editor)
	// answer: You use vim.
}

// A worker fits its prompts into its role's window by construction: it
// asks the window, measures its request with RequestTokens and, when the
// work does not fit one call, cuts it into several.
func ExampleClient_ContextLength() {
	srv, _ := llmtest.Start()
	defer srv.Close()
	srv.SetContextLength(llmtest.ChatModel, 4096) // what Ollama's /api/show says
	srv.OnChatAlways(nil, llmtest.Text("ok"))
	c := srv.Client()
	ctx := context.Background()

	window, err := c.ContextLength(ctx, llm.RoleConsolidate)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	req := llm.Request{Role: llm.RoleConsolidate, MaxTokens: 512,
		Messages: []llm.Message{llm.System("Bring memory up to date."), llm.User("...")}}
	if llm.RequestTokens(req)+req.MaxTokens > window {
		fmt.Println("cut the work into smaller calls")
		return
	}
	if _, err := c.Chat(ctx, req); err != nil { // sends num_ctx 4096, truncate=false
		fmt.Println("error:", err)
		return
	}
	fmt.Println("window", window, "num_ctx", srv.Chats()[0].NumCtx)
	// Output: window 4096 num_ctx 4096
}
