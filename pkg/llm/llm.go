package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Role names the job a model call does. Models, keep-alive and timeouts are
// configured per role, and metrics are reported per role.
type Role string

// The roles Engram's workers use.
const (
	RoleExtract     Role = "extract"
	RoleConsolidate Role = "consolidate"
	RoleSummarize   Role = "summarize"
	RoleEmbed       Role = "embed"
)

// ChatRoles lists the roles that use a chat model.
var ChatRoles = []Role{RoleExtract, RoleConsolidate, RoleSummarize}

// Message authors, as Ollama spells them.
const (
	AuthorSystem    = "system"
	AuthorUser      = "user"
	AuthorAssistant = "assistant"
	AuthorTool      = "tool"
)

// Message is one chat message.
type Message struct {
	// Author is "system", "user", "assistant" or "tool".
	Author string
	// Content is the text of the message.
	Content string
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall
	// ToolName names the tool whose result a "tool" message carries.
	ToolName string
	// ToolCallID is the ID of the call a "tool" message answers, when the
	// model gave one.
	ToolCallID string
}

// System builds a system message.
func System(content string) Message { return Message{Author: AuthorSystem, Content: content} }

// User builds a user message.
func User(content string) Message { return Message{Author: AuthorUser, Content: content} }

// Assistant builds an assistant message.
func Assistant(content string) Message { return Message{Author: AuthorAssistant, Content: content} }

// ToolResult builds the message that hands a tool's result back to the model.
func ToolResult(toolName, content string) Message {
	return Message{Author: AuthorTool, Content: content, ToolName: toolName}
}

// ToolResultFor builds the message that answers a specific tool call.
func ToolResultFor(call ToolCall, content string) Message {
	return Message{Author: AuthorTool, Content: content, ToolName: call.Name, ToolCallID: call.ID}
}

// ToolCall is one call the model asked for. Arguments is the JSON object the
// model produced; decode it with [Tool.Decode].
type ToolCall struct {
	ID        string
	Name      string
	Arguments json.RawMessage
}

// ToolSpec is a tool offered to the model. Build one with [NewTool].
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters *Schema
}

// Request is one chat call.
type Request struct {
	// Role selects the model, keep-alive and default timeout, and labels metrics.
	Role Role
	// Project is the project the call works for: it is charged to that
	// project's token budget and labels metrics. Empty means no budget.
	Project string
	// Messages is the conversation so far.
	Messages []Message
	// Tools offered to the model (optional).
	Tools []ToolSpec
	// Format is the JSON Schema the reply must follow (optional). Use
	// [Structured] rather than setting it by hand.
	Format *Schema
	// Temperature overrides the model's default when not nil.
	Temperature *float64
	// MaxTokens caps the reply (Ollama's num_predict). Zero means: the
	// bound derived from Format when set, else the model's default.
	MaxTokens int
	// Timeout overrides the role's configured timeout when positive.
	Timeout time.Duration
	// ContextTokens, when positive, lowers this call's num_ctx below the
	// role's window (Client.ContextLength, which every call sends
	// otherwise). It is never raised above the window.
	ContextTokens int
	// Think, when not nil, is sent as Ollama's "think" flag.
	Think *bool
}

// Response is the model's reply to one chat call.
type Response struct {
	// Message is the assistant message (content and tool calls).
	Message Message
	// Model is the model that answered.
	Model string
	// PromptTokens and CompletionTokens are Ollama's counts when it reported
	// them, else estimates (characters / 4); Estimated says which.
	PromptTokens     int
	CompletionTokens int
	Estimated        bool
	// DoneReason is Ollama's done_reason ("stop", "length", ...): "length"
	// (DoneLength, CutOff) when the reply ran into MaxTokens or the end of
	// the context window and was cut off.
	DoneReason string
	// Latency is the wall time of the call (all attempts, for [Structured]).
	Latency time.Duration
}

// DoneLength is Ollama's done_reason of a reply cut off by the output
// limit (num_predict) or the end of the context window.
const DoneLength = "length"

// CutOff reports whether the reply was cut off by the output limit or the
// context window (done_reason "length"): its end is missing.
func (r Response) CutOff() bool { return r.DoneReason == DoneLength }

// Chatter sends one chat call and returns the reply. *Client implements it.
type Chatter interface {
	Chat(ctx context.Context, req Request) (Response, error)
}

// Embedder turns texts into vectors. Model names the model that made them
// (stored with every vector so a change of model is detected); Dim is the
// vector length (0 while unknown).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Model() string
	Dim() int
}

// EstimateTokens is the token estimate used when the model does not report
// counts: characters / 4, rounded up.
func EstimateTokens(s string) int {
	n := utf8.RuneCountInString(s)
	return (n + 3) / 4
}

// estimatePrompt estimates the prompt tokens of a request.
func estimatePrompt(req Request) int {
	n := 0
	for _, m := range req.Messages {
		n += EstimateTokens(m.Content) + 4
		for _, tc := range m.ToolCalls {
			n += EstimateTokens(tc.Name) + EstimateTokens(string(tc.Arguments))
		}
	}
	for _, t := range req.Tools {
		b, _ := json.Marshal(t.Parameters)
		n += EstimateTokens(t.Name) + EstimateTokens(t.Description) + EstimateTokens(string(b))
	}
	if req.Format != nil {
		b, _ := json.Marshal(req.Format)
		n += EstimateTokens(string(b))
	}
	return n
}

// Checker reports whether Ollama is reachable and which models it has
// (Client implements it).
type Checker interface {
	Check(ctx context.Context) (Readiness, error)
}

var _ Checker = (*Client)(nil)

// RoleGate returns a readiness check for a worker's runner: it fails while
// Ollama cannot be reached or the model of role is not installed (other
// roles' missing models do not hold the worker), so that the worker's
// events wait in the stream instead of spending deliveries.
func RoleGate(c Checker, role Role) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		rd, err := c.Check(ctx)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrModelMissing) {
			return err
		}
		for _, m := range rd.Models {
			if m.Role == role {
				if m.Present {
					return nil
				}
				return fmt.Errorf("llm: %s model: %w", role, err)
			}
		}
		return err
	}
}
