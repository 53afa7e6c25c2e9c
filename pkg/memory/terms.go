package memory

import (
	"slices"
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

// StemPrefixMin is the shortest stem prefix that stands for a word (see
// StemPrefix).
const StemPrefixMin = 4

// PrefixMin is the shortest lexical prefix (in runes) matched as a prefix:
// a shorter one matches only its own token ("in" would otherwise match
// "income" and "inch").
const PrefixMin = 3

// ExactWeight is how much more a query word's own token counts in the
// lexical channel than the other forms of its stem family: a document is
// scored as BM25 over the family (the prefix group, one idf from the
// group's document frequency) plus ExactWeight x BM25 of the word itself
// (its own, usually higher, idf), as a search engine queries a stemmed
// field and an exact one together. Without it a rare word is diluted by
// its family's common members ("bus" by "business", "busy" and "buses":
// the group's idf is that of the common ones). Measured on the
// development set (engram eval, SQLite, with the stores' common-term
// rules): ranker R@1 0.461 -> 0.475, R@20 0.929 -> 0.947, MRR 0.781 ->
// 0.798 (R@5 and R@10 unchanged; see internal/inject's package
// documentation). The weight is not fitted: 0.25, 0.5, 0.75 and 1 gave
// R@20 0.932 to 0.943 in a first measurement, before the stores' rule for
// common words.
const ExactWeight = 0.5

// StemPrefix is the part of a word that its other forms share: the word
// cut to what it has in common with its English (Snowball) stem, when that
// leaves at least StemPrefixMin letters ("restaurants" -> "restaur",
// "happy" -> "happ"); otherwise the word itself ("tried" stays: "tri"
// would match "trip"). Not English letters: the word itself.
func StemPrefix(word string) string {
	if !asciiLetters(word) { // the stemmer is English
		return word
	}
	st := english.Stem(word, false)
	n := 0
	for n < len(st) && n < len(word) && st[n] == word[n] {
		n++
	}
	if n < len(word) && n >= StemPrefixMin {
		return word[:n]
	}
	return word
}

// CommonShare: a lexical query term (a stem group, or a word's own
// token) held by more than this share of the documents (a group: summed
// over its prefix expansions) is common. Its BM25 weight is tiny (idf <
// ln 4 against about 7-11 for a rare term), so once the rarer terms
// matched at least twice as many documents as the caller wants, a common
// group is not scored at all and a common word's own token only for the
// documents found: the prefix expansions of "the" or "what" are noise.
// Both stores apply the rule (TestLexicalParityDev compares them).
const CommonShare = 0.25

// StopWordWeight is how much a stop word of a query ("what", "did",
// "my", the NLTK list) counts in the lexical channel against a content
// word: its BM25 weight (idf and all) is multiplied by it. Stop words
// match nearly every memory of a chat ("What did you do?"), and at full
// weight they rank a turn that shares the question's phrasing above the
// one that shares its subject; left out altogether they lose what
// phrasing does say ("I've had my cat" for "how long have I had my
// cat?"). Measured with engram eval (SQLite, built-in embedder) against
// full weight: on LoCoMo-dev R@1 / 5 / 10 / 20 0.319 / 0.539 / 0.600 /
// 0.680 -> 0.351 / 0.577 / 0.645 / 0.714, on LongMemEval-dev 0.475 /
// 0.836 / 0.904 / 0.947 -> 0.483 / 0.838 / 0.904 / 0.947; left out
// (weight 0) LoCoMo-dev reached 0.341 / 0.578 / 0.642 / 0.708 but
// LongMemEval-dev fell to 0.451 / 0.825 / 0.894 / 0.942. Not fitted:
// 0.25 gave the same within a point on both.
const StopWordWeight = 0.5

// LexTerm is one term of a lexical query as the stores match it: Prefix
// matches every token it prefixes (its stem family: "restaur" matches
// "restaurant" and "restaurants"; a Prefix under PrefixMin runes only
// itself), scored as one term, and each of Words (the query's words that
// have this prefix) also matches its own token for ExactWeight more.
// Weight multiplies both (1, or StopWordWeight when every word of the
// term is a stop word).
type LexTerm struct {
	Prefix string
	Words  []string
	Weight float64
}

// LexTerms groups the words of a lexical query (Channels.Lexical's terms:
// words as memory.Terms makes them) by StemPrefix, in the order of their
// first word: "deploy deploys deployed" is one term of three words.
// Stemming happens here, at query time: the stores index tokens as they
// are. A term of stop words only weighs StopWordWeight.
func LexTerms(words []string) []LexTerm {
	out := make([]LexTerm, 0, len(words))
	at := make(map[string]int, len(words))
	for _, w := range words {
		if w == "" {
			continue
		}
		p := StemPrefix(w)
		i, ok := at[p]
		if !ok {
			i = len(out)
			at[p] = i
			out = append(out, LexTerm{Prefix: p, Weight: StopWordWeight})
		}
		if !slices.Contains(out[i].Words, w) {
			out[i].Words = append(out[i].Words, w)
		}
		if !stopWords[w] {
			out[i].Weight = 1
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
