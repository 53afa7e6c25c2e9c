package consolidate

import (
	"math"
	"strings"
	"unicode"

	"github.com/rivo/uniseg"
)

// factWords are the words of a fact as remember's near-duplicate rule
// compares them, in any language: the text is split into words by Unicode
// word segmentation (UAX #29, rivo/uniseg), lower-cased, punctuation and
// spaces dropped; a run of Chinese or Japanese characters (written without
// spaces) gives its character bigrams as terms and its characters as units.
type factWords struct {
	// terms are compared for the overlap: the words, and the character
	// bigrams of CJK runs (a single character where the run has one).
	terms map[string]bool
	// units are compared for containment (does one fact restate the
	// other with words added?): the words, and the CJK characters one by
	// one, so that a word inserted into a CJK run (whose bigrams change at
	// both of its ends) still leaves the shorter fact contained.
	units map[string]bool
}

// cjk reports whether r belongs to a script written without spaces
// between words (Han, Hiragana, Katakana). Hangul is written with spaces.
func cjk(r rune) bool {
	return r >= 0x2E80 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r))
}

func splitWords(s string) factWords {
	w := factWords{terms: map[string]bool{}, units: map[string]bool{}}
	var run []rune // the current CJK run
	flush := func() {
		switch len(run) {
		case 0:
		case 1:
			w.terms[string(run)] = true
		default:
			for i := 0; i+1 < len(run); i++ {
				w.terms[string(run[i:i+2])] = true
			}
		}
		for _, r := range run {
			w.units[string(r)] = true
		}
		run = run[:0]
	}
	state := -1
	rest := strings.ToLower(s)
	for len(rest) > 0 {
		var seg string
		seg, rest, state = uniseg.FirstWordInString(rest, state)
		allCJK, content := true, false
		for _, r := range seg {
			allCJK = allCJK && cjk(r)
			content = content || unicode.IsLetter(r) || unicode.IsNumber(r)
		}
		if allCJK {
			run = append(run, []rune(seg)...)
			continue
		}
		flush()
		if content {
			w.terms[seg] = true
			w.units[seg] = true
		}
	}
	flush()
	return w
}

// wordStats are the document frequencies of the terms among the facts
// compared: a term most of the project's facts share (the subject, "the",
// "el", "usuario", "用户") says little about which fact this is; a term
// few of them have says much. This replaces a stop list, which exists for
// one language only.
type wordStats struct {
	n  int
	df map[string]int
}

func newWordStats(facts []factWords) wordStats {
	ws := wordStats{n: len(facts), df: map[string]int{}}
	for _, f := range facts {
		for t := range f.terms {
			ws.df[t]++
		}
	}
	return ws
}

// weight is a term's inverse document frequency (BM25's, always
// positive).
func (ws wordStats) weight(t string) float64 {
	df := float64(max(ws.df[t], 1))
	return math.Log(1 + (float64(ws.n)-df+0.5)/(df+0.5))
}

func contains(big, small map[string]bool) bool {
	for u := range small {
		if !big[u] {
			return false
		}
	}
	return true
}

// overlap is the closeness of two facts by their words, in [0, 1]:
//
//   - when one fact's units are all in the other's (it restates the other
//     with words added or left out), the share of their terms they have in
//     common (Jaccard);
//   - otherwise words were replaced ("ama navegar" / "ama tejer", Monday /
//     Friday), and the same share is weighted by the terms' weights: a
//     replaced rare word outweighs shared common ones, in any language.
func overlap(a, b factWords, ws wordStats) float64 {
	if len(a.terms) == 0 || len(b.terms) == 0 {
		return 0
	}
	w := func(string) float64 { return 1 }
	if !contains(a.units, b.units) && !contains(b.units, a.units) {
		w = ws.weight
	}
	var inter, union float64
	for t := range a.terms {
		if b.terms[t] {
			inter += w(t)
		}
		union += w(t)
	}
	for t := range b.terms {
		if !a.terms[t] {
			union += w(t)
		}
	}
	return inter / union
}

// Overlap is how close facts a and b are by their words, in [0, 1],
// compared among others (the project's recent facts, which weigh how
// common each word is; a and b count among them). See overlap.
func Overlap(a, b string, others ...string) float64 {
	fa, fb := splitWords(a), splitWords(b)
	facts := []factWords{fa, fb}
	for _, o := range others {
		if o != a && o != b {
			facts = append(facts, splitWords(o))
		}
	}
	return overlap(fa, fb, newWordStats(facts))
}

// PieceOf reports whether piece's words are a strict part of bundle's:
// a piece split out of a bundled fact, which remember stores rather than
// holds (the split rule stores every piece before the bundle is forgotten).
func PieceOf(piece, bundle string) bool {
	return pieceOf(splitWords(piece), splitWords(bundle))
}

func pieceOf(piece, bundle factWords) bool {
	return len(piece.units) > 0 && len(piece.units) < len(bundle.units) && contains(bundle.units, piece.units)
}
