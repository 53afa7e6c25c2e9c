package tiny

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Shape of the tiny model.
const (
	Width      = 64    // embedding length; the embedding dimension Ollama returns
	Layers     = 2     // transformer blocks
	Heads      = 4     // attention heads
	KVHeads    = 2     // key/value heads (grouped-query attention)
	FFN        = 128   // feed-forward length
	Context    = 32768 // training context length (qwen2.5's, the default chat model's: the byte-level tokenizer makes prompts long)
	headDim    = Width / Heads
	kvWidth    = KVHeads * headDim
	ropeBase   = 1e6 // slow rotary frequencies: the control head's score barely depends on distance
	normEps    = 1e-5
	maxCalls   = 4 // control-token slots
	noiseLayer = 0.05
)

// Special token texts.
const (
	TokEndOfText    = "<|endoftext|>"
	TokIMStart      = "<|im_start|>"
	TokIMEnd        = "<|im_end|>"
	TokToolResponse = "<tool_response>"
)

// CallControl returns the text of the control token that makes the chat model
// emit tool call i (see Options.Calls). Put it in a user message.
func CallControl(i int) string { return fmt.Sprintf("<|engram_call_%d|>", i) }

// Call is one fixed tool call the model can be made to emit.
type Call struct {
	Name      string         // tool name; it must be among the tools the request offers
	Arguments map[string]any // JSON object
	// Bare: the call is emitted as bare JSON, without the <tool_call> tags,
	// in pieces split after every '}' (a chunk of streamed output ends
	// there), for a template whose tool-call tag is "{" (BareModelfile).
	// At most 4 pieces.
	Bare bool
}

// Options choose what Generate writes.
type Options struct {
	Seed  uint64 // seeds the random weights; same seed, same bytes
	Calls []Call // at most 4; call i is emitted after CallControl(i)
}

// DefaultCalls are the calls of a model generated without -call flags: call 0
// is an ordinary recall; call 1 has a string argument containing '}' (which
// Ollama's tool-call parser is known to mishandle); call 2 is call 1 as bare
// JSON streamed in pieces.
func DefaultCalls() []Call {
	return []Call{
		{Name: "recall", Arguments: map[string]any{"query": "tiny model facts"}},
		{Name: "recall", Arguments: map[string]any{"query": "close } brace"}},
		{Name: "recall", Arguments: map[string]any{"query": "close } brace"}, Bare: true},
	}
}

// CallText is the exact text the model emits for call c, rendered raw by
// llama.cpp: <tool_call>JSON</tool_call> as one token, or for a Bare call the
// JSON (see CallPieces).
func CallText(c Call) (string, error) {
	args, err := json.Marshal(c.Arguments)
	if err != nil {
		return "", fmt.Errorf("tool call %s: arguments: %w", c.Name, err)
	}
	name, _ := json.Marshal(c.Name)
	text := `{"name":` + string(name) + `,"arguments":` + string(args) + `}`
	if c.Bare {
		return text, nil
	}
	return "<tool_call>" + text + "</tool_call>", nil
}

// maxPieces bounds the tokens of one call (the chain channels available).
const maxPieces = 4

// CallPieces returns the tokens the model emits for call c, in order: one
// for a tagged call; for a Bare call the JSON split after every '}', a lone
// final "}" getting a newline (so the piece is not a plain "}", which would
// capture every '}' of the prompts).
func CallPieces(c Call) ([]string, error) {
	text, err := CallText(c)
	if err != nil {
		return nil, err
	}
	if !c.Bare {
		return []string{text}, nil
	}
	var pieces []string
	for len(text) > 0 {
		i := strings.IndexByte(text, '}')
		if i < 0 {
			pieces = append(pieces, text)
			break
		}
		pieces = append(pieces, text[:i+1])
		text = text[i+1:]
	}
	if last := len(pieces) - 1; pieces[last] == "}" {
		pieces[last] = "}\n"
	}
	if len(pieces) > maxPieces {
		return nil, fmt.Errorf("tool call %s: %d pieces, at most %d (fewer '}')", c.Name, len(pieces), maxPieces)
	}
	return pieces, nil
}

// Token types (llama.cpp's llama_token_type).
const (
	tokNormal      int32 = 1
	tokControl     int32 = 3
	tokUserDefined int32 = 4
)

// Reserved residual channels; channels reservedChannels..Width-1 are random.
const (
	chBias     = 0  // constant on every token: carries per-token output biases
	chAttend   = 1  // keys of the control head (control and tool-response tokens)
	chSlot0    = 2  // chSlot0+i: +1 on control token i, -1 on the tool-response token
	chChain0   = 6  // chChain0+k: set on piece k of a call that has a piece k+1
	chPad      = 9  // evens out the norms of the control and tool-response tokens
	chEmitted  = 10 // set on call tokens: the next token is the end token
	chMode0    = 11 // chMode0+i: written by the control head while call i is pending
	chNewline  = 15 // set on the newline token: a reply never ends right after a newline
	reservedCh = 16
)

// Magnitudes of the hand-set weights (see docs/ollama.md for the arithmetic).
const (
	embBias     = 4.0  // chBias on every token
	embSpecial  = 4.0  // chAttend / chSlot on control and tool-response tokens
	embEmitted  = 6.0  // chEmitted on call tokens
	qkScale     = 3.0  // control head query (from chBias) and key (from chAttend)
	voScale     = 1.4  // control head value and output projections
	outCall     = 14.0 // call token logit per unit of its mode channel
	outEmitted  = 30.0 // end token vs call token after a call token
	outCallBias = -3.0 // per unit of chBias: call tokens stay out of ordinary text
	outBan      = -8.0 // per unit of chBias: bytes and specials that never appear
	outEnd      = 0.6  // per unit of chBias: the steady bias toward the end token
	outCloser   = 0.35 // per unit of chBias: '"', '}', ']', ',' so JSON strings end
	outNoise    = 0.25 // random output weights of ordinary tokens
)

// Model is the generated vocabulary, metadata and tensors.
type Model struct {
	Tokens []string
	Types  []int32
	Merges []string
	KV     []KV
	Tensor []Tensor
	EOS    int
	Calls  []Call
	Pieces [][]string // the token texts each call is emitted as
}

var merges = [][2]string{{"Ġ", "t"}, {"t", "h"}, {"i", "n"}, {"e", "r"}, {"a", "n"}, {"Ġ", "a"}}

// byteToUnicode is GPT-2's byte-level BPE alphabet: printable bytes map to
// themselves, the others to code points from 256 on.
func byteToUnicode() [256]rune {
	var m [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[b] = rune(b)
		} else {
			m[b] = rune(256 + n)
			n++
		}
	}
	return m
}

// Build makes the model for opts.
func Build(opts Options) (*Model, error) {
	if len(opts.Calls) > maxCalls {
		return nil, fmt.Errorf("tiny: %d calls, at most %d", len(opts.Calls), maxCalls)
	}
	var errs []error
	callPieces := make([][]string, len(opts.Calls))
	seen := map[string]bool{}
	for i, c := range opts.Calls {
		if c.Name == "" {
			errs = append(errs, fmt.Errorf("tiny: call %d has no name", i))
		}
		p, err := CallPieces(c)
		if err != nil {
			errs = append(errs, fmt.Errorf("tiny: %w", err))
		}
		for k, piece := range p {
			// Bare calls all end with a lone "}": give each its own token
			// by adding newlines.
			for k == len(p)-1 && strings.HasPrefix(piece, "}\n") && seen[piece] {
				piece += "\n"
			}
			if seen[piece] {
				errs = append(errs, fmt.Errorf("tiny: call %d: piece %q is already a token of another call", i, piece))
			}
			seen[piece] = true
			p[k] = piece
		}
		callPieces[i] = p
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	m := &Model{Calls: opts.Calls, Pieces: callPieces}
	b2u := byteToUnicode()
	for b := 0; b < 256; b++ {
		m.Tokens = append(m.Tokens, string(b2u[b]))
		m.Types = append(m.Types, tokNormal)
	}
	for _, mg := range merges {
		m.Tokens = append(m.Tokens, mg[0]+mg[1])
		m.Types = append(m.Types, tokNormal)
		m.Merges = append(m.Merges, mg[0]+" "+mg[1])
	}
	add := func(text string, typ int32) int {
		m.Tokens = append(m.Tokens, text)
		m.Types = append(m.Types, typ)
		return len(m.Tokens) - 1
	}
	eot := add(TokEndOfText, tokControl)
	add(TokIMStart, tokControl)
	m.EOS = add(TokIMEnd, tokControl)
	toolResp := add(TokToolResponse, tokControl)
	ctl := make([]int, len(opts.Calls))
	pieces := make([][]int, len(opts.Calls)) // token ids of each call's pieces
	for i := range opts.Calls {
		ctl[i] = add(CallControl(i), tokControl)
	}
	for i := range opts.Calls {
		for _, text := range callPieces[i] {
			pieces[i] = append(pieces[i], add(text, tokUserDefined))
		}
	}
	vocab := len(m.Tokens)

	rng := rand.New(rand.NewPCG(opts.Seed, 0x656e6772616d)) // "engram"
	normal := func(std float64) float32 { return float32(rng.NormFloat64() * std) }
	randMat := func(rows, cols int, std float64) []float32 {
		out := make([]float32, rows*cols)
		for i := range out {
			out[i] = normal(std)
		}
		return out
	}
	ones := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = 1
		}
		return out
	}

	// Token embeddings: a constant bias channel, reserved channels for the
	// tricks, random unit-variance channels for everything else.
	emb := make([]float32, vocab*Width)
	for t := 0; t < vocab; t++ {
		row := emb[t*Width : (t+1)*Width]
		row[chBias] = embBias
		if m.Types[t] == tokNormal {
			for c := reservedCh; c < Width; c++ {
				row[c] = normal(1)
			}
		}
	}
	// The control head's keys and values go through RMSNorm: control and
	// tool-response tokens get the same norm (chPad), so one response
	// cancels one control token exactly.
	for i, id := range ctl {
		row := emb[id*Width : (id+1)*Width]
		row[chAttend] = embSpecial
		row[chSlot0+i] = embSpecial
		row[chPad] = embSpecial * float32(math.Sqrt(maxCalls-1))
	}
	{
		row := emb[toolResp*Width : (toolResp+1)*Width]
		row[chAttend] = embSpecial
		for i := range ctl {
			row[chSlot0+i] = -embSpecial
		}
		row[chPad] = embSpecial * float32(math.Sqrt(float64(maxCalls-len(ctl))))
	}
	// Piece k of a call carries chain channel k, or "emitted" when it is
	// the last piece.
	for _, ids := range pieces {
		for k, id := range ids {
			if k == len(ids)-1 {
				emb[id*Width+chEmitted] = embEmitted
			} else {
				emb[id*Width+chChain0+k] = embEmitted
			}
		}
	}
	// The prompt ends with "assistant\n": the newline channel keeps the
	// reply from being empty.
	emb['\n'*Width+chNewline] = embSpecial

	// Output projection: random for ordinary text, hand-set biases through
	// chBias, and the call / end-token wiring.
	out := make([]float32, vocab*Width)
	for t := 0; t < vocab; t++ {
		row := out[t*Width : (t+1)*Width]
		printable := t < 256 && (t == '\n' || (t >= ' ' && t <= '~'))
		if printable || (t >= 256 && t < 256+len(merges)) {
			for c := reservedCh; c < Width; c++ {
				row[c] = normal(outNoise)
			}
			switch t {
			case '"', '}', ']', ',':
				row[chBias] = outCloser
			}
		} else {
			row[chBias] = outBan
		}
	}
	out[m.EOS*Width+chBias] = outEnd
	out[m.EOS*Width+chEmitted] = outEmitted
	out[m.EOS*Width+chNewline] = -outEmitted
	// A pending call i (its mode channel) selects the call's pieces; the
	// chain channel of piece k selects piece k+1 over piece 0; "emitted"
	// selects the end token over everything.
	for i, ids := range pieces {
		for k, id := range ids {
			row := out[id*Width : (id+1)*Width]
			row[chBias] = outCallBias
			row[chMode0+i] = outCall
			row[chEmitted] = -outEmitted
			for j := 0; j < maxPieces-1; j++ {
				row[chChain0+j] = -outEmitted
			}
			if k > 0 {
				// Only after piece k-1: a lower baseline than piece 0.
				row[chChain0+k-1] = outEmitted
				row[chBias] = outCallBias - 8
			}
		}
	}

	tensors := []Tensor{
		{Name: "token_embd.weight", Dims: []uint64{Width, uint64(vocab)}, Data: emb},
	}
	for l := 0; l < Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		wq := randMat(Width, Width, noiseLayer)
		wk := randMat(kvWidth, Width, noiseLayer)
		wv := randMat(kvWidth, Width, noiseLayer)
		wo := randMat(Width, Width, noiseLayer)
		if l == 0 {
			// Head 0 (key/value head 0) is the control head: every query
			// looks for the control and tool-response tokens; their values
			// carry the slot signs into the mode channels. Rotary pair 7
			// (dims 14, 15) turns slowest.
			const qk = 14
			for r := 0; r < headDim; r++ {
				for c := 0; c < Width; c++ {
					wq[r*Width+c] = 0
					wk[r*Width+c] = 0
					wv[r*Width+c] = 0
				}
			}
			wq[qk*Width+chBias] = qkScale
			wk[qk*Width+chAttend] = qkScale
			for i := range opts.Calls {
				wv[i*Width+chSlot0+i] = voScale
			}
			for r := 0; r < Width; r++ {
				for c := 0; c < headDim; c++ {
					wo[r*Width+c] = 0
				}
			}
			for i := range opts.Calls {
				wo[(chMode0+i)*Width+i] = voScale
			}
		}
		// Keep the reserved channels clean of layer noise so the tricks
		// stay exact: nothing but the control head writes them.
		gate := randMat(FFN, Width, noiseLayer)
		up := randMat(FFN, Width, noiseLayer)
		down := randMat(Width, FFN, noiseLayer)
		for r := 0; r < reservedCh; r++ {
			for c := 0; c < FFN; c++ {
				down[r*FFN+c] = 0
			}
			for c := headDim; c < Width; c++ {
				wo[r*Width+c] = 0
			}
			if l != 0 || r < chMode0 || r >= chMode0+len(opts.Calls) {
				for c := 0; c < headDim; c++ {
					wo[r*Width+c] = 0
				}
			}
		}
		tensors = append(tensors,
			Tensor{Name: p + "attn_norm.weight", Dims: []uint64{Width}, Data: ones(Width)},
			Tensor{Name: p + "attn_q.weight", Dims: []uint64{Width, Width}, Data: wq},
			Tensor{Name: p + "attn_k.weight", Dims: []uint64{Width, kvWidth}, Data: wk},
			Tensor{Name: p + "attn_v.weight", Dims: []uint64{Width, kvWidth}, Data: wv},
			Tensor{Name: p + "attn_output.weight", Dims: []uint64{Width, Width}, Data: wo},
			Tensor{Name: p + "ffn_norm.weight", Dims: []uint64{Width}, Data: ones(Width)},
			Tensor{Name: p + "ffn_gate.weight", Dims: []uint64{Width, FFN}, Data: gate},
			Tensor{Name: p + "ffn_up.weight", Dims: []uint64{Width, FFN}, Data: up},
			Tensor{Name: p + "ffn_down.weight", Dims: []uint64{FFN, Width}, Data: down},
		)
	}
	tensors = append(tensors,
		Tensor{Name: "output_norm.weight", Dims: []uint64{Width}, Data: ones(Width)},
		Tensor{Name: "output.weight", Dims: []uint64{Width, uint64(vocab)}, Data: out},
	)
	m.Tensor = tensors

	m.KV = []KV{
		{"general.architecture", "llama"},
		{"general.name", "engram-tiny"},
		{"general.file_type", uint32(0)}, // all F32
		{"general.alignment", uint32(Alignment)},
		{"llama.context_length", uint32(Context)},
		{"llama.embedding_length", uint32(Width)},
		{"llama.block_count", uint32(Layers)},
		{"llama.feed_forward_length", uint32(FFN)},
		{"llama.attention.head_count", uint32(Heads)},
		{"llama.attention.head_count_kv", uint32(KVHeads)},
		{"llama.attention.layer_norm_rms_epsilon", float32(normEps)},
		{"llama.rope.dimension_count", uint32(headDim)},
		{"llama.rope.freq_base", float32(ropeBase)},
		{"llama.vocab_size", uint32(vocab)},
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", "default"},
		{"tokenizer.ggml.tokens", m.Tokens},
		{"tokenizer.ggml.token_type", m.Types},
		{"tokenizer.ggml.merges", m.Merges},
		{"tokenizer.ggml.bos_token_id", uint32(eot)},
		{"tokenizer.ggml.eos_token_id", uint32(m.EOS)},
		{"tokenizer.ggml.padding_token_id", uint32(eot)},
		{"tokenizer.ggml.add_bos_token", false},
		{"tokenizer.ggml.add_eos_token", false},
	}
	return m, nil
}

// Params counts the model's weights.
func (m *Model) Params() int {
	n := 0
	for _, t := range m.Tensor {
		n += len(t.Data)
	}
	return n
}

// checkFinite guards against NaN or Inf sneaking into the weights.
func (m *Model) checkFinite() error {
	for _, t := range m.Tensor {
		for _, v := range t.Data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("tiny: tensor %s has a non-finite value", t.Name)
			}
		}
	}
	return nil
}

// ChatTemplate is the Go template of the chat model: ChatML, tools listed as
// JSON in the system turn, tool calls as <tool_call>{...}</tool_call>, tool
// results as a user turn wrapped in the <tool_response> control token (which
// also switches the pending call off inside the model).
var ChatTemplate = chatTemplate(false)

// BareTemplate is ChatTemplate with tool calls rendered as bare JSON objects:
// Ollama then uses "{" as the tool-call tag.
var BareTemplate = chatTemplate(true)

func chatTemplate(bare bool) string {
	howTo := `To call a tool, reply with <tool_call>{"name": <name>, "arguments": <json object>}</tool_call>`
	calls := `{{- if .ToolCalls }}<tool_call>
{{- range .ToolCalls }}{"name": {{ json .Function.Name }}, "arguments": {{ json .Function.Arguments }}}{{ end }}</tool_call>
{{- end }}`
	if bare {
		howTo = `To call a tool, reply with {"name": <name>, "arguments": <json object>}`
		calls = `{{- if .ToolCalls }}
{{- range .ToolCalls }}{"name": {{ json .Function.Name }}, "arguments": {{ json .Function.Arguments }}}{{ end }}
{{- end }}`
	}
	return `{{- if or .System .Tools }}<|im_start|>system
{{ if .System }}{{ .System }}{{ end }}
{{- if .Tools }}
# Tools
<tools>
{{- range .Tools }}
{{ json . }}
{{- end }}
</tools>
` + howTo + `
{{- end }}<|im_end|>
{{ end }}
{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 }}
{{- if eq .Role "user" }}<|im_start|>user
{{ .Content }}<|im_end|>
{{ else if eq .Role "assistant" }}<|im_start|>assistant
{{ .Content }}
` + calls + `
{{- if not $last }}<|im_end|>
{{ end }}
{{- else if eq .Role "tool" }}<|im_start|>user
<tool_response>{{ .Content }}</tool_response><|im_end|>
{{ end }}
{{- if and (ne .Role "assistant") $last }}<|im_start|>assistant
{{ end }}
{{- end }}`
}

// Modelfiles returns the chat, the bare-JSON chat and the embedding
// Modelfile for a GGUF file named gguf in the same folder. num_thread is 1:
// llama.cpp's threads meet at spinning barriers after every operation, and
// on a loaded shared machine that made this tiny model ~1000x slower (400 ms
// instead of 0.3 ms a token).
func Modelfiles(gguf string) (chat, bare, embed string) {
	chatWith := func(tmpl string) string {
		return "FROM ./" + gguf + "\n" +
			"TEMPLATE \"\"\"" + tmpl + "\"\"\"\n" +
			"PARAMETER stop " + TokIMEnd + "\n" +
			"PARAMETER stop " + TokEndOfText + "\n" +
			"PARAMETER num_ctx " + fmt.Sprint(Context) + "\n" +
			"PARAMETER num_predict 512\n" +
			"PARAMETER num_thread 1\n"
	}
	embed = "FROM ./" + gguf + "\n" +
		"PARAMETER num_thread 1\n" +
		"PARAMETER num_ctx " + fmt.Sprint(Context) + "\n"
	return chatWith(ChatTemplate), chatWith(BareTemplate), embed
}

// escapeCheck makes sure the template has no triple quote that would end the
// Modelfile's TEMPLATE block early.
func init() {
	if strings.Contains(ChatTemplate+BareTemplate, `"""`) {
		panic("tiny: a template contains a triple quote")
	}
}
