package memory

import (
	"html"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"go.mau.fi/util/confusable"
	"golang.org/x/text/unicode/norm"
)

// The neutraliser matches on a normalised view of the text and changes
// only the original spans the view's matches map back to, so that ordinary
// text keeps every character (a French «», a Vec<u8>, an accent) while an
// attack written with look-alikes, entities or odd spaces is found in the
// form a model reads it.
//
// The view of a text is built in steps, each item remembering the
// original bytes it stands for:
//   - escapes a model decodes are decoded: HTML entities (also doubly
//     encoded, &amp;lt;), \uXXXX, \xXX and octal \ooo, %XX of ASCII; an
//     HTML comment with no letter or digit in it is dropped;
//   - Unicode tag characters (U+E0020-E007E, invisible "ASCII smuggling")
//     become the ASCII they encode; other format characters (zero-width
//     spaces and joiners, bidi controls, the soft hyphen) are dropped;
//   - every character is folded: NFKC's compatibility decomposition
//     (golang.org/x/text/unicode/norm, NFKD) without combining marks, lower
//     case, then, for non-ASCII, its Unicode TR39 confusable prototype
//     (go.mau.fi/util/confusable: Cyrillic о and і, ˂, the fullwidth colon
//     become o, i, <, :), then lower case again, and what the table maps
//     elsewhere or not at all: bracket and bar look-alikes (〈 « ｜ ‖)
//     become < > |, small capitals and enclosed letters (ɪ, 🅸, 🇮) their
//     letter; a Hangul syllable stays whole;
//   - whitespace of every kind becomes one space, or one newline when the
//     run held a line break.
//
// Patterns are compiled from literals folded the same way (fold), so a
// Russian or Japanese phrase matches whatever mixture of scripts spells it.

// vitem is one character of a view and the original bytes [a, b) it stands
// for.
type vitem struct {
	r    rune
	a, b int32
}

// view is a normalised text with, for each of its bytes, the original span
// the byte's character stands for. The text is built first; the offsets
// only when a rule matches (most texts match no rule: they never need
// them).
type view struct {
	text string
	a, b []int32
	hits bits // the anchors text holds (anchorSet.hits), on first use
}

// span maps the view's bytes [i, j) to the original bytes they stand for
// (the smallest span holding them all: a reversed view runs backwards).
func (v *view) span(i, j int) (int, int) {
	if i >= j {
		if i < len(v.a) {
			return int(v.a[i]), int(v.a[i])
		}
		if len(v.b) > 0 {
			return int(v.b[len(v.b)-1]), int(v.b[len(v.b)-1])
		}
		return 0, 0
	}
	a, b := v.a[i], v.b[i]
	for k := i + 1; k < j; k++ {
		a, b = min(a, v.a[k]), max(b, v.b[k])
	}
	return int(a), int(b)
}

// itemsText is the text of items.
func itemsText(items []vitem) string {
	n := 0
	for _, it := range items {
		n += runeLen(it.r)
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, it := range items {
		if utf8.RuneLen(it.r) < 0 {
			it.r = utf8.RuneError
		}
		sb.WriteRune(it.r)
	}
	return sb.String()
}

// runeLen is the length of r as WriteRune writes it (an invalid rune is
// written as U+FFFD).
func runeLen(r rune) int {
	if k := utf8.RuneLen(r); k > 0 {
		return k
	}
	return 3
}

// setOffsets fills v's offsets from items (v.text is their text).
func (v *view) setOffsets(items []vitem) {
	n := len(v.text)
	v.a, v.b = make([]int32, 0, n), make([]int32, 0, n)
	for _, it := range items {
		for range runeLen(it.r) {
			v.a = append(v.a, it.a)
			v.b = append(v.b, it.b)
		}
	}
}

// rawItems are s's characters as items.
func rawItems(s string) []vitem {
	items := make([]vitem, 0, len(s))
	for i, r := range s {
		items = append(items, vitem{r, int32(i), int32(i + utf8.RuneLen(r))})
	}
	if len(items) > 0 {
		for k := range items { // invalid UTF-8 decodes as one byte each
			if items[k].r == utf8.RuneError {
				_, w := utf8.DecodeRuneInString(s[items[k].a:])
				items[k].b = items[k].a + int32(w)
			}
		}
	}
	return items
}

// decodeEscapes decodes the escapes a model reads through: HTML entities,
// \uXXXX, \u{X..}, \xXX and %XX (ASCII only).
func decodeEscapes(in []vitem) []vitem {
	if !slices.ContainsFunc(in, func(it vitem) bool { return it.r == '&' || it.r == '\\' || it.r == '%' }) {
		return in
	}
	out := in[:0:0]
	for i := 0; i < len(in); i++ {
		it := in[i]
		switch it.r {
		case '&':
			// an entity ends with ';' within 12 characters (&lt &gt &amp
			// may lack it)
			j := i + 1
			for j < len(in) && j-i <= 12 && in[j].r != ';' && in[j].r != '&' && !unicode.IsSpace(in[j].r) {
				j++
			}
			end := j
			if j < len(in) && in[j].r == ';' {
				end = j + 1
			}
			if end-i >= 3 {
				var sb strings.Builder
				for _, x := range in[i:end] {
					sb.WriteRune(x.r)
				}
				raw := sb.String()
				if d := html.UnescapeString(raw); d != raw && utf8.RuneCountInString(d) == 1 {
					r, _ := utf8.DecodeRuneInString(d)
					out = append(out, vitem{r, it.a, in[end-1].b})
					i = end - 1
					continue
				}
			}
		case '\\':
			if r, k := backslashEscape(in[i+1:]); k > 0 {
				out = append(out, vitem{r, it.a, in[i+k].b})
				i += k
				continue
			}
		case '%':
			if i+2 < len(in) && isHexRune(in[i+1].r) && isHexRune(in[i+2].r) {
				c := hexVal(in[i+1].r)<<4 | hexVal(in[i+2].r)
				if c >= 0x20 && c < 0x7f {
					out = append(out, vitem{rune(c), it.a, in[i+2].b})
					i += 2
					continue
				}
			}
		}
		out = append(out, it)
	}
	return out
}

// backslashEscape decodes \n, \r, \t, \uXXXX, \u{X...}, \xXX or \ooo after a
// backslash: the rune and how many items it took (0: none).
func backslashEscape(in []vitem) (rune, int) {
	if len(in) == 0 {
		return 0, 0
	}
	switch in[0].r {
	case 'n':
		return '\n', 1
	case 'r', 't':
		return ' ', 1
	}
	if len(in) < 3 {
		return 0, 0
	}
	hex := func(from, n int) (rune, bool) {
		if from+n > len(in) {
			return 0, false
		}
		var v rune
		for _, x := range in[from : from+n] {
			if !isHexRune(x.r) {
				return 0, false
			}
			v = v<<4 | rune(hexVal(x.r))
		}
		return v, true
	}
	switch in[0].r {
	case 'u':
		if in[1].r == '{' {
			for n := 1; n <= 6 && 2+n < len(in); n++ {
				if in[2+n].r == '}' {
					if v, ok := hex(2, n); ok && utf8.ValidRune(v) {
						return v, 3 + n
					}
					return 0, 0
				}
			}
			return 0, 0
		}
		if v, ok := hex(1, 4); ok && utf8.ValidRune(v) {
			return v, 5
		}
	case 'x':
		if v, ok := hex(1, 2); ok && v < 0x80 {
			return v, 3
		}
	case '0', '1':
		// octal: \074 is '<' (printable ASCII only)
		var v rune
		for _, x := range in[:3] {
			if x.r < '0' || x.r > '7' {
				return 0, 0
			}
			v = v<<3 | (x.r - '0')
		}
		if 0x20 <= v && v < 0x7f {
			return v, 3
		}
	}
	return 0, 0
}

func isHexRune(r rune) bool {
	return '0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F'
}

func hexVal(r rune) int {
	switch {
	case '0' <= r && r <= '9':
		return int(r - '0')
	case 'a' <= r && r <= 'f':
		return int(r-'a') + 10
	}
	return int(r-'A') + 10
}

// extraFold maps look-alikes the confusables table sends elsewhere (or
// nowhere) onto the character a model takes them for.
var extraFold = map[rune]rune{
	'«': '<', '»': '>', '❬': '<', '❭': '>', '〈': '<', '〉': '>', '《': '<', '》': '>', '⟪': '<', '⟫': '>',
	'⦉': '<', '⦊': '>', '⧼': '<', '⧽': '>', '⟨': '<', '⟩': '>', '﹤': '<', '﹥': '>', '＜': '<', '＞': '>',
	'│': '|', '┃': '|', '¦': '|', '∣': '|', 'ǀ': '|', '｜': '|', '▏': '|', '▕': '|', '‖': '|', '∥': '|', '￨': '|', '⏐': '|', 'ǁ': '|',
	'▁': '_', '＿': '_', '‗': '_',
	'：': ':', '︓': ':', '﹕': ':', '꞉': ':', '∶': ':', '˸': ':', '׃': ':', '܃': ':', '܄': ':',
	'ー': '-', '—': '-', '―': '-', '–': '-', '−': '-',
	// small capitals (no case of their own, no decomposition): a model
	// reads ɪɢɴᴏʀᴇ as ignore
	'ᴀ': 'a', 'ʙ': 'b', 'ᴄ': 'c', 'ᴅ': 'd', 'ᴇ': 'e', 'ꜰ': 'f', 'ɢ': 'g', 'ʜ': 'h', 'ɪ': 'i', 'ᴊ': 'j', 'ᴋ': 'k',
	'ʟ': 'l', 'ᴍ': 'm', 'ɴ': 'n', 'ᴏ': 'o', 'ᴘ': 'p', 'ꞯ': 'q', 'ʀ': 'r', 'ꜱ': 's', 'ᴛ': 't', 'ᴜ': 'u', 'ᴠ': 'v',
	'ᴡ': 'w', 'ʏ': 'y', 'ᴢ': 'z',
}

// enclosedLetter is the letter of a negative circled or squared capital
// (🅐, 🅰) or a regional indicator (🇦), which NFKC leaves as they are.
func enclosedLetter(r rune) (rune, bool) {
	for _, base := range []rune{0x1F150, 0x1F170, 0x1F1E6} {
		if base <= r && r < base+26 {
			return 'a' + r - base, true
		}
	}
	return 0, false
}

var foldCache sync.Map // rune -> []rune, for non-ASCII runes

var asciiFold = func() (t [utf8.RuneSelf][]rune) {
	for r := range rune(utf8.RuneSelf) {
		f := r
		if 'A' <= r && r <= 'Z' {
			f += 'a' - 'A'
		}
		t[r] = []rune{f}
	}
	return t
}()

// foldRune is the folded form of r (empty: r is dropped from the view). The
// result is shared: callers must not change it.
func foldRune(r rune) []rune {
	if r >= 0 && r < utf8.RuneSelf {
		return asciiFold[r]
	}
	if f, ok := foldCache.Load(r); ok {
		return f.([]rune)
	}
	f := foldSlow(r)
	foldCache.Store(r, f)
	return f
}

func foldSlow(r rune) []rune {
	if 0xE0020 <= r && r <= 0xE007E { // tag characters: the ASCII they hide
		return foldRune(r - 0xE0000)
	}
	if l, ok := enclosedLetter(r); ok {
		return []rune{l}
	}
	if 0xAC00 <= r && r <= 0xD7A3 {
		// a Hangul syllable stays one character (NFKD would spell it in
		// jamo: three times the characters a phrase's gap counts)
		return []rune{r}
	}
	if unicode.IsSpace(r) || unicode.In(r, unicode.Zs) {
		return []rune{' '}
	}
	if unicode.In(r, unicode.Cf, unicode.Mn, unicode.Me, unicode.Cc) || 0xFE00 <= r && r <= 0xFE0F || 0xE0100 <= r && r <= 0xE01EF {
		return nil
	}
	var out []rune
	for _, d := range norm.NFKD.String(string(r)) {
		if unicode.In(d, unicode.Mn, unicode.Me, unicode.Cf) {
			continue
		}
		d = unicode.ToLower(d)
		if x, ok := extraFold[d]; ok {
			out = append(out, x)
			continue
		}
		if d < utf8.RuneSelf {
			out = append(out, d)
			continue
		}
		repl := confusable.GetReplacement(d)
		if repl == "" {
			out = append(out, d)
			continue
		}
		for _, e := range norm.NFKD.String(repl) {
			if unicode.In(e, unicode.Mn, unicode.Me, unicode.Cf) {
				continue
			}
			e = unicode.ToLower(e)
			if x, ok := extraFold[e]; ok {
				e = x
			}
			out = append(out, e)
		}
	}
	if out == nil {
		out = []rune{}
	}
	return out
}

// fold is s folded as the view folds text (for patterns' literals).
func fold(s string) string {
	var sb strings.Builder
	for _, r := range s {
		for _, f := range foldRune(r) {
			sb.WriteRune(f)
		}
	}
	return sb.String()
}

// foldItems folds each item and collapses whitespace.
func foldItems(in []vitem) []vitem {
	out := make([]vitem, 0, len(in))
	space := -1 // index in out of the current whitespace item
	for _, it := range in {
		fs := foldRune(it.r)
		if isLineBreak(it.r) {
			fs = []rune{'\n'}
		}
		for _, f := range fs {
			if f == ' ' || f == '\n' || f == '\t' {
				if space >= 0 {
					out[space].b = it.b
					if f == '\n' {
						out[space].r = '\n'
					}
					continue
				}
				if f == '\t' {
					f = ' '
				}
				space = len(out)
				out = append(out, vitem{f, it.a, it.b})
				continue
			}
			space = -1
			out = append(out, vitem{f, it.a, it.b})
		}
	}
	return out
}

// viewKind names the views the rules read.
type viewKind int

const (
	// onFolded: decoded, folded, whitespace collapsed.
	onFolded viewKind = iota
	// onLetters: only the letters and digits of the folded view, with the
	// usual digit stand-ins read as letters (spaced-out, hyphenated,
	// dotted and leetspeak words joined); onReversed: the letters
	// backwards (right-to-left override tricks); onROT13: the letters
	// under ROT13.
	onLetters
	onReversed
	onROT13
	nViews
)

// views are the normalised forms of a text the rules match on. Each
// view's text is built on first use, straight from the text (folded:
// foldText; the letter views: from the folded text); the items that map
// it back to the original only when a rule matches it (the texts are the
// items' texts: TestNeutraliseViewTexts).
type views struct {
	src     string
	v       [nViews]view
	built   [nViews]bool
	items   []vitem // the folded view's items, on first need
	hasItem bool
	offsets [nViews]bool
}

func newViews(s string) *views {
	vs := &views{src: s}
	if needsDecoding(s) {
		vs.foldedItems()
		vs.v[onFolded].text = itemsText(vs.items)
	} else {
		vs.v[onFolded].text = foldText(s)
	}
	vs.built[onFolded] = true
	return vs
}

// needsDecoding says whether s holds an escape decodeEscapes reads or a
// comment dropEmptyComments drops (else the folded view is foldText(s)).
func needsDecoding(s string) bool {
	return strings.ContainsAny(s, `&\%`) || strings.Contains(s, "<!--")
}

// dropEmptyComments drops HTML comments with no letter or digit in them
// ("ig<!-- -->nore": a rendered text shows no comment, and a model reads
// the word whole). A comment with words stays: a tag inside one is seen.
func dropEmptyComments(in []vitem) []vitem {
	is := func(i int, lit string) bool {
		for k, c := range lit {
			if i+k >= len(in) || in[i+k].r != c {
				return false
			}
		}
		return true
	}
	var out []vitem
	for i := 0; i < len(in); i++ {
		if in[i].r == '<' && is(i, "<!--") {
			j := i + 4
			for j < len(in) && !is(j, "-->") && !unicode.IsLetter(in[j].r) && !unicode.IsDigit(in[j].r) {
				j++
			}
			if is(j, "-->") {
				if out == nil {
					out = append(make([]vitem, 0, len(in)), in[:i]...)
				}
				i = j + 2
				continue
			}
		}
		if out != nil {
			out = append(out, in[i])
		}
	}
	if out == nil {
		return in
	}
	return out
}

func (vs *views) foldedItems() []vitem {
	if !vs.hasItem {
		vs.items = foldItems(dropEmptyComments(decodeEscapes(decodeEscapes(rawItems(vs.src)))))
		vs.hasItem = true
	}
	return vs.items
}

// view is the view k, its text built (not its offsets).
func (vs *views) view(k viewKind) *view {
	if !vs.built[k] {
		vs.buildLetterTexts(k)
	}
	return &vs.v[k]
}

// withOffsets is the view k with its offsets.
func (vs *views) withOffsets(k viewKind) *view {
	v := vs.view(k)
	if !vs.offsets[k] {
		items := vs.foldedItems()
		if k != onFolded {
			items = letterItems(items)[k-onLetters]
		}
		v.setOffsets(items)
		vs.offsets[k] = true
	}
	return v
}

// foldText is the text of foldItems(rawItems(s)) (s holds no escape),
// built without the items.
func foldText(s string) string {
	buf := make([]byte, 0, len(s))
	space := byte(0) // the whitespace run being read: ' ' or '\n' (0: none)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c == ' ' || c == '\t':
				if space == 0 {
					space = ' '
				}
				continue
			case c == '\n' || c == '\r' || c == '\v' || c == '\f':
				space = '\n'
				continue
			case 'A' <= c && c <= 'Z':
				c += 'a' - 'A'
			}
			if space != 0 {
				buf = append(buf, space)
				space = 0
			}
			buf = append(buf, c)
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		i += w
		if isLineBreak(r) {
			space = '\n'
			continue
		}
		for _, f := range foldRune(r) {
			switch f {
			case ' ', '\t':
				if space == 0 {
					space = ' '
				}
			case '\n':
				space = '\n'
			default:
				if space != 0 {
					buf = append(buf, space)
					space = 0
				}
				buf = utf8.AppendRune(buf, f)
			}
		}
	}
	if space != 0 {
		buf = append(buf, space)
	}
	return string(buf)
}

func isLineBreak(r rune) bool {
	return r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029' || r == '\v' || r == '\f' || r == '\u0085'
}

// deleet reads the usual stand-ins of leetspeak as letters.
var deleet = map[rune]rune{'0': 'o', '1': 'i', '3': 'e', '4': 'a', '5': 's', '7': 't', '@': 'a', '$': 's', '!': 'i', '|': 'l'}

// asciiLetter is, for each ASCII character, what the letter views read
// (0: nothing).
var asciiLetter = func() (t [utf8.RuneSelf]rune) {
	for r := range rune(utf8.RuneSelf) {
		if d, ok := deleet[r]; ok {
			t[r] = d
		} else if unicode.IsLetter(r) || unicode.IsDigit(r) {
			t[r] = r
		}
	}
	return t
}()

// letterRune is what the letter views read for r of the folded view (ok
// false: nothing).
func letterRune(r rune) (rune, bool) {
	if r < utf8.RuneSelf {
		l := asciiLetter[r]
		return l, l != 0
	}
	if d, ok := deleet[r]; ok {
		return d, true
	}
	return r, unicode.IsLetter(r) || unicode.IsDigit(r)
}

func rot13(r rune) rune {
	if 'a' <= r && r <= 'z' {
		return 'a' + (r-'a'+13)%26
	}
	return r
}

// buildLetterTexts builds the text of the letter view k from the folded
// text (the reversed and ROT13 views from the letters view).
func (vs *views) buildLetterTexts(k viewKind) {
	if !vs.built[onLetters] {
		folded := vs.v[onFolded].text
		buf := make([]byte, 0, len(folded))
		for i := 0; i < len(folded); {
			if c := folded[i]; c < utf8.RuneSelf {
				if l := asciiLetter[c]; l != 0 {
					buf = append(buf, byte(l))
				}
				i++
				continue
			}
			r, w := utf8.DecodeRuneInString(folded[i:])
			i += w
			if l, ok := letterRune(r); ok {
				buf = utf8.AppendRune(buf, l)
			}
		}
		vs.v[onLetters].text, vs.built[onLetters] = string(buf), true
	}
	if vs.built[k] {
		return
	}
	letters := vs.v[onLetters].text
	switch k {
	case onReversed:
		vs.v[k].text = reverseString(letters)
	case onROT13:
		vs.v[k].text = rot13String(letters)
	}
	vs.built[k] = true
}

// letterItems are the items of the letters, reversed and ROT13 views.
func letterItems(items []vitem) [3][]vitem {
	letters := make([]vitem, 0, len(items))
	for _, it := range items {
		if l, ok := letterRune(it.r); ok {
			letters = append(letters, vitem{l, it.a, it.b})
		}
	}
	rev := make([]vitem, len(letters))
	for i, it := range letters {
		rev[len(letters)-1-i] = it
	}
	rot := make([]vitem, len(letters))
	for i, it := range letters {
		it.r = rot13(it.r)
		rot[i] = it
	}
	return [3][]vitem{letters, rev, rot}
}

// reverseString is s backwards (character by character).
func reverseString(s string) string {
	r := []rune(s)
	slices.Reverse(r)
	return string(r)
}

func rot13String(s string) string { return strings.Map(rot13, s) }
