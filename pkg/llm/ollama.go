package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/envconfig"
)

// Client talks to one Ollama server with the official Go client. It is a
// Chatter; Embedder() returns its Embedder. Safe for concurrent use.
type Client struct {
	cfg    Config
	api    *api.Client
	host   string
	obs    Observer
	ledger TokenLedger
	now    func() time.Time

	embedDim atomic.Int64
	windows  windowCache
}

var _ Chatter = (*Client)(nil)

// Option configures a Client.
type Option func(*Client) error

// WithHTTPClient sets the HTTP client (default http.DefaultClient). Only used
// when Config.Host is set.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("llm: nil http client")
		}
		c.api = api.NewClient(mustParse(c.host), hc)
		return nil
	}
}

// WithObserver sets the metrics observer.
func WithObserver(o Observer) Option {
	return func(c *Client) error { c.obs = o; return nil }
}

// WithLedger sets where token budgets are counted (default: in memory).
func WithLedger(l TokenLedger) Option {
	return func(c *Client) error { c.ledger = l; return nil }
}

// WithClock sets the clock used for budgets and latency (tests).
func WithClock(now func() time.Time) Option {
	return func(c *Client) error { c.now = now; return nil }
}

func mustParse(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// New validates cfg and returns a Client. It does not contact Ollama; call
// Check for that.
func New(cfg Config, opts ...Option) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, obs: ObserverFunc(func(CallInfo) {}), ledger: NewMemoryLedger(), now: time.Now}
	if cfg.Host == "" {
		ac, err := api.ClientFromEnvironment()
		if err != nil {
			return nil, fmt.Errorf("llm: ollama client: %w", err)
		}
		c.api = ac
		c.host = envconfig.Host().String()
	} else {
		c.host = strings.TrimRight(cfg.Host, "/")
		c.api = api.NewClient(mustParse(c.host), http.DefaultClient)
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	c.embedDim.Store(int64(cfg.EmbedDim))
	return c, nil
}

// Host is the Ollama base URL in use.
func (c *Client) Host() string { return c.host }

// Config returns the client's configuration.
func (c *Client) Config() Config { return c.cfg }

func keepAlive(d time.Duration) *api.Duration {
	switch {
	case d == 0:
		return nil
	case d < 0:
		return &api.Duration{Duration: -1}
	}
	return &api.Duration{Duration: d}
}

// Chat implements Chatter.
func (c *Client) Chat(ctx context.Context, req Request) (Response, error) {
	start := c.now()
	mc, ok := c.cfg.Model(req.Role)
	if !ok || req.Role == RoleEmbed {
		return Response{}, fmt.Errorf("%w: chat with unknown role %q", ErrInvalidRequest, req.Role)
	}
	resp, err := c.chat(ctx, req, mc)
	resp.Latency = c.now().Sub(start)
	c.obs.ObserveCall(CallInfo{Op: "chat", Role: req.Role, Project: req.Project, Model: mc.Name,
		Latency: resp.Latency, PromptTokens: resp.PromptTokens, CompletionTokens: resp.CompletionTokens,
		Estimated: resp.Estimated, Err: err, Class: Classify(err)})
	return resp, err
}

func (c *Client) chat(ctx context.Context, req Request, mc ModelConfig) (Response, error) {
	if err := c.checkBudget(ctx, req.Project); err != nil {
		return Response{}, err
	}
	areq, err := c.toAPI(req, mc)
	if err != nil {
		return Response{}, err
	}
	timeout := mc.Timeout
	if req.Timeout > 0 {
		timeout = req.Timeout
	}
	var aresp api.ChatResponse
	for attempt := 0; ; attempt++ {
		var window int
		window, err = c.ContextLength(ctx, req.Role)
		if err == nil {
			areq.Options["num_ctx"] = window
			if req.ContextTokens > 0 {
				areq.Options["num_ctx"] = min(req.ContextTokens, window)
			}
			aresp, err = c.chatOnce(ctx, areq, timeout)
		}
		if err == nil {
			break
		}
		if attempt == 0 && c.cfg.AutoPull && errors.Is(err, ErrModelMissing) {
			if perr := c.Pull(ctx, mc.Name); perr == nil {
				continue
			} else {
				return Response{}, fmt.Errorf("%w (auto-pull failed: %v)", err, perr)
			}
		}
		return Response{}, err
	}
	resp := c.fromAPI(req, aresp)
	if cerr := c.charge(ctx, req.Project, resp); cerr != nil {
		return resp, cerr
	}
	return resp, nil
}

func (c *Client) chatOnce(ctx context.Context, areq *api.ChatRequest, timeout time.Duration) (api.ChatResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out api.ChatResponse
	got := false
	err := c.api.Chat(cctx, areq, func(r api.ChatResponse) error {
		// Non-streaming: one response. Accumulate defensively anyway.
		if got {
			r.Message.Content = out.Message.Content + r.Message.Content
			r.Message.ToolCalls = append(out.Message.ToolCalls, r.Message.ToolCalls...)
		}
		out, got = r, true
		return nil
	})
	if err == nil && !got {
		err = errors.New("empty response body")
	}
	return out, classify(ctx, err, "chat", areq.Model, c.host)
}

func (c *Client) toAPI(req Request, mc ModelConfig) (*api.ChatRequest, error) {
	stream, truncate, shift := false, false, false
	areq := &api.ChatRequest{
		Model:     mc.Name,
		Stream:    &stream,
		KeepAlive: keepAlive(mc.KeepAlive),
		Options:   map[string]any{},
		// A prompt longer than num_ctx is refused (ErrContextExceeded),
		// never cut at its start; a reply that reaches the end of the
		// window stops there (done_reason "length") instead of pushing the
		// prompt's start out of the window.
		Truncate: &truncate,
		Shift:    &shift,
	}
	for _, m := range req.Messages {
		am := api.Message{Role: m.Author, Content: m.Content, ToolName: m.ToolName, ToolCallID: m.ToolCallID}
		for i, tc := range m.ToolCalls {
			args := api.NewToolCallFunctionArguments()
			if len(tc.Arguments) > 0 {
				if err := json.Unmarshal(tc.Arguments, &args); err != nil {
					return nil, fmt.Errorf("%w: tool call %q arguments are not a JSON object: %v", ErrInvalidRequest, tc.Name, err)
				}
			}
			am.ToolCalls = append(am.ToolCalls, api.ToolCall{ID: tc.ID,
				Function: api.ToolCallFunction{Index: i, Name: tc.Name, Arguments: args}})
		}
		areq.Messages = append(areq.Messages, am)
	}
	for _, t := range req.Tools {
		at, err := toAPITool(t)
		if err != nil {
			return nil, err
		}
		areq.Tools = append(areq.Tools, at)
	}
	if req.Format != nil {
		if err := req.Format.CheckBounded(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
		}
		b, err := req.Format.MarshalJSON()
		if err != nil {
			return nil, err
		}
		areq.Format = b
	}
	if req.Temperature != nil {
		areq.Options["temperature"] = *req.Temperature
	}
	predict := req.MaxTokens
	if predict == 0 && req.Format != nil {
		predict = req.Format.PredictTokens()
	}
	if c.cfg.MaxPredict > 0 && (predict <= 0 || predict > c.cfg.MaxPredict) {
		if req.Format != nil {
			// A valid reply could be cut off: it would misbehave every time.
			return nil, fmt.Errorf("%w: the format schema needs up to %d tokens but MaxPredict is %d: tighten the schema's bounds or raise MaxPredict",
				ErrInvalidRequest, predict, c.cfg.MaxPredict)
		}
		predict = c.cfg.MaxPredict
	}
	if predict > 0 {
		areq.Options["num_predict"] = predict
	}
	if req.Think != nil {
		areq.Think = &api.ThinkValue{Value: *req.Think}
	}
	return areq, nil
}

// toAPITool converts a ToolSpec to Ollama's tool JSON. Ollama's tool
// property type has no maxLength/maxItems/minimum/maximum: those bounds are
// added to the description so the model sees them, and Tool.Decode enforces
// them.
func toAPITool(t ToolSpec) (api.Tool, error) {
	if t.Parameters == nil || t.Parameters.Type != "object" {
		return api.Tool{}, fmt.Errorf("%w: tool %q parameters must be an object schema", ErrInvalidRequest, t.Name)
	}
	if err := t.Parameters.CheckBounded(); err != nil {
		return api.Tool{}, fmt.Errorf("%w: tool %q: %v", ErrInvalidRequest, t.Name, err)
	}
	return api.Tool{
		Type: "function",
		Function: api.ToolFunction{
			Name:        t.Name,
			Description: t.Description,
			Parameters: api.ToolFunctionParameters{
				Type:       "object",
				Required:   t.Parameters.Required,
				Properties: toolProps(t.Parameters),
			},
		},
	}, nil
}

func toolProps(s *Schema) *api.ToolPropertiesMap {
	m := api.NewToolPropertiesMap()
	for _, p := range s.Properties {
		m.Set(p.Name, toolProp(p.Schema))
	}
	return m
}

func toolProp(s *Schema) api.ToolProperty {
	tp := api.ToolProperty{Type: api.PropertyType{s.Type}, Description: describeBounds(s)}
	for _, e := range s.Enum {
		tp.Enum = append(tp.Enum, e)
	}
	if s.Items != nil {
		tp.Items = s.Items // full JSON Schema: Items is untyped in Ollama's API
	}
	if s.Type == "object" {
		tp.Properties = toolProps(s)
	}
	return tp
}

func describeBounds(s *Schema) string {
	var b []string
	if s.MaxLength != nil && len(s.Enum) == 0 {
		b = append(b, fmt.Sprintf("at most %d characters", *s.MaxLength))
	}
	if s.MaxItems != nil {
		b = append(b, fmt.Sprintf("at most %d items", *s.MaxItems))
	}
	if s.Minimum != nil {
		b = append(b, fmt.Sprintf("minimum %g", *s.Minimum))
	}
	if s.Maximum != nil {
		b = append(b, fmt.Sprintf("maximum %g", *s.Maximum))
	}
	if len(b) == 0 {
		return s.Description
	}
	bounds := "(" + strings.Join(b, ", ") + ")"
	if s.Description == "" {
		return bounds
	}
	return s.Description + " " + bounds
}

func (c *Client) fromAPI(req Request, r api.ChatResponse) Response {
	resp := Response{
		Model:      r.Model,
		DoneReason: r.DoneReason,
		Message:    Message{Author: AuthorAssistant, Content: r.Message.Content},
	}
	for _, tc := range r.Message.ToolCalls {
		args, _ := json.Marshal(tc.Function.Arguments)
		resp.Message.ToolCalls = append(resp.Message.ToolCalls,
			ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	if len(resp.Message.ToolCalls) == 0 && len(req.Tools) > 0 {
		if calls := parseContentToolCalls(r.Message.Content, req.Tools); len(calls) > 0 {
			resp.Message.ToolCalls = calls
			resp.Message.Content = ""
		}
	}
	resp.PromptTokens, resp.CompletionTokens = r.PromptEvalCount, r.EvalCount
	if resp.PromptTokens == 0 {
		resp.PromptTokens = estimatePrompt(req)
		resp.Estimated = true
	}
	if resp.CompletionTokens == 0 {
		n := EstimateTokens(r.Message.Content)
		for _, tc := range resp.Message.ToolCalls {
			n += EstimateTokens(tc.Name) + EstimateTokens(string(tc.Arguments))
		}
		resp.CompletionTokens = n
		resp.Estimated = true
	}
	return resp
}

func (c *Client) checkBudget(ctx context.Context, project string) error {
	limit := c.cfg.Budget(project)
	if limit <= 0 {
		return nil
	}
	now := c.now()
	day := dayOf(now)
	spent, err := c.ledger.Spent(ctx, project, day)
	if err != nil {
		return fmt.Errorf("%w: token ledger: %v", ErrUnavailable, err)
	}
	if spent >= limit {
		return &BudgetError{Project: project, Limit: limit, Spent: spent, Until: day.Add(24 * time.Hour)}
	}
	return nil
}

func (c *Client) charge(ctx context.Context, project string, resp Response) error {
	if c.cfg.Budget(project) <= 0 {
		return nil
	}
	if err := c.ledger.Add(ctx, project, dayOf(c.now()), int64(resp.PromptTokens+resp.CompletionTokens)); err != nil {
		return fmt.Errorf("%w: token ledger: %v", ErrUnavailable, err)
	}
	return nil
}

// Pull downloads a model (blocking until done or ctx/PullTimeout ends).
func (c *Client) Pull(ctx context.Context, model string) error {
	timeout := c.cfg.PullTimeout
	if timeout <= 0 {
		timeout = DefaultPullTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stream := false
	err := c.api.Pull(pctx, &api.PullRequest{Model: model, Stream: &stream}, func(api.ProgressResponse) error { return nil })
	return classify(ctx, err, "pull", model, c.host)
}

// ModelStatus is one configured model in a readiness report.
type ModelStatus struct {
	Role    Role
	Model   string
	Present bool
}

// Readiness is what Check found.
type Readiness struct {
	Host     string
	Version  string
	Models   []ModelStatus
	EmbedDim int
}

// Check contacts Ollama and checks that every configured model is installed.
// The error wraps ErrUnavailable when Ollama cannot be reached and
// ErrModelMissing (naming each model and the `ollama pull` command) when a
// model is missing. It is meant to be reported, not to stop the process.
func (c *Client) Check(ctx context.Context) (Readiness, error) {
	rd := Readiness{Host: c.host}
	v, err := c.api.Version(ctx)
	if err != nil {
		return rd, classify(ctx, err, "version", "", c.host)
	}
	rd.Version = v
	list, err := c.api.List(ctx)
	if err != nil {
		return rd, classify(ctx, err, "list", "", c.host)
	}
	installed := map[string]bool{}
	for _, m := range list.Models {
		installed[normalName(m.Name)] = true
		installed[normalName(m.Model)] = true
	}
	var errs []error
	for _, r := range append(append([]Role(nil), ChatRoles...), RoleEmbed) {
		mc, _ := c.cfg.Model(r)
		if mc.Name == "" {
			continue
		}
		ok := installed[normalName(mc.Name)]
		rd.Models = append(rd.Models, ModelStatus{Role: r, Model: mc.Name, Present: ok})
		if !ok {
			errs = append(errs, missingModel(mc.Name, c.host, string(r)+" model not in /api/tags"))
		}
	}
	if c.cfg.Embed.Name != "" && installed[normalName(c.cfg.Embed.Name)] && c.embedDim.Load() == 0 {
		if show, err := c.api.Show(ctx, &api.ShowRequest{Model: c.cfg.Embed.Name}); err == nil {
			for k, v := range show.ModelInfo {
				if strings.HasSuffix(k, ".embedding_length") {
					if f, ok := v.(float64); ok && f > 0 {
						c.embedDim.CompareAndSwap(0, int64(f))
					}
				}
			}
		}
	}
	rd.EmbedDim = int(c.embedDim.Load())
	return rd, errors.Join(errs...)
}

// normalName adds Ollama's implicit ":latest" tag.
func normalName(n string) string {
	if n == "" {
		return n
	}
	if i := strings.LastIndex(n, "/"); !strings.Contains(n[i+1:], ":") {
		return n + ":latest"
	}
	return n
}

// Embedder returns the Ollama embedder of the configured embed model, or nil
// when no embedding model is configured.
func (c *Client) Embedder() *OllamaEmbedder {
	if c.cfg.Embed.Name == "" {
		return nil
	}
	return &OllamaEmbedder{c: c}
}

// OllamaEmbedder embeds with the configured Ollama embedding model.
type OllamaEmbedder struct {
	c *Client
}

var _ Embedder = (*OllamaEmbedder)(nil)

// Model is the embedding model's name.
func (e *OllamaEmbedder) Model() string { return e.c.cfg.Embed.Name }

// Dim is the vector length: Config.EmbedDim, else what Check or the first
// Embed call learned, else 0.
func (e *OllamaEmbedder) Dim() int { return int(e.c.embedDim.Load()) }

// Embed returns one vector per text, in batches of Config.EmbedBatch.
func (e *OllamaEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c := e.c
	mc := c.cfg.Embed
	out := make([][]float32, 0, len(texts))
	batch := max(c.cfg.EmbedBatch, 1)
	for i := 0; i < len(texts); i += batch {
		part := texts[i:min(i+batch, len(texts))]
		start := c.now()
		vecs, tokens, est, err := e.embedBatch(ctx, part, mc)
		c.obs.ObserveCall(CallInfo{Op: "embed", Role: RoleEmbed, Model: mc.Name, Latency: c.now().Sub(start),
			PromptTokens: tokens, Estimated: est, Err: err, Class: Classify(err)})
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

func (e *OllamaEmbedder) embedBatch(ctx context.Context, texts []string, mc ModelConfig) ([][]float32, int, bool, error) {
	c := e.c
	truncate := true
	req := &api.EmbedRequest{Model: mc.Name, Input: texts, KeepAlive: keepAlive(mc.KeepAlive), Truncate: &truncate}
	var resp *api.EmbedResponse
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, mc.Timeout)
		r, err := c.api.Embed(cctx, req)
		cancel()
		err = classify(ctx, err, "embed", mc.Name, c.host)
		if err == nil {
			resp = r
			break
		}
		if attempt == 0 && c.cfg.AutoPull && errors.Is(err, ErrModelMissing) {
			if perr := c.Pull(ctx, mc.Name); perr == nil {
				continue
			} else {
				return nil, 0, false, fmt.Errorf("%w (auto-pull failed: %v)", err, perr)
			}
		}
		return nil, 0, false, err
	}
	if len(resp.Embeddings) != len(texts) {
		return nil, 0, false, fmt.Errorf("%w: embed %s: %d vectors for %d texts", ErrMisbehaved, mc.Name, len(resp.Embeddings), len(texts))
	}
	for i, v := range resp.Embeddings {
		if len(v) == 0 {
			return nil, 0, false, fmt.Errorf("%w: embed %s: empty vector for text %d", ErrMisbehaved, mc.Name, i)
		}
		if c.embedDim.CompareAndSwap(0, int64(len(v))) {
			continue
		}
		if want := int(c.embedDim.Load()); len(v) != want {
			return nil, 0, false, fmt.Errorf("%w: embed %s: vector of dimension %d, expected %d", ErrInvalidRequest, mc.Name, len(v), want)
		}
	}
	tokens, est := resp.PromptEvalCount, false
	if tokens == 0 {
		for _, t := range texts {
			tokens += EstimateTokens(t)
		}
		est = true
	}
	return resp.Embeddings, tokens, est, nil
}

// WaitReady calls Check every interval until it succeeds or ctx ends,
// passing each failed result to report (may be nil) so the caller can say
// why it waits. It returns the last readiness and nil, or ctx's error.
func (c *Client) WaitReady(ctx context.Context, interval time.Duration, report func(Readiness, error)) (Readiness, error) {
	if interval <= 0 {
		interval = 5 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		rd, err := c.Check(ctx)
		if err == nil {
			return rd, nil
		}
		if ctx.Err() != nil {
			return rd, ctx.Err()
		}
		if report != nil {
			report(rd, err)
		}
		select {
		case <-ctx.Done():
			return rd, ctx.Err()
		case <-t.C:
		}
	}
}
