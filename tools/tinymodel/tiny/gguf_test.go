package tiny

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func encodeDefault(t *testing.T, seed uint64) ([]byte, *Model) {
	t.Helper()
	b, m, err := Encode(Options{Seed: seed, Calls: DefaultCalls()})
	if err != nil {
		t.Fatal(err)
	}
	return b, m
}

func TestGGUFHeaderAndMetadata(t *testing.T) {
	b, m := encodeDefault(t, 1)
	if string(b[:4]) != "GGUF" {
		t.Fatalf("magic %q", b[:4])
	}
	f, err := ReadGGUF(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 {
		t.Errorf("version %d, want 3", f.Version)
	}
	if len(f.Keys) != len(m.KV) {
		t.Fatalf("%d keys, want %d", len(f.Keys), len(m.KV))
	}
	for i, kv := range m.KV {
		if f.Keys[i] != kv.Key {
			t.Errorf("key %d = %q, want %q", i, f.Keys[i], kv.Key)
		}
	}
	want := map[string]any{
		"general.architecture":                   "llama",
		"llama.embedding_length":                 uint32(Width),
		"llama.block_count":                      uint32(Layers),
		"llama.attention.head_count":             uint32(Heads),
		"llama.attention.head_count_kv":          uint32(KVHeads),
		"llama.feed_forward_length":              uint32(FFN),
		"llama.context_length":                   uint32(Context),
		"llama.rope.dimension_count":             uint32(Width / Heads),
		"tokenizer.ggml.model":                   "gpt2",
		"tokenizer.ggml.add_bos_token":           false,
		"tokenizer.ggml.eos_token_id":            uint32(m.EOS),
		"llama.attention.layer_norm_rms_epsilon": float32(normEps),
	}
	for k, v := range want {
		if got := f.KV[k]; got != v {
			t.Errorf("%s = %#v, want %#v", k, got, v)
		}
	}
	toks, ok := f.KV["tokenizer.ggml.tokens"].([]any)
	if !ok || len(toks) != len(m.Tokens) {
		t.Fatalf("tokens: %T len %d, want %d", f.KV["tokenizer.ggml.tokens"], len(toks), len(m.Tokens))
	}
	if f.KV["llama.vocab_size"] != uint32(len(m.Tokens)) {
		t.Errorf("vocab_size %v, tokens %d", f.KV["llama.vocab_size"], len(m.Tokens))
	}
	// Byte tokens use GPT-2's byte-level alphabet: space is Ġ, 'a' is 'a'.
	if toks[' '] != "Ġ" || toks['a'] != "a" || toks['\n'] != "Ċ" {
		t.Errorf("byte tokens: space %q, a %q, newline %q", toks[' '], toks['a'], toks['\n'])
	}
	types := f.KV["tokenizer.ggml.token_type"].([]any)
	if toks[m.EOS] != TokIMEnd || types[m.EOS] != tokControl {
		t.Errorf("eos token %q type %v", toks[m.EOS], types[m.EOS])
	}
	// Every merge names two existing tokens whose concatenation exists.
	set := map[string]bool{}
	for _, tk := range toks {
		set[tk.(string)] = true
	}
	for _, mg := range f.KV["tokenizer.ggml.merges"].([]any) {
		l, r, ok := strings.Cut(mg.(string), " ")
		if !ok || !set[l] || !set[r] || !set[l+r] {
			t.Errorf("merge %q does not fit the vocabulary", mg)
		}
	}
	// The control tokens and call tokens are present.
	for i := range DefaultCalls() {
		pieces := m.Pieces[i]
		ci := slices.Index(m.Tokens, CallControl(i))
		if ci < 0 || types[ci] != tokControl {
			t.Errorf("call %d: control token %d", i, ci)
		}
		for _, p := range pieces {
			if ti := slices.Index(m.Tokens, p); ti < 0 || types[ti] != tokUserDefined {
				t.Errorf("call %d: piece %q token %d", i, p, ti)
			}
		}
	}
}

func TestGGUFTensorOffsetsAndData(t *testing.T) {
	b, m := encodeDefault(t, 7)
	f, err := ReadGGUF(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.DataOffset%Alignment != 0 {
		t.Errorf("data section at %d, not %d-aligned", f.DataOffset, Alignment)
	}
	if len(f.Tensors) != len(m.Tensor) || len(f.Tensors) != 3+9*Layers {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), 3+9*Layers)
	}
	var end uint64
	for i, ti := range f.Tensors {
		want := m.Tensor[i]
		if ti.Name != want.Name || !slices.Equal(ti.Dims, want.Dims) || ti.Type != 0 {
			t.Errorf("tensor %d: %s %v type %d, want %s %v F32", i, ti.Name, ti.Dims, ti.Type, want.Name, want.Dims)
		}
		if ti.Offset%Alignment != 0 {
			t.Errorf("tensor %s at offset %d, not aligned", ti.Name, ti.Offset)
		}
		if ti.Offset < end {
			t.Errorf("tensor %s at %d overlaps the previous one (ends %d)", ti.Name, ti.Offset, end)
		}
		end = ti.Offset + 4*uint64(len(want.Data))
		got, err := f.TensorData(b, ti)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want.Data) {
			t.Errorf("tensor %s: data differs after the round trip", ti.Name)
		}
	}
	if uint64(len(b)) != f.DataOffset+align(end) {
		t.Errorf("file is %d bytes, want data offset %d + %d", len(b), f.DataOffset, align(end))
	}
	if n := m.Params(); n < 100_000 || n > 120_000 {
		t.Errorf("%d parameters, want about 108k", n)
	}
	// Shapes the llama loader checks.
	dims := map[string][]uint64{}
	for _, ti := range f.Tensors {
		dims[ti.Name] = ti.Dims
	}
	vocab := uint64(len(m.Tokens))
	for name, want := range map[string][]uint64{
		"token_embd.weight":     {Width, vocab},
		"output.weight":         {Width, vocab},
		"blk.0.attn_k.weight":   {Width, Width / Heads * KVHeads},
		"blk.1.ffn_down.weight": {FFN, Width},
		"blk.1.ffn_gate.weight": {Width, FFN},
		"output_norm.weight":    {Width},
	} {
		if !slices.Equal(dims[name], want) {
			t.Errorf("%s dims %v, want %v", name, dims[name], want)
		}
	}
}

func TestDeterministicBySeed(t *testing.T) {
	a, _ := encodeDefault(t, 3)
	b, _ := encodeDefault(t, 3)
	c, _ := encodeDefault(t, 4)
	if !bytes.Equal(a, b) {
		t.Error("same seed gave different bytes")
	}
	if bytes.Equal(a, c) {
		t.Error("different seeds gave the same bytes")
	}
}

func TestGenerateWritesModelfiles(t *testing.T) {
	dir := t.TempDir()
	files, err := Generate(dir, Options{Seed: 1, Calls: DefaultCalls()})
	if err != nil {
		t.Fatal(err)
	}
	chat, err := os.ReadFile(files.Chat)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FROM ./" + GGUFName, `TEMPLATE """`, "{{ json . }}", ".ToolCalls", "<tool_call>", TokToolResponse, "PARAMETER stop " + TokIMEnd} {
		if !strings.Contains(string(chat), want) {
			t.Errorf("chat Modelfile lacks %q", want)
		}
	}
	bare, err := os.ReadFile(files.Bare)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(bare), "<tool_call>\n") || !strings.Contains(string(bare), ".ToolCalls") {
		t.Errorf("bare Modelfile renders tagged tool calls:\n%s", bare)
	}
	embed, err := os.ReadFile(files.Embed)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(embed), "FROM ./"+GGUFName+"\n") || strings.Contains(string(embed), "TEMPLATE") {
		t.Errorf("embed Modelfile:\n%s", embed)
	}
	if filepath.Dir(files.GGUF) != dir {
		t.Errorf("gguf at %s", files.GGUF)
	}
}

func TestCallPieces(t *testing.T) {
	got, err := CallPieces(Call{Name: "f", Arguments: map[string]any{"q": "a } b"}, Bare: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"name":"f","arguments":{"q":"a }`, ` b"}`, "}\n"}
	if !slices.Equal(got, want) {
		t.Errorf("pieces %q, want %q", got, want)
	}
	got, _ = CallPieces(Call{Name: "f", Arguments: map[string]any{"q": "x"}})
	if len(got) != 1 || !strings.HasPrefix(got[0], "<tool_call>{") || !strings.HasSuffix(got[0], "}</tool_call>") {
		t.Errorf("tagged call pieces %q", got)
	}
	if _, err := CallPieces(Call{Name: "f", Arguments: map[string]any{"q": "}}}}"}, Bare: true}); err == nil {
		t.Error("a call of 6 pieces was accepted")
	}
	// The same piece twice would be one token for two calls; only the
	// final "}" is made unique.
	two := []Call{{Name: "f", Bare: true}, {Name: "f", Bare: true}}
	if _, err := Build(Options{Calls: two}); err == nil {
		t.Error("two identical bare calls accepted")
	}
	empty := map[string]any{}
	m, err := Build(Options{Calls: []Call{{Name: "f", Arguments: empty, Bare: true}, {Name: "g", Arguments: empty, Bare: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Pieces[0]) != 2 || len(m.Pieces[1]) != 2 || m.Pieces[0][1] != "}\n" || m.Pieces[1][1] != "}\n\n" {
		t.Errorf("pieces %q", m.Pieces)
	}
}

func TestBuildRejectsBadOptions(t *testing.T) {
	five := make([]Call, 5)
	for i := range five {
		five[i] = Call{Name: "x"}
	}
	if _, err := Build(Options{Calls: five}); err == nil {
		t.Error("5 calls accepted")
	}
	_, err := Build(Options{Calls: []Call{{Name: ""}, {Name: "f", Arguments: map[string]any{"x": func() {}}}}})
	if err == nil || !strings.Contains(err.Error(), "no name") || !strings.Contains(err.Error(), "arguments") {
		t.Errorf("want both problems reported, got %v", err)
	}
}

func TestReadGGUFRejectsGarbage(t *testing.T) {
	good, _ := encodeDefault(t, 1)
	for name, b := range map[string][]byte{
		"empty":     nil,
		"magic":     []byte("GGUX\x03\x00\x00\x00"),
		"version":   append([]byte("GGUF\x02\x00\x00\x00"), make([]byte, 16)...),
		"truncated": good[:200],
	} {
		if _, err := ReadGGUF(b); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: err %v, want ErrFormat", name, err)
		}
	}
}

func FuzzReadGGUF(f *testing.F) {
	good, _, err := Encode(Options{Seed: 1, Calls: DefaultCalls()[:1]})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good[:4096])
	f.Add([]byte("GGUF\x03\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := ReadGGUF(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		for _, ti := range file.Tensors {
			_, _ = file.TensorData(b, ti)
		}
	})
}
