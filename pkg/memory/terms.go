package memory

import (
	"sort"

	"github.com/kljensen/snowball/english"

	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTerms is the most terms a lexical query keeps.
const MaxTerms = 32

// Terms turns a free-text query into the terms of the lexical channel: split
// on anything that is not a letter or a digit, drop 1-character terms,
// lower-case, de-duplicate, keep at most MaxTerms terms, longest first (ties
// keep the order of first appearance). Backends OR the terms and, where they
// can, match them as prefixes.
func Terms(query string) []string {
	fields := strings.FieldsFunc(query, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	seen := make(map[string]struct{}, len(fields))
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		if utf8.RuneCountInString(f) < 2 {
			continue
		}
		t := strings.ToLower(f)
		if _, ok := seen[t]; ok {
			continue
		}
		seen[t] = struct{}{}
		out = append(out, t)
	}
	sort.SliceStable(out, func(i, j int) bool {
		return utf8.RuneCountInString(out[i]) > utf8.RuneCountInString(out[j])
	})
	if len(out) > MaxTerms {
		out = out[:MaxTerms]
	}
	return out
}

// StemPrefixMin is the shortest stem LexicalTerms sends in place of a word.
const StemPrefixMin = 4

// LexicalTerms are the terms Retrieve asks of the lexical channel: Terms,
// each cut to the part it shares with its English (Snowball) stem when that
// leaves at least StemPrefixMin letters ("restaurants" -> "restaur",
// "happy" -> "happ"). The channels match a term of 3 or more letters as a
// prefix, so the cut term matches the word's other forms ("restaurant",
// "happiness") as well as the word: stemming at query time, without
// changing what the stores index. Measured on the development set
// (engram eval): ranker recall@10 0.852 -> 0.872.
func LexicalTerms(query string) []string {
	terms := Terms(query)
	seen := make(map[string]bool, len(terms))
	out := terms[:0]
	for _, t := range terms {
		if !asciiLetters(t) { // the stemmer is English
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
			continue
		}
		st := english.Stem(t, false)
		n := 0
		for n < len(st) && n < len(t) && st[n] == t[n] {
			n++
		}
		if n < len(t) && n >= StemPrefixMin {
			t = t[:n]
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// QueryTerms are the lexical terms of a question: Terms without English
// stop words ("what", "did", "my", ...), which match nearly every memory
// and, scored, push the memory that holds the question's content words
// down. A question of stop words only keeps them all.
func QueryTerms(query string) []string {
	terms := Terms(query)
	out := make([]string, 0, len(terms))
	for _, t := range terms {
		if !stopWords[t] {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return terms
	}
	return out
}

// stopWords are English function words: the stop-word list of NLTK, with
// the contraction fragments ("don", "ll", "ve") the tokeniser leaves.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`me my myself we our ours ourselves you your yours yourself yourselves he him
		his himself she her hers herself it its itself they them their theirs themselves what which who whom this
		that these those am is are was were be been being have has had having do does did doing an the and but
		if or because as until while of at by for with about against between into through during before after
		above below to from up down in out on off over under again further then once here there when where why how
		all any both each few more most other some such no nor not only own same so than too very can will
		just don should now ll re ve ain aren couldn didn doesn hadn hasn haven isn ma mightn mustn needn
		shan shouldn wasn weren won wouldn`) {
		m[w] = true
	}
	return m
}()

func asciiLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
