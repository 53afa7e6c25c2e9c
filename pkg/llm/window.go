package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ollama/ollama/api"
)

// Context windows. A role's window is the num_ctx every one of its calls
// sends (Client.ContextLength); callers bound their prompts by it
// (RequestTokens) and Ollama refuses a prompt that does not fit
// (ErrContextExceeded) instead of cutting it.
const (
	// DefaultContextLength is a role's window when neither the setting
	// (ModelConfig.ContextLength) nor the model's metadata gives one.
	DefaultContextLength = 8192
	// MaxAutoContextLength caps a window taken from the model's metadata:
	// Ollama allocates the KV cache for the whole num_ctx, and some models
	// declare 128k or more (llama3.1: 16 GB of cache at 131,072). A larger
	// window must be set explicitly (ModelConfig.ContextLength).
	MaxAutoContextLength = 32768
	// MinContextLength is the smallest window a setting may give.
	MinContextLength = 512
	// contextCacheTTL is how long a model's metadata is trusted (a model
	// re-pulled under the same name may change).
	contextCacheTTL = 10 * time.Minute
	// showTimeout bounds one /api/show call.
	showTimeout = 30 * time.Second
)

// ErrContextExceeded: the prompt does not fit the model's context window.
// Ollama answers so (HTTP 400 "the input length exceeds the context
// length") because every call sends truncate=false: without it Ollama
// silently drops the start of the prompt. It also wraps ErrInvalidRequest
// (the same request never fits): errors.Is finds both. A caller that plans
// its prompts with RequestTokens against ContextLength never sees it.
var ErrContextExceeded = errors.New("llm: the prompt exceeds the model's context window")

// contextError wraps both sentinels.
type contextError struct{ msg string }

func (e *contextError) Error() string { return e.msg }

func (e *contextError) Unwrap() []error { return []error{ErrContextExceeded, ErrInvalidRequest} }

// contextExceeded reports whether an Ollama error message says the input
// did not fit.
func contextExceeded(msg string) bool {
	return strings.Contains(msg, "input length exceeds the context length")
}

// ContextLength is the context window of role's calls in tokens: the
// setting (ModelConfig.ContextLength) when positive, else the model's own
// (ModelContextLength) capped at MaxAutoContextLength, else
// DefaultContextLength when the metadata has none. A setting above the
// model's own is lowered to it (Ollama would, silently). It is the num_ctx
// every Chat of the role sends. The model's metadata is cached per model
// for 10 minutes; an error wraps ErrUnavailable (Ollama unreachable) or
// ErrModelMissing, as a chat call would.
func (c *Client) ContextLength(ctx context.Context, role Role) (int, error) {
	mc, ok := c.cfg.Model(role)
	if !ok || mc.Name == "" {
		return 0, fmt.Errorf("%w: context length of unknown role %q", ErrInvalidRequest, role)
	}
	own, err := c.ModelContextLength(ctx, mc.Name)
	if err != nil {
		return 0, err
	}
	switch {
	case mc.ContextLength > 0 && own > 0:
		return min(mc.ContextLength, own), nil
	case mc.ContextLength > 0:
		return mc.ContextLength, nil
	case own > 0:
		return min(own, MaxAutoContextLength), nil
	}
	return DefaultContextLength, nil
}

// ModelContextLength is the context length the model was trained for, from
// Ollama's /api/show (model_info "<architecture>.context_length"); 0 when
// the metadata does not say. Cached per model for 10 minutes.
func (c *Client) ModelContextLength(ctx context.Context, model string) (int, error) {
	if n, ok := c.windows.get(model, c.now()); ok {
		return n, nil
	}
	sctx, cancel := context.WithTimeout(ctx, showTimeout)
	defer cancel()
	show, err := c.api.Show(sctx, &api.ShowRequest{Model: model})
	if err != nil {
		return 0, classify(ctx, err, "show", model, c.host)
	}
	n := contextLengthOf(show.ModelInfo)
	c.windows.put(model, n, c.now())
	return n, nil
}

// contextLengthOf reads "<general.architecture>.context_length" (or, when
// the architecture is not named, the one key ending so).
func contextLengthOf(info map[string]any) int {
	if arch, ok := info["general.architecture"].(string); ok && arch != "" {
		if n := positiveInt(info[arch+".context_length"]); n > 0 {
			return n
		}
	}
	found := 0
	for k, v := range info {
		if strings.HasSuffix(k, ".context_length") {
			if n := positiveInt(v); n > 0 {
				if found > 0 && found != n {
					return 0 // ambiguous
				}
				found = n
			}
		}
	}
	return found
}

func positiveInt(v any) int {
	switch x := v.(type) {
	case float64:
		if x > 0 && x < 1<<31 {
			return int(x)
		}
	case int:
		return max(x, 0)
	case int64:
		if x > 0 && x < 1<<31 {
			return int(x)
		}
	case json.Number:
		if n, err := x.Int64(); err == nil && n > 0 && n < 1<<31 {
			return int(n)
		}
	}
	return 0
}

// windowCache keeps the models' context lengths.
type windowCache struct {
	mu sync.Mutex
	m  map[string]windowEntry
}

type windowEntry struct {
	n  int
	at time.Time
}

func (w *windowCache) get(model string, now time.Time) (int, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[normalName(model)]
	if !ok || now.Sub(e.at) > contextCacheTTL || now.Before(e.at) {
		return 0, false
	}
	return e.n, true
}

func (w *windowCache) put(model string, n int, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]windowEntry{}
	}
	w.m[normalName(model)] = windowEntry{n: n, at: now}
}

// TokensUpperBound is a high estimate of the tokens of s, for fitting a
// prompt into a context window: ASCII characters / 3 (English runs about
// 4 characters a token, code and JSON nearer 3) plus one token per other
// character (CJK runs about one a character; other scripts fewer). It
// errs on the side of a prompt that fits; EstimateTokens (characters / 4)
// remains the estimate for usage and reports.
func TokensUpperBound(s string) int {
	ascii, other := 0, 0
	for _, r := range s {
		if r < 0x80 {
			ascii++
		} else {
			other++
		}
	}
	return (ascii+2)/3 + other
}

// messageOverhead bounds the chat template's tokens around one message
// (role markers, separators).
const messageOverhead = 8

// toolOverhead bounds what Ollama adds around one tool's definition (its
// type, the JSON keys of the function and its parameters).
const toolOverhead = 32

// RequestTokens is a high estimate (TokensUpperBound) of the prompt req
// sends: every message with its tool calls and the template's markers, the
// tools offered and the format schema. A caller fits a request into a
// window by keeping RequestTokens(req) + req.MaxTokens <= ContextLength.
func RequestTokens(req Request) int {
	n := 0
	for _, m := range req.Messages {
		n += TokensUpperBound(m.Content) + messageOverhead
		for _, tc := range m.ToolCalls {
			n += TokensUpperBound(tc.Name) + TokensUpperBound(string(tc.Arguments)) + messageOverhead
		}
	}
	for _, t := range req.Tools {
		b, _ := json.Marshal(t.Parameters)
		n += TokensUpperBound(t.Name) + TokensUpperBound(t.Description) + TokensUpperBound(string(b)) + toolOverhead
	}
	if req.Format != nil {
		b, _ := json.Marshal(req.Format)
		n += TokensUpperBound(string(b))
	}
	return n
}
