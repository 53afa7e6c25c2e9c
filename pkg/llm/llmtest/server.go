package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/hashembed"
)

// Model names that Config uses and that every Server has installed.
const (
	ChatModel  = "llmtest-chat"
	EmbedModel = "llmtest-embed"
	// Version is what /api/version reports.
	Version = "0.17.4"
	// DefaultContextLength is the context length /api/show reports for a
	// model (model_info "llmtest.context_length") unless SetContextLength
	// changes it: qwen2.5's, the default chat model's.
	DefaultContextLength = 32768
	// DefaultNumCtx is the window of a chat request without num_ctx, as a
	// real Ollama 0.17 without a GPU uses.
	DefaultNumCtx = 4096
)

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	Body   []byte
	Time   time.Time
	// For a chat request: the num_ctx it sent (0: none), the server's
	// count of its prompt (PromptTokens), and Cut: the prompt exceeded the
	// window (num_ctx, else DefaultNumCtx, at most the model's context
	// length) without truncate=false, so a real Ollama would have dropped
	// its start silently. With truncate=false such a request is answered
	// 400 "the input length exceeds the context length", as Ollama does.
	NumCtx       int
	PromptTokens int
	Cut          bool
	// Exactly one of these is set for the paths that take a body.
	Chat  *api.ChatRequest
	Embed *api.EmbedRequest
	Show  *api.ShowRequest
	Pull  *api.PullRequest
}

// Server is a scripted Ollama-compatible HTTP server. Its zero value is not
// usable; call New. Safe for concurrent use.
type Server struct {
	t        testing.TB
	embedder *hashembed.Embedder

	mu          sync.Mutex
	addr        string
	hs          *http.Server
	ln          net.Listener
	conns       map[net.Conn]struct{}
	down        bool
	unavailable bool
	closing     chan struct{}
	closed      bool

	permissive bool
	noRecord   bool // WithoutRecording
	outLimit   bool // WithOutputLimit
	installed  map[string]bool
	missing    map[string]bool
	contexts   map[string]int // SetContextLength

	rules      []*rule
	fallback   Reply
	embedQueue []Reply
	pullQueue  []Reply
	latency    time.Duration

	requests  []Request
	calls     map[string]int
	unmatched int
	inflight  int
}

type rule struct {
	match   Matcher
	replies []Reply
	always  bool
}

// Option configures a Server.
type Option func(*Server)

// WithEmbedDim sets the dimension of the embeddings (default 384).
func WithEmbedDim(dim int) Option {
	return func(s *Server) { s.embedder = hashembed.New(dim) }
}

// WithoutRecording keeps no request (Requests, ChatRequests and LastChat
// return nothing; Calls and Unmatched still count): for a long-running server
// (the chaos suite's) whose memory would otherwise grow with every call.
func WithoutRecording() Option { return func(s *Server) { s.noRecord = true } }

// WithOutputLimit makes the server hold replies to the request's
// num_predict as Ollama does: a reply longer than num_predict tokens
// (Tokens) is cut there and answered with done_reason "length".
func WithOutputLimit() Option { return func(s *Server) { s.outLimit = true } }

// WithModels makes the server strict: only these models (plus ChatModel and
// EmbedModel) are installed; any other answers 404.
func WithModels(names ...string) Option {
	return func(s *Server) {
		s.permissive = false
		for _, n := range names {
			s.installed[normalName(n)] = true
		}
	}
}

// New starts a server on 127.0.0.1 and closes it when the test ends. By
// default every model name is accepted (see WithModels, RemoveModel) and a
// chat request that no script matches gets a 500 naming the request.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := start(t, opts...)
	if err != nil {
		t.Fatalf("llmtest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start is New without a test: the caller must Close the server. Methods
// that would fail a test (LastChat, Client) panic instead.
func Start(opts ...Option) (*Server, error) { return start(nil, opts...) }

func start(t testing.TB, opts ...Option) (*Server, error) {
	s := &Server{
		t:          t,
		embedder:   hashembed.New(hashembed.DefaultDim),
		conns:      map[net.Conn]struct{}{},
		closing:    make(chan struct{}),
		permissive: true,
		installed:  map[string]bool{normalName(ChatModel): true, normalName(EmbedModel): true},
		missing:    map[string]bool{},
		contexts:   map[string]int{},
		calls:      map[string]int{},
	}
	s.fallback = Func(func(req api.ChatRequest) Reply {
		last := ""
		if n := len(req.Messages); n > 0 {
			last = req.Messages[n-1].Content
		}
		return ServerError(fmt.Sprintf("llmtest: no scripted reply for chat request (model %q, %d messages, last: %.80q)",
			req.Model, len(req.Messages), last))
	})
	for _, o := range opts {
		o(s)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	return s, nil
}

func (s *Server) logf(format string, args ...any) {
	if s.t != nil {
		s.t.Logf(format, args...)
	}
}

func (s *Server) fatalf(format string, args ...any) {
	if s.t != nil {
		s.t.Helper()
		s.t.Fatalf(format, args...)
	}
	panic(fmt.Sprintf(format, args...))
}

func (s *Server) serve(ln net.Listener) {
	hs := &http.Server{
		Handler:           http.HandlerFunc(s.handle),
		ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(c net.Conn, st http.ConnState) {
			s.mu.Lock()
			defer s.mu.Unlock()
			switch st {
			case http.StateNew:
				s.conns[c] = struct{}{}
			case http.StateClosed, http.StateHijacked:
				delete(s.conns, c)
			}
		},
	}
	s.hs, s.ln = hs, ln
	go func() { _ = hs.Serve(ln) }()
}

// URL is the server's base URL, e.g. "http://127.0.0.1:41234".
func (s *Server) URL() string { return "http://" + s.addr }

// Config returns llm.DefaultConfig pointed at this server, with ChatModel for
// every chat role, EmbedModel for embeddings and 30s timeouts.
func (s *Server) Config() llm.Config {
	cfg := llm.DefaultConfig()
	cfg.Host = s.URL()
	for _, m := range []*llm.ModelConfig{&cfg.Extract, &cfg.Consolidate, &cfg.Summarize} {
		m.Name, m.Timeout = ChatModel, 30*time.Second
	}
	cfg.Embed.Name, cfg.Embed.Timeout = EmbedModel, 30*time.Second
	return cfg
}

// Client returns an llm.Client on Config().
func (s *Server) Client(opts ...llm.Option) *llm.Client {
	c, err := llm.New(s.Config(), opts...)
	if err != nil {
		s.fatalf("llmtest: client: %v", err)
	}
	return c
}

// Embedder is the hashing embedder whose vectors /api/embed returns.
func (s *Server) Embedder() *hashembed.Embedder { return s.embedder }

// OnChat scripts replies for chat requests the matcher accepts (nil: all),
// used once each, in order. Rules are tried in the order they were added;
// an exhausted rule is skipped.
func (s *Server) OnChat(m Matcher, replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, &rule{match: m, replies: replies})
}

// OnChatAlways answers every chat request the matcher accepts with reply.
func (s *Server) OnChatAlways(m Matcher, reply Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, &rule{match: m, replies: []Reply{reply}, always: true})
}

// Enqueue scripts replies for any chat request, in order (OnChat(nil, ...)).
func (s *Server) Enqueue(replies ...Reply) { s.OnChat(nil, replies...) }

// SetDefault sets the reply for chat requests no rule matches.
func (s *Server) SetDefault(r Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = r
}

// OnEmbed scripts faults (or delays) for the next embed calls, used once
// each; other embed calls return hashing-embedder vectors. A Reply without a
// fault answers normally (after its delay).
func (s *Server) OnEmbed(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embedQueue = append(s.embedQueue, replies...)
}

// OnPull scripts the next pull calls (e.g. ServerError) used once each;
// other pulls succeed and install the model.
func (s *Server) OnPull(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pullQueue = append(s.pullQueue, replies...)
}

// SetLatency delays every chat and embed answer by d.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// AddModel installs a model.
func (s *Server) AddModel(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.installed[normalName(name)] = true
	delete(s.missing, normalName(name))
}

// RemoveModel uninstalls a model: calls for it answer 404.
func (s *Server) RemoveModel(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.installed, normalName(name))
	s.missing[normalName(name)] = true
}

// SetContextLength sets the context length /api/show reports for a model
// (default DefaultContextLength); 0 leaves it out of the model's metadata,
// as for a model whose file does not say. Chat requests for the model are
// held to it (a num_ctx above it counts as it, as in Ollama).
func (s *Server) SetContextLength(model string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.contexts[normalName(model)] = n
}

// contextLength is a model's context length (0: none declared).
func (s *Server) contextLength(model string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.contexts[normalName(model)]; ok {
		return n
	}
	return DefaultContextLength
}

// Tokens is the server's count of a text's tokens: its UTF-8 bytes / 4,
// rounded up (a plain text runs about 4 characters a token; a CJK
// character, 3 bytes, counts 0.75).
func Tokens(s string) int { return (len(s) + 3) / 4 }

// PromptTokens is the server's count of a chat request's prompt: every
// message's content and tool calls (Tokens) plus 4 for its template
// markers, and the tools offered.
func PromptTokens(req api.ChatRequest) int {
	n := 0
	for _, m := range req.Messages {
		n += Tokens(m.Content) + 4
		for _, tc := range m.ToolCalls {
			n += Tokens(tc.Function.Name) + Tokens(tc.Function.Arguments.String())
		}
	}
	for _, t := range req.Tools {
		b, _ := json.Marshal(t)
		n += Tokens(string(b))
	}
	return n
}

// numPredict reads a request's num_predict option (0: none).
func numPredict(opts map[string]any) int {
	switch v := opts["num_predict"].(type) {
	case float64:
		return int(v)
	case int:
		return v
	}
	return 0
}

// cutBytes cuts s to at most n bytes on a rune boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// numCtx reads a request's num_ctx option (0: none).
func numCtx(opts map[string]any) int {
	switch v := opts["num_ctx"].(type) {
	case float64:
		return int(v)
	case int:
		return v
	}
	return 0
}

func (s *Server) hasModelLocked(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hasModel(name)
}

func (s *Server) hasModel(name string) bool {
	n := normalName(name)
	return s.installed[n] || (s.permissive && !s.missing[n])
}

// SetUnavailable makes every request answer 503 (true) or not (false).
func (s *Server) SetUnavailable(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unavailable = on
}

// Down stops listening and drops every connection: clients get "connection
// refused" until Up.
func (s *Server) Down() {
	s.mu.Lock()
	if s.down || s.closed {
		s.mu.Unlock()
		return
	}
	s.down = true
	hs, ln := s.hs, s.ln
	s.mu.Unlock()
	// Close the listener here too: Serve may not have started tracking it.
	_ = ln.Close()
	_ = hs.Close()
}

// Up listens again on the same address after Down.
func (s *Server) Up() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.down || s.closed {
		return
	}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		s.mu.Unlock()
		defer s.mu.Lock()
		s.fatalf("llmtest: relisten on %s: %v", s.addr, err)
	}
	s.down = false
	s.serve(ln)
}

// Close stops the server; hanging requests return. Called on test cleanup.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.closing)
	hs, ln := s.hs, s.ln
	s.mu.Unlock()
	_ = ln.Close()
	_ = hs.Close()
	// Wait (bounded) for handlers: delayed and hanging ones return on close.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.mu.Lock()
		n := s.inflight
		s.mu.Unlock()
		if n == 0 {
			return
		}
	}
}

// Requests returns every request received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// ChatRequests returns the chat requests received, in order.
func (s *Server) ChatRequests() []api.ChatRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []api.ChatRequest
	for _, r := range s.requests {
		if r.Chat != nil {
			out = append(out, *r.Chat)
		}
	}
	return out
}

// Chats returns the records of the chat requests received, in order, with
// their num_ctx, prompt count and whether a real Ollama would have cut
// them (Request.NumCtx, PromptTokens, Cut).
func (s *Server) Chats() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if r.Chat != nil {
			out = append(out, r)
		}
	}
	return out
}

// LastChat returns the last chat request; the test fails if there is none.
func (s *Server) LastChat() api.ChatRequest {
	reqs := s.ChatRequests()
	if len(reqs) == 0 {
		s.fatalf("llmtest: no chat request received")
	}
	return reqs[len(reqs)-1]
}

// Calls counts the requests received on a path, e.g. "/api/chat".
func (s *Server) Calls(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[path]
}

// Unmatched counts chat requests that no rule matched.
func (s *Server) Unmatched() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unmatched
}

// Reset forgets recorded requests, counts and scripts (models stay).
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests, s.calls, s.unmatched = nil, map[string]int{}, 0
	s.rules, s.embedQueue, s.pullQueue = nil, nil, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.inflight++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}()
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rec := Request{Method: r.Method, Path: r.URL.Path, Body: body, Time: time.Now()}
	decode := func(v any) bool {
		if len(bytes.TrimSpace(body)) == 0 {
			writeError(w, http.StatusBadRequest, "missing request body")
			return false
		}
		if err := json.Unmarshal(body, v); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return false
		}
		return true
	}
	var ok = true
	switch r.URL.Path {
	case "/api/chat":
		rec.Chat = &api.ChatRequest{}
		if ok = decode(rec.Chat); ok {
			rec.NumCtx, rec.PromptTokens = numCtx(rec.Chat.Options), PromptTokens(*rec.Chat)
			window := rec.NumCtx
			if window <= 0 {
				window = DefaultNumCtx
			}
			if n := s.contextLength(rec.Chat.Model); n > 0 {
				window = min(window, n)
			}
			rec.Cut = rec.PromptTokens > window
		}
	case "/api/embed":
		rec.Embed = &api.EmbedRequest{}
		ok = decode(rec.Embed)
	case "/api/show":
		rec.Show = &api.ShowRequest{}
		ok = decode(rec.Show)
	case "/api/pull":
		rec.Pull = &api.PullRequest{}
		ok = decode(rec.Pull)
	}
	s.mu.Lock()
	if !s.noRecord {
		s.requests = append(s.requests, rec)
	}
	s.calls[r.URL.Path]++
	unavailable := s.unavailable
	s.mu.Unlock()
	if !ok {
		return
	}
	if unavailable {
		writeError(w, http.StatusServiceUnavailable, "server busy, please try again.  maximum pending requests exceeded")
		return
	}
	switch {
	case r.URL.Path == "/" && (r.Method == http.MethodHead || r.Method == http.MethodGet):
		w.WriteHeader(http.StatusOK)
	case r.URL.Path == "/api/version":
		writeJSON(w, http.StatusOK, map[string]string{"version": Version})
	case r.URL.Path == "/api/tags":
		s.handleTags(w)
	case r.URL.Path == "/api/show" && r.Method == http.MethodPost:
		s.handleShow(w, rec.Show)
	case r.URL.Path == "/api/pull" && r.Method == http.MethodPost:
		s.handlePull(w, r, rec.Pull)
	case r.URL.Path == "/api/chat" && r.Method == http.MethodPost:
		if rec.Cut && rec.Chat.Truncate != nil && !*rec.Chat.Truncate && s.hasModelLocked(rec.Chat.Model) {
			// What the runner of a real Ollama answers (HTTP 400).
			writeError(w, http.StatusBadRequest, "the input length exceeds the context length")
			return
		}
		s.handleChat(w, r, rec.Chat)
	case r.URL.Path == "/api/embed" && r.Method == http.MethodPost:
		s.handleEmbed(w, r, rec.Embed)
	default:
		writeError(w, http.StatusNotFound, "404 page not found")
	}
}

func (s *Server) handleTags(w http.ResponseWriter) {
	s.mu.Lock()
	names := make([]string, 0, len(s.installed))
	for n := range s.installed {
		names = append(names, n)
	}
	s.mu.Unlock()
	slices.Sort(names)
	resp := api.ListResponse{Models: []api.ListModelResponse{}}
	for _, n := range names {
		resp.Models = append(resp.Models, api.ListModelResponse{Name: n, Model: n, Size: 1 << 20,
			Digest: fmt.Sprintf("%064x", len(n)), ModifiedAt: time.Now().UTC(),
			Details: api.ModelDetails{Format: "gguf", Family: "llmtest"}})
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) handleShow(w http.ResponseWriter, req *api.ShowRequest) {
	name := req.Model
	if name == "" {
		name = req.Name
	}
	s.mu.Lock()
	ok := s.hasModel(name)
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", name))
		return
	}
	info := map[string]any{
		"general.architecture":     "llmtest",
		"llmtest.embedding_length": s.embedder.Dim(),
	}
	if n := s.contextLength(name); n > 0 {
		info["llmtest.context_length"] = n
	}
	writeJSON(w, http.StatusOK, api.ShowResponse{
		Details:      api.ModelDetails{Format: "gguf", Family: "llmtest"},
		ModelInfo:    info,
		Capabilities: nil,
	})
}

func (s *Server) handlePull(w http.ResponseWriter, r *http.Request, req *api.PullRequest) {
	name := req.Model
	if name == "" {
		name = req.Name
	}
	s.mu.Lock()
	var rep *Reply
	if len(s.pullQueue) > 0 {
		rep = &s.pullQueue[0]
		s.pullQueue = s.pullQueue[1:]
	}
	s.mu.Unlock()
	if rep != nil && s.fault(w, r, *rep, name, "pull") {
		return
	}
	s.AddModel(name)
	writeJSON(w, http.StatusOK, api.ProgressResponse{Status: "success"})
}

// fault writes a scripted fault and reports whether it did. It also applies
// the reply's delay.
func (s *Server) fault(w http.ResponseWriter, r *http.Request, rep Reply, model, path string) bool {
	s.mu.Lock()
	delay := s.latency + rep.delay
	s.mu.Unlock()
	if delay > 0 && !s.wait(r.Context(), delay) {
		panic(http.ErrAbortHandler) // drop the connection without an answer
	}
	switch {
	case rep.hang:
		s.wait(r.Context(), -1)
		panic(http.ErrAbortHandler)
	case rep.status == http.StatusNotFound && rep.errMsg == "":
		writeError(w, http.StatusNotFound, missingMessage(model, path))
		return true
	case rep.status != 0:
		writeError(w, rep.status, rep.errMsg)
		return true
	case rep.rawSet:
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, rep.body)
		return true
	}
	return false
}

// missingMessage is Ollama's wording for a missing model on each path.
func missingMessage(model, path string) string {
	if path == "embed" {
		return fmt.Sprintf("model %q not found, try pulling it first", model)
	}
	return fmt.Sprintf("model '%s' not found", model)
}

// wait sleeps d (forever when d < 0) unless the request or server ends
// first; it reports whether the full time passed.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	var timer <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-timer:
		return true
	case <-ctx.Done():
		return false
	case <-s.closing:
		return false
	}
}

func (s *Server) pickChat(req api.ChatRequest) Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ru := range s.rules {
		if len(ru.replies) == 0 || (ru.match != nil && !ru.match(req)) {
			continue
		}
		rep := ru.replies[0]
		if !ru.always {
			ru.replies = ru.replies[1:]
		}
		return rep
	}
	s.unmatched++
	s.logf("llmtest: no scripted reply for chat request to %q (%d messages)", req.Model, len(req.Messages))
	return s.fallback
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request, req *api.ChatRequest) {
	if req.Model == "" {
		writeError(w, http.StatusBadRequest, "model is required")
		return
	}
	s.mu.Lock()
	ok := s.hasModel(req.Model)
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, missingMessage(req.Model, "chat"))
		return
	}
	// What a real Ollama rejects before running the model (with a 500).
	var opts api.Options
	if err := opts.FromMap(req.Options); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	var schema map[string]any
	if f := strings.TrimSpace(string(req.Format)); f != "" && f != "null" && f != `""` && f != `"json"` {
		if f[0] != '{' {
			writeError(w, http.StatusInternalServerError,
				fmt.Sprintf("invalid format: %q; expected \"json\" or a valid JSON Schema object", req.Format))
			return
		}
		if err := json.Unmarshal(req.Format, &schema); err != nil {
			writeError(w, http.StatusInternalServerError, "invalid JSON schema in format")
			return
		}
	}
	rep := s.pickChat(*req)
	for rep.fn != nil {
		rep = rep.fn(*req)
	}
	if s.fault(w, r, rep, req.Model, "chat") {
		return
	}
	content := rep.content
	if rep.example {
		if schema == nil {
			writeError(w, http.StatusInternalServerError, "llmtest: Example() reply to a request without a format schema")
			return
		}
		b, _ := json.Marshal(exampleOf(schema))
		content = string(b)
	}
	done := rep.doneReason
	if done == "" {
		done = "stop"
	}
	if n := numPredict(req.Options); s.outLimit && n > 0 && Tokens(content) > n {
		content, done = cutBytes(content, n*4), "length"
	}
	resp := api.ChatResponse{
		Model:      req.Model,
		CreatedAt:  time.Now().UTC(),
		Message:    api.Message{Role: "assistant", Content: content, ToolCalls: rep.toolCalls},
		Done:       true,
		DoneReason: done,
	}
	if !rep.noTokens {
		p, e := rep.promptTokens, rep.evalTokens
		if p == 0 {
			for _, m := range req.Messages {
				p += len(m.Content)/4 + 4
			}
		}
		if e == 0 {
			e = len(content)/4 + 1
			for _, tc := range rep.toolCalls {
				e += len(tc.Function.Arguments.String())/4 + 4
			}
		}
		resp.PromptEvalCount, resp.EvalCount = p, e
		resp.TotalDuration = time.Millisecond
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) handleEmbed(w http.ResponseWriter, r *http.Request, req *api.EmbedRequest) {
	if req.Model == "" {
		writeError(w, http.StatusBadRequest, "model is required")
		return
	}
	s.mu.Lock()
	ok := s.hasModel(req.Model)
	var rep Reply
	if len(s.embedQueue) > 0 {
		rep = s.embedQueue[0]
		s.embedQueue = s.embedQueue[1:]
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, missingMessage(req.Model, "embed"))
		return
	}
	if s.fault(w, r, rep, req.Model, "embed") {
		return
	}
	var input []string
	switch v := req.Input.(type) {
	case string:
		input = []string{v}
	case []any:
		for _, e := range v {
			str, ok := e.(string)
			if !ok {
				writeError(w, http.StatusBadRequest, "invalid input type")
				return
			}
			input = append(input, str)
		}
	case nil:
	default:
		writeError(w, http.StatusBadRequest, "invalid input type")
		return
	}
	vecs, err := s.embedder.Embed(r.Context(), input)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if vecs == nil {
		vecs = [][]float32{}
	}
	tokens := 0
	for _, t := range input {
		tokens += len(t)/4 + 1
	}
	writeJSON(w, http.StatusOK, api.EmbedResponse{Model: req.Model, Embeddings: vecs, PromptEvalCount: tokens})
}
