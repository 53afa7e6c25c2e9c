package memory

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Go's regular expressions have no DFA: every rule whose expression runs
// costs a pass of its automaton over the view, so each rule has a cheap
// prefilter first, and the expression runs only on a text the prefilter
// lets through. A prefilter is part of what a rule means (a rule finds its
// phrase where its prefilter holds), so the prefilters may only be made
// more precise with conditions that every match of the expression
// implies: then a rule changes exactly the texts it changed before (the
// property tests compare every change with the long way).
//
// A prefilter reads the anchors of its view (anchorSet.hits: which of the
// anchors of all the view's rules the view's text holds, one pass over its
// bytes), and where it says so, the text itself (check: where a word
// stands, what is around it).

// A pred is a rule's prefilter: every group must hold, every one of all,
// one of alts (when there are any), and check (when set) must accept the
// view's text.
type pred struct {
	groups []group
	all    []pred
	alts   []pred
	check  func(text string) bool
}

// A group holds when the view holds one of its anchors (one), or every
// anchor of one of its phrases. The sets are tested in their sparse form
// (set by finish): a phrase's few anchors, not a word per 64 anchors.
type group struct {
	one     bits
	phrases []bits
	oneS    sparse
	phraseS []sparse
}

// sparse is a set of anchors as its non-zero words.
type sparse []sparseWord

type sparseWord struct {
	i int
	m uint64
}

func toSparse(b bits) sparse {
	var out sparse
	for i, w := range b {
		if w != 0 {
			out = append(out, sparseWord{i, w})
		}
	}
	return out
}

// meets says whether s and hits share an anchor.
func (s sparse) meets(hits bits) bool {
	for _, w := range s {
		if w.m&hits[w.i] != 0 {
			return true
		}
	}
	return false
}

// within says whether every anchor of s is in hits.
func (s sparse) within(hits bits) bool {
	for _, w := range s {
		if w.m&^hits[w.i] != 0 {
			return false
		}
	}
	return true
}

func (p *pred) holds(hits bits, text string) bool {
	for i := range p.groups {
		if !p.groups[i].holds(hits) {
			return false
		}
	}
	for i := range p.all {
		if !p.all[i].holds(hits, text) {
			return false
		}
	}
	if len(p.alts) > 0 && !slices.ContainsFunc(p.alts, func(a pred) bool { return a.holds(hits, text) }) {
		return false
	}
	return p.check == nil || p.check(text)
}

// empty says whether p holds always.
func (p *pred) empty() bool {
	return len(p.groups) == 0 && len(p.all) == 0 && len(p.alts) == 0 && p.check == nil
}

func (g *group) holds(hits bits) bool {
	if g.oneS.meets(hits) {
		return true
	}
	for _, ph := range g.phraseS {
		if ph.within(hits) {
			return true
		}
	}
	return false
}

// bits is a set of anchors.
type bits []uint64

func (b bits) has(i int) bool { return b[i>>6]&(1<<(i&63)) != 0 }
func (b bits) set(i int)      { b[i>>6] |= 1 << (i & 63) }

// anchorSet is the anchors of the rules of some views: the folded view's
// rules, or the letter views' (the letter views are searched only for
// their own few anchors).
type anchorSet struct {
	words []string
	index map[string]int
	one   [256][]int32               // one-byte anchors
	two   [1 << 16 / 64]uint64       // two-byte anchors (their bytes, a bit each)
	twoAt map[uint16]int32           // two-byte anchor -> its index
	heads [tripleBuckets / 64]uint64 // buckets of the first three bytes of a longer anchor
	tri   [tripleBuckets][]int32     // the longer anchors by the bucket of their first three bytes
	n     int                        // words in bits (the set is complete once the rules are compiled)
}

var (
	foldedAnchors = &anchorSet{index: map[string]int{}, twoAt: map[uint16]int32{}}
	letterAnchors = &anchorSet{index: map[string]int{}, twoAt: map[uint16]int32{}}
)

const tripleBuckets = 1 << 12

// triple is the bucket of the three bytes at s.
func triple(a, b, c byte) uint32 {
	return (uint32(a)<<16 | uint32(b)<<8 | uint32(c)) * 2654435761 >> 20 & (tripleBuckets - 1)
}

// prefiltered is the view whose anchors a rule's prefilter reads: the
// folded view for the folded view's rules, the letters view for the letter
// views' rules (a word is in the reversed view when it is, reversed, in
// the letters view, and in the ROT13 view when its ROT13 is: see
// reverseString, rot13String).
func (vk viewKind) prefiltered() viewKind {
	return min(vk, onLetters)
}

func (vk viewKind) anchors() *anchorSet {
	if vk == onFolded {
		return foldedAnchors
	}
	return letterAnchors
}

// anyOf is a prefilter: the folded view holds one of words (folded).
func anyOf(words ...string) pred { return foldedAnchors.anyOf(words...) }

// phrases is a prefilter: the folded view holds every word of one of
// phrases (folded; a trailing '*' of a word, a stem, is left out; cjk:
// a phrase is one word). Only for phrases an expression holds word for
// word, as lit, litCJK and joinSep write them.
func phrases(cjk bool, ps ...string) pred { return foldedAnchors.phrases(cjk, ps...) }

// anyOf is a prefilter: the view holds one of words (folded). Its bits
// are sized when the rules are compiled (finish).
func (set *anchorSet) anyOf(words ...string) pred {
	var g []int
	for _, w := range words {
		if i, ok := set.anchor(w); ok {
			g = append(g, i)
		}
	}
	return pred{groups: []group{{one: indexBits(g)}}}
}

func (set *anchorSet) phrases(cjk bool, ps ...string) pred {
	var one []int
	var multi []bits
	for _, p := range ps {
		words := strings.Fields(p)
		if cjk {
			words = []string{p}
		}
		var idx []int
		for _, w := range words {
			if i, ok := set.anchor(strings.TrimSuffix(w, "*")); ok {
				idx = append(idx, i)
			}
		}
		switch len(idx) {
		case 0:
			return pred{} // a phrase of nothing: holds always
		case 1:
			one = append(one, idx[0])
		default:
			multi = append(multi, indexBits(idx))
		}
	}
	return pred{groups: []group{{one: indexBits(one), phrases: multi}}}
}

// anchor is the index of w (folded) in set, added when new (ok false: w
// folds to nothing).
func (set *anchorSet) anchor(w string) (int, bool) {
	w = fold(w)
	if w == "" {
		return 0, false
	}
	i, ok := set.index[w]
	if ok {
		return i, true
	}
	i = len(set.words)
	set.index[w] = i
	set.words = append(set.words, w)
	switch len(w) {
	case 1:
		set.one[w[0]] = append(set.one[w[0]], int32(i))
	case 2:
		p := uint16(w[0])<<8 | uint16(w[1])
		set.two[p>>6] |= 1 << (p & 63)
		set.twoAt[p] = int32(i)
	default:
		t := triple(w[0], w[1], w[2])
		set.heads[t>>6] |= 1 << (t & 63)
		set.tri[t] = append(set.tri[t], int32(i))
	}
	return i, true
}

// indexBits holds the anchors g (resized by finish).
func indexBits(g []int) bits {
	n := 0
	for _, i := range g {
		n = max(n, i+1)
	}
	b := make(bits, (n+63)/64)
	for _, i := range g {
		b.set(i)
	}
	return b
}

// finish sizes every bit set of the rules' prefilters to its set.
func (set *anchorSet) finish(preds []*pred) {
	set.n = len(set.words)
	words := (set.n + 63) / 64
	size := func(b bits) bits { return append(b[:len(b):len(b)], make(bits, words-len(b))...) }
	var walk func(p *pred)
	walk = func(p *pred) {
		for i := range p.groups {
			g := &p.groups[i]
			g.one = size(g.one)
			g.oneS = toSparse(g.one)
			g.phraseS = make([]sparse, len(g.phrases))
			for j := range g.phrases {
				g.phrases[j] = size(g.phrases[j])
				g.phraseS[j] = toSparse(g.phrases[j])
			}
		}
		for i := range p.all {
			walk(&p.all[i])
		}
		for i := range p.alts {
			walk(&p.alts[i])
		}
	}
	for _, p := range preds {
		walk(p)
	}
}

// allOf is a prefilter: every one of ps holds.
func allOf(ps ...pred) pred {
	var out pred
	for _, p := range ps {
		if len(p.all) == 0 && len(p.alts) == 0 && p.check == nil {
			out.groups = append(out.groups, p.groups...)
		} else {
			out.all = append(out.all, p)
		}
	}
	return out
}

// oneOf is a prefilter: one of ps holds.
func oneOf(ps ...pred) pred { return pred{alts: ps} }

// checked is a prefilter: check accepts the view's text.
func checked(check func(text string) bool) pred { return pred{check: check} }

// hits says which anchors text holds.
func (set *anchorSet) hits(text string) bits {
	nrules() // the set is complete
	hits := make(bits, (set.n+63)/64)
	for i := 0; i < len(text); i++ {
		c := text[i]
		for _, k := range set.one[c] {
			hits.set(int(k))
		}
		if i+1 >= len(text) {
			break
		}
		if p := uint16(c)<<8 | uint16(text[i+1]); set.two[p>>6]&(1<<(p&63)) != 0 {
			hits.set(int(set.twoAt[p]))
		}
		if i+2 >= len(text) {
			continue
		}
		t := triple(c, text[i+1], text[i+2])
		if set.heads[t>>6]&(1<<(t&63)) == 0 {
			continue
		}
		for _, k := range set.tri[t] {
			if w := set.words[k]; !hits.has(int(k)) && len(text)-i >= len(w) && text[i:i+len(w)] == w {
				hits.set(int(k))
			}
		}
	}
	return hits
}

// The checks below read the folded view: lower case, whitespace one space
// or one newline (so \s is ' ' or '\n' there).

// wordWhere reports whether word occurs in text where before accepts the
// text before it and after the text after it.
func wordWhere(text, word string, before func(head string) bool, after func(tail string) bool) bool {
	for i := 0; i <= len(text); {
		j := strings.Index(text[i:], word)
		if j < 0 {
			return false
		}
		at := i + j
		if before(text[:at]) && after(text[at+len(word):]) {
			return true
		}
		i = at + 1
	}
	return false
}

// phraseWhere is a check: for one of phrases (words as joinSep joins
// them), its first word occurs where before accepts and its last word
// where after accepts (each the same occurrence when the phrase is one
// word). A match of the phrase between such neighbours implies it.
func phraseWhere(phrases []string, before func(head string) bool, after func(tail string) bool) pred {
	folded := make([][]string, len(phrases))
	for i, p := range phrases {
		for _, w := range strings.Fields(p) {
			folded[i] = append(folded[i], fold(w))
		}
	}
	return checked(func(text string) bool {
		for _, words := range folded {
			if len(words) == 1 {
				if wordWhere(text, words[0], before, after) {
					return true
				}
				continue
			}
			if wordWhere(text, words[0], before, anyText) && wordWhere(text, words[len(words)-1], anyText, after) {
				return true
			}
		}
		return false
	})
}

func anyText(string) bool { return true }

// atStart: the text before is empty or ends with a character that is not
// a letter or a digit (`(?:^|[^\p{L}\p{N}])` before the word).
func atStart(head string) bool {
	r, _ := utf8.DecodeLastRuneInString(head)
	return head == "" || !unicode.IsLetter(r) && !unicode.IsNumber(r)
}

// atEnd: the text after is empty or starts with a character that is not a
// letter or a digit (`(?:[^\p{L}\p{N}]|$)` after the word).
func atEnd(tail string) bool {
	r, _ := utf8.DecodeRuneInString(tail)
	return tail == "" || !unicode.IsLetter(r) && !unicode.IsNumber(r)
}

// skipping is tail after its leading characters of set.
func skipping(tail, set string) string {
	return strings.TrimLeft(tail, set)
}

// beforeRoleEnd: what follows can be roleEnd (`(?:\s*(?:\([^()\n]{0,40}
// \)|\[...\]))?[\s*_"'\]\)}]*:`): after spaces and the characters of the
// class, a '(', a '[' or a ':'.
func beforeRoleEnd(tail string) bool {
	t := skipping(tail, " \t\n\f\r*_\"']})")
	return t != "" && (t[0] == ':' || t[0] == '(' || t[0] == '[')
}

// beforeHeaderEnd: what follows can be a header's end (`\s*(?:\([^)\n]
// {0,120}\)\s*)?[:\]|!]`): after spaces, a '(' or one of : ] | !.
func beforeHeaderEnd(tail string) bool {
	t := skipping(tail, " \t\n\f\r")
	return t != "" && strings.IndexByte("(:]|!", t[0]) >= 0
}

// strongRoleStart: role-strong's `(?:^|[^\p{L}\p{N}_./\\@$#%&=+\x60-])`
// before the word.
func strongRoleStart(head string) bool {
	r, _ := utf8.DecodeLastRuneInString(head)
	return head == "" || !unicode.IsLetter(r) && !unicode.IsNumber(r) && !strings.ContainsRune("_./\\@$#%&=+`-", r)
}

// weakRoleStart: role-weak's `(?:^|\n|[.!?;|>]\s)[\s>*#\-]*` before the
// word: the text before is empty or ends with a space or one of > * # -.
func weakRoleStart(head string) bool {
	return head == "" || strings.IndexByte(" \t\n\f\r>*#-", head[len(head)-1]) >= 0
}

// afterOpening reports whether text holds open, then after spaces one of
// next (a tag's bracket and its name).
func afterOpening(text, open string, next ...string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], open)
		if j < 0 {
			return false
		}
		i += j + len(open)
		t := skipping(text[i:], " \t\n\f\r")
		if slices.ContainsFunc(next, func(n string) bool { return strings.HasPrefix(t, n) }) {
			return true
		}
	}
}

// overrideNeeds: an override phrase of l holds a verb and, either an
// adjective and a noun, or a word for everything and one for before
// (overridePattern), each word for word.
func overrideNeeds(l overrideLang) pred {
	if l.cjk {
		return pred{} // litCJK: the anchors are the words already
	}
	v := phrases(false, l.verbs...)
	objects := allOf(phrases(false, l.adjs...), phrases(false, l.nouns...))
	if len(l.all) == 0 {
		return allOf(v, objects)
	}
	return allOf(v, oneOf(objects, allOf(phrases(false, l.all...), phrases(false, l.before...))))
}
