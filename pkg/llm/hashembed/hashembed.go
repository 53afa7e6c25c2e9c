// Package hashembed is Engram's built-in embedder for when no embedding model
// is configured: deterministic, no weights, no network.
//
// It is LEXICAL, NOT SEMANTIC. A text's vector is the signed feature hashing
// (Weinberger et al.) of its word unigrams (lower-cased, stop words dropped,
// crudely stemmed), word bigrams and character trigrams of each word,
// L2-normalised. Texts that share words, word stems or word fragments score
// close; paraphrases with no words in common do not, and a claim scores close
// to its own negation. Use a real embedding model (Ollama) for meaning.
//
// Vectors from different dimensions or versions are not comparable: store
// Model() with every vector (it names both).
package hashembed

import (
	"context"
	"fmt"
	"math"
	"strings"
	"unicode"

	"github.com/engram-memory/engram/pkg/llm"
)

// DefaultDim is the default vector length.
const DefaultDim = 384

// Feature weights.
const (
	wordWeight    = 1.0
	bigramWeight  = 0.6
	trigramWeight = 0.25
)

// Embedder is the hashing embedder. The zero value is not usable; call New.
type Embedder struct {
	dim int
}

var _ llm.Embedder = (*Embedder)(nil)

// New returns an embedder of dimension dim (DefaultDim when dim <= 0).
func New(dim int) *Embedder {
	if dim <= 0 {
		dim = DefaultDim
	}
	return &Embedder{dim: dim}
}

// Model names the embedder, version and dimension, e.g. "hashembed-v1-384".
func (e *Embedder) Model() string { return fmt.Sprintf("hashembed-v1-%d", e.dim) }

// Dim is the vector length.
func (e *Embedder) Dim() int { return e.dim }

// Description says what the embedder is, for the log line at start.
func (e *Embedder) Description() string {
	return fmt.Sprintf("built-in hashing embedder (%d dimensions): lexical, not semantic; "+
		"it matches shared words and word fragments, not meaning — configure an Ollama embedding model for semantic recall", e.dim)
}

// Embed returns one vector per text. An empty text gets the zero vector.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = e.Vector(t)
	}
	return out, nil
}

// Vector embeds one text.
func (e *Embedder) Vector(text string) []float32 {
	acc := make([]float64, e.dim)
	words := tokenize(text)
	content := words[:0:0]
	for _, w := range words {
		if !stopWords[w] {
			content = append(content, w)
		}
	}
	if len(content) == 0 {
		content = words
	}
	prev := ""
	offs := make([]int, 0, 32)
	for _, w := range content {
		s := stem(w)
		e.add(acc, "w\x00", s, "", wordWeight)
		if prev != "" {
			e.add(acc, "b\x00", prev, s, bigramWeight)
		}
		prev = s
		padded := "<" + w + ">"
		offs = offs[:0]
		for i := range padded {
			offs = append(offs, i)
		}
		offs = append(offs, len(padded))
		for j := 0; j+3 < len(offs); j++ {
			e.add(acc, "c\x00", padded[offs[j]:offs[j+3]], "", trigramWeight)
		}
	}
	var norm float64
	for _, x := range acc {
		norm += x * x
	}
	v := make([]float32, e.dim)
	if norm == 0 {
		return v
	}
	inv := 1 / math.Sqrt(norm)
	for i, x := range acc {
		v[i] = float32(x * inv)
	}
	return v
}

// add hashes prefix+a+" "+b (FNV-1a 64) into acc with a sign bit.
func (e *Embedder) add(acc []float64, prefix, a, b string, w float64) {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(prefix); i++ {
		h = (h ^ uint64(prefix[i])) * prime
	}
	for i := 0; i < len(a); i++ {
		h = (h ^ uint64(a[i])) * prime
	}
	if b != "" {
		h = (h ^ ' ') * prime
		for i := 0; i < len(b); i++ {
			h = (h ^ uint64(b[i])) * prime
		}
	}
	// Final mix so the low bits depend on every byte.
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	idx := int(h % uint64(len(acc)))
	if h>>63 == 1 {
		w = -w
	}
	acc[idx] += w
}

func tokenize(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// stem strips a few English suffixes; crude but it joins "deploys",
// "deployed" and "deploying".
func stem(w string) string {
	if len(w) <= 4 {
		return strings.TrimSuffix(w, "s")
	}
	for _, suf := range []string{"ations", "ation", "ings", "ing", "ies", "ied", "edly", "ed", "ly", "es", "s"} {
		if strings.HasSuffix(w, suf) && len(w)-len(suf) >= 3 {
			base := w[:len(w)-len(suf)]
			if suf == "ies" || suf == "ied" {
				base += "y"
			}
			return base
		}
	}
	return w
}

var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the and or but if then else of to in on at by for with from into onto
		about as is are was were be been being am do does did doing have has had having i me my we our you your
		he him his she her it its they them their this that these those there here what which who whom whose
		when where why how all any both each few more most other some such no nor not only own same so than too
		very can will just should would could may might must shall also up down out over under again further
		once s t don doesn isn aren wasn weren let lets`) {
		m[w] = true
	}
	return m
}()

// Lexical reports that the vectors match shared words and fragments, not
// meaning: retrieval weighs them as such (memory.LexicalEmbedderRanking).
func (e *Embedder) Lexical() bool { return true }
