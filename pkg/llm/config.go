package llm

import (
	"errors"
	"fmt"
	"net/url"
	"time"
)

// ModelConfig is the model one role uses.
type ModelConfig struct {
	// Name is the Ollama model name, e.g. "qwen2.5:3b". For RoleEmbed an
	// empty name means: no embedding model (the runtime uses hashembed).
	Name string
	// KeepAlive is how long Ollama keeps the model loaded after a call:
	// zero means Ollama's default (5m), negative means forever.
	KeepAlive time.Duration
	// Timeout bounds one call (a Request may override it).
	Timeout time.Duration
	// ContextLength is the context window of the role's calls in tokens,
	// sent as num_ctx on every call (Client.ContextLength). 0: the model's
	// own (Ollama's /api/show) up to MaxAutoContextLength, else
	// DefaultContextLength. Ollama allocates the KV cache for the whole
	// window: set it lower to save memory, higher (up to the model's own)
	// for larger prompts. Roles sharing a model should share a window, or
	// Ollama reloads the model whenever the role changes.
	ContextLength int
}

// Config configures a Client. Start from DefaultConfig.
type Config struct {
	// Host is the Ollama base URL, e.g. "http://127.0.0.1:11434". Empty
	// means what the Ollama CLI uses: $OLLAMA_HOST, else 127.0.0.1:11434.
	Host string

	Extract     ModelConfig
	Consolidate ModelConfig
	Summarize   ModelConfig
	Embed       ModelConfig

	// EmbedDim is the expected embedding dimension; 0 learns it from the
	// model (Check, or the first Embed call).
	EmbedDim int
	// EmbedBatch is how many texts go in one /api/embed call.
	EmbedBatch int

	// AutoPull pulls a missing model once when a call finds it missing.
	AutoPull bool
	// PullTimeout bounds an automatic pull.
	PullTimeout time.Duration

	// DailyTokenBudget is the tokens (prompt + completion) one project may
	// spend per UTC day; 0 turns budgets off.
	DailyTokenBudget int64
	// ProjectBudgets overrides DailyTokenBudget per project (0: unlimited).
	ProjectBudgets map[string]int64

	// MaxPredict caps num_predict (0: no cap). A structured call whose
	// schema needs more is refused with ErrInvalidRequest rather than cut off.
	MaxPredict int
}

// Default models and timeouts. CPU inference is slow: timeouts are generous.
const (
	DefaultChatModel    = "qwen2.5:3b"
	DefaultKeepAlive    = 10 * time.Minute
	DefaultChatTimeout  = 5 * time.Minute
	DefaultEmbedTimeout = time.Minute
	DefaultEmbedBatch   = 32
	DefaultPullTimeout  = 30 * time.Minute
)

// DefaultConfig returns a config with every field set to its default: the
// same chat model for every role, no embedding model, no budget.
func DefaultConfig() Config {
	chat := ModelConfig{Name: DefaultChatModel, KeepAlive: DefaultKeepAlive, Timeout: DefaultChatTimeout}
	return Config{
		Extract:     chat,
		Consolidate: chat,
		Summarize:   chat,
		Embed:       ModelConfig{KeepAlive: DefaultKeepAlive, Timeout: DefaultEmbedTimeout},
		EmbedBatch:  DefaultEmbedBatch,
		PullTimeout: DefaultPullTimeout,
	}
}

// Model returns the model config of a role.
func (c Config) Model(r Role) (ModelConfig, bool) {
	switch r {
	case RoleExtract:
		return c.Extract, true
	case RoleConsolidate:
		return c.Consolidate, true
	case RoleSummarize:
		return c.Summarize, true
	case RoleEmbed:
		return c.Embed, true
	}
	return ModelConfig{}, false
}

// Budget returns the daily token budget of a project (0: unlimited).
func (c Config) Budget(project string) int64 {
	if project == "" {
		return 0
	}
	if b, ok := c.ProjectBudgets[project]; ok {
		return b
	}
	return c.DailyTokenBudget
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("llm config: "+format, args...)) }
	if c.Host != "" {
		u, err := url.Parse(c.Host)
		switch {
		case err != nil:
			bad("host %q: %v", c.Host, err)
		case u.Scheme != "http" && u.Scheme != "https":
			bad("host %q: scheme must be http or https", c.Host)
		case u.Host == "":
			bad("host %q: no host name", c.Host)
		}
	}
	for _, r := range append(append([]Role(nil), ChatRoles...), RoleEmbed) {
		m, _ := c.Model(r)
		if m.Name == "" && r != RoleEmbed {
			bad("%s model: name is empty", r)
		}
		if m.Timeout <= 0 && (m.Name != "" || r != RoleEmbed) {
			bad("%s model: timeout must be positive, got %v", r, m.Timeout)
		}
		if m.ContextLength != 0 && m.ContextLength < MinContextLength {
			bad("%s model: context length %d: want 0 (the model's own) or at least %d tokens", r, m.ContextLength, MinContextLength)
		}
	}
	if c.EmbedDim < 0 {
		bad("embed dim must not be negative, got %d", c.EmbedDim)
	}
	if c.Embed.Name != "" && c.EmbedBatch <= 0 {
		bad("embed batch must be positive, got %d", c.EmbedBatch)
	}
	if c.AutoPull && c.PullTimeout <= 0 {
		bad("pull timeout must be positive when auto-pull is on, got %v", c.PullTimeout)
	}
	if c.DailyTokenBudget < 0 {
		bad("daily token budget must not be negative, got %d", c.DailyTokenBudget)
	}
	for p, b := range c.ProjectBudgets {
		if p == "" {
			bad("project budget for an empty project id")
		}
		if b < 0 {
			bad("project %q budget must not be negative, got %d", p, b)
		}
	}
	if c.MaxPredict < 0 {
		bad("max predict must not be negative, got %d", c.MaxPredict)
	}
	return errors.Join(errs...)
}
