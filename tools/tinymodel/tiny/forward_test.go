package tiny

import (
	"math"
	"slices"
	"testing"
)

// forward is a plain-Go llama forward pass over the generated tensors (the
// same arithmetic llama.cpp does: RMSNorm, rotary NORM mode on adjacent
// pairs, grouped-query causal attention, SwiGLU), used to check the
// hand-set tricks without a server. It returns the logits after the last
// token.
func forward(m *Model, toks []int) []float64 {
	w := map[string][]float32{}
	for _, t := range m.Tensor {
		w[t.Name] = t.Data
	}
	vocab := len(m.Tokens)
	matvec := func(mat []float32, rows, cols int, x []float64) []float64 {
		out := make([]float64, rows)
		for r := 0; r < rows; r++ {
			s := 0.0
			for c := 0; c < cols; c++ {
				s += float64(mat[r*cols+c]) * x[c]
			}
			out[r] = s
		}
		return out
	}
	rmsnorm := func(x []float64, g []float32) []float64 {
		s := 0.0
		for _, v := range x {
			s += v * v
		}
		k := 1 / math.Sqrt(s/float64(len(x))+normEps)
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = v * k * float64(g[i])
		}
		return out
	}
	rope := func(v []float64, pos int) {
		for h := 0; h < len(v)/headDim; h++ {
			for i := 0; i < headDim/2; i++ {
				theta := float64(pos) * math.Pow(ropeBase, -2*float64(i)/headDim)
				a, b := v[h*headDim+2*i], v[h*headDim+2*i+1]
				c, s := math.Cos(theta), math.Sin(theta)
				v[h*headDim+2*i], v[h*headDim+2*i+1] = a*c-b*s, a*s+b*c
			}
		}
	}
	n := len(toks)
	xs := make([][]float64, n)
	for p, t := range toks {
		xs[p] = make([]float64, Width)
		for c := 0; c < Width; c++ {
			xs[p][c] = float64(w["token_embd.weight"][t*Width+c])
		}
	}
	for l := 0; l < Layers; l++ {
		pre := "blk." + string(rune('0'+l)) + "."
		qs, ks, vs := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for p := 0; p < n; p++ {
			h := rmsnorm(xs[p], w[pre+"attn_norm.weight"])
			qs[p] = matvec(w[pre+"attn_q.weight"], Width, Width, h)
			ks[p] = matvec(w[pre+"attn_k.weight"], kvWidth, Width, h)
			vs[p] = matvec(w[pre+"attn_v.weight"], kvWidth, Width, h)
			rope(qs[p], p)
			rope(ks[p], p)
		}
		for p := 0; p < n; p++ {
			att := make([]float64, Width)
			for hq := 0; hq < Heads; hq++ {
				hk := hq / (Heads / KVHeads)
				scores := make([]float64, p+1)
				mx := math.Inf(-1)
				for j := 0; j <= p; j++ {
					s := 0.0
					for d := 0; d < headDim; d++ {
						s += qs[p][hq*headDim+d] * ks[j][hk*headDim+d]
					}
					scores[j] = s / math.Sqrt(headDim)
					mx = max(mx, scores[j])
				}
				sum := 0.0
				for j := range scores {
					scores[j] = math.Exp(scores[j] - mx)
					sum += scores[j]
				}
				for j := range scores {
					for d := 0; d < headDim; d++ {
						att[hq*headDim+d] += scores[j] / sum * vs[j][hk*headDim+d]
					}
				}
			}
			o := matvec(w[pre+"attn_output.weight"], Width, Width, att)
			for c := range o {
				xs[p][c] += o[c]
			}
			h := rmsnorm(xs[p], w[pre+"ffn_norm.weight"])
			g := matvec(w[pre+"ffn_gate.weight"], FFN, Width, h)
			u := matvec(w[pre+"ffn_up.weight"], FFN, Width, h)
			for i := range g {
				g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
			}
			d := matvec(w[pre+"ffn_down.weight"], Width, FFN, g)
			for c := range d {
				xs[p][c] += d[c]
			}
		}
	}
	final := rmsnorm(xs[n-1], w["output_norm.weight"])
	return matvec(w["output.weight"], vocab, Width, final)
}

func argmax(v []float64) (int, float64) {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	second := math.Inf(-1)
	for i := range v {
		if i != best {
			second = max(second, v[i])
		}
	}
	return best, v[best] - second
}

// chatPrompt tokenizes a ChatML prompt the simple way (bytes plus the
// special tokens): enough for the checks, which do not depend on merges.
func chatPrompt(m *Model, parts ...any) []int {
	var out []int
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			if id := slices.Index(m.Tokens, p); id >= 256 && m.Types[id] != tokNormal {
				out = append(out, id)
				continue
			}
			for _, b := range []byte(p) {
				out = append(out, int(b))
			}
		case int:
			out = append(out, p)
		}
	}
	return out
}

func TestForwardTricks(t *testing.T) {
	calls := append(DefaultCalls(), Call{Name: "recall", Arguments: map[string]any{"query": "x"}, Bare: true})
	m, err := Build(Options{Seed: 1, Calls: calls})
	if err != nil {
		t.Fatal(err)
	}
	callTok := make([]int, len(m.Calls)) // first piece of each call
	pieceToks := make([][]int, len(m.Calls))
	var allPieces []int
	for i := range m.Calls {
		for _, text := range m.Pieces[i] {
			id := slices.Index(m.Tokens, text)
			if id < 0 {
				t.Fatalf("call %d: piece %q is not a token", i, text)
			}
			pieceToks[i] = append(pieceToks[i], id)
			allPieces = append(allPieces, id)
		}
		callTok[i] = pieceToks[i][0]
	}
	user := func(content ...any) []any {
		return append(append([]any{TokIMStart, "user\n"}, content...), TokIMEnd, "\n")
	}
	assistant := []any{TokIMStart, "assistant\n"}
	prompt := func(parts ...[]any) []int {
		var all []any
		for _, p := range parts {
			all = append(all, p...)
		}
		return chatPrompt(m, all...)
	}

	for i := range m.Calls {
		toks := prompt(user("look this up ", CallControl(i), " please"), assistant)
		logits := forward(m, toks)
		best, margin := argmax(logits)
		t.Logf("call %d: call token margin %.1f", i, margin)
		if best != callTok[i] || margin < 10 {
			t.Errorf("call %d: next token %d (%q) margin %.1f, want the call token %d", i, best, m.Tokens[best], margin, callTok[i])
		}
		// Each piece leads to the next; the last to the end token.
		for k, id := range pieceToks[i] {
			toks = append(toks, id)
			want := m.EOS
			if k+1 < len(pieceToks[i]) {
				want = pieceToks[i][k+1]
			}
			logits = forward(m, toks)
			best, margin = argmax(logits)
			t.Logf("call %d: after piece %d: margin %.1f", i, k, margin)
			if best != want || margin < 10 {
				t.Errorf("call %d: after piece %d comes %d (%q) margin %.1f, want %q", i, k, best, m.Tokens[best], margin, m.Tokens[want])
			}
		}
		// After the tool result the call is off: text, not another call.
		history := []any{TokIMStart, "assistant\n"}
		for _, id := range pieceToks[i] {
			history = append(history, id)
		}
		history = append(history, TokIMEnd, "\n")
		toks = prompt(user("look this up ", CallControl(i)), history,
			user(TokToolResponse, `{"ok":true}</tool_response>`), assistant)
		logits = forward(m, toks)
		best, _ = argmax(logits)
		if slices.Contains(allPieces, best) || best == m.EOS || best >= 256+len(merges) {
			t.Errorf("call %d: after the tool result the model emits %q", i, m.Tokens[best])
		}
	}

	// No control token: ordinary printable text, never a call, never an
	// empty reply.
	logits := forward(m, prompt(user("hello there"), assistant))
	top := slices.Max(logits)
	for _, id := range allPieces {
		if logits[id] > top-10 {
			t.Errorf("call token %d has logit %.1f without its control token", id, logits[id])
		}
	}
	best, _ := argmax(logits)
	if best == m.EOS || !(best == '\n' || (best >= ' ' && best <= '~') || (best >= 256 && best < 256+len(merges))) {
		t.Errorf("first reply token %d (%q)", best, m.Tokens[best])
	}
	// Mid-text the end token gets a steady, moderate chance.
	logits = forward(m, prompt(user("hello there"), assistant, []any{"abc"}))
	order := make([]int, len(logits))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return -cmpF(logits[a], logits[b]) })
	rank := slices.Index(order, m.EOS)
	if rank > 20 {
		t.Errorf("end token ranks %d mid-text", rank)
	}
	for _, id := range order[:10] {
		if id != m.EOS && !(id == '\n' || (id >= ' ' && id <= '~') || (id >= 256 && id < 256+len(merges))) {
			t.Errorf("top token %d (%q) is not ASCII text", id, m.Tokens[id])
		}
	}
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
