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
//     encoded, &amp;lt;), \uXXXX and \xXX, %XX of ASCII;
//   - Unicode tag characters (U+E0020-E007E, invisible "ASCII smuggling")
//     become the ASCII they encode; other format characters (zero-width
//     spaces and joiners, bidi controls, the soft hyphen) are dropped;
//   - every character is folded: NFKC's compatibility decomposition
//     (golang.org/x/text/unicode/norm, NFKD) without combining marks, lower
//     case, then, for non-ASCII, its Unicode TR39 confusable prototype
//     (go.mau.fi/util/confusable: Cyrillic о and і, ˂, the fullwidth colon
//     become o, i, <, :), then lower case again, and a few bracket and bar
//     look-alikes the table maps elsewhere (〈 « ｜) become < > |;
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
// the byte's character stands for.
type view struct {
	text string
	a, b []int32
	hits []bool // the anchors text holds (anchorHits), on first use
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

func makeView(items []vitem) *view {
	n := 0
	for _, it := range items {
		n += utf8.RuneLen(it.r)
	}
	v := &view{a: make([]int32, 0, n), b: make([]int32, 0, n)}
	var sb strings.Builder
	sb.Grow(n)
	for _, it := range items {
		k := utf8.RuneLen(it.r)
		if k < 0 {
			it.r, k = utf8.RuneError, 3
		}
		sb.WriteRune(it.r)
		for range k {
			v.a = append(v.a, it.a)
			v.b = append(v.b, it.b)
		}
	}
	v.text = sb.String()
	return v
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

// backslashEscape decodes \n, \r, \t, \uXXXX, \u{X...} or \xXX after a
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
	'│': '|', '┃': '|', '¦': '|', '∣': '|', 'ǀ': '|', '｜': '|', '▏': '|', '▕': '|',
	'▁': '_', '＿': '_', '‗': '_',
	'：': ':', '︓': ':', '﹕': ':', '꞉': ':', '∶': ':', '˸': ':', '׃': ':', '܃': ':', '܄': ':',
	'ー': '-', '—': '-', '―': '-', '–': '-', '−': '-',
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
		isNL := it.r == '\n' || it.r == '\r' || it.r == '\u2028' || it.r == '\u2029' || it.r == '\v' || it.r == '\f' || it.r == '\u0085'
		fs := foldRune(it.r)
		if isNL {
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

// views are the normalised forms of a text the rules match on.
type views struct {
	src    string
	items  []vitem
	folded *view // decoded, folded, whitespace collapsed
	// letters: only the letters and digits of folded, with the usual
	// digit stand-ins read as letters (spaced-out, hyphenated, dotted and
	// leetspeak words joined); reversed: letters backwards (right-to-left
	// override tricks); rot13: letters under ROT13. Built on first use.
	letters, reversed, rot13 *view
	letterItems              [3][]vitem
	letterText               [3]string
	letterHits               [3][]bool
}

func buildViews(s string) *views {
	items := foldItems(decodeEscapes(decodeEscapes(rawItems(s))))
	return &views{src: s, items: items, folded: makeView(items)}
}

// deleet reads the usual stand-ins of leetspeak as letters.
var deleet = map[rune]rune{'0': 'o', '1': 'i', '3': 'e', '4': 'a', '5': 's', '7': 't', '@': 'a', '$': 's', '!': 'i', '|': 'l'}

func (vs *views) buildLetters() {
	if vs.letters != nil {
		return
	}
	vs.buildLetterItems()
	vs.letters, vs.reversed, vs.rot13 = makeView(vs.letterItems[0]), makeView(vs.letterItems[1]), makeView(vs.letterItems[2])
}

// letterTexts are the texts of the letters, reversed and ROT13 views,
// without their offsets (enough for the prefilters).
func (vs *views) letterTexts() [3]string {
	if vs.letterText[0] == "" && len(vs.letterItems[0]) == 0 {
		vs.buildLetterItems()
		for k, items := range vs.letterItems {
			var b strings.Builder
			for _, it := range items {
				b.WriteRune(it.r)
			}
			vs.letterText[k] = b.String()
		}
	}
	return vs.letterText
}

func (vs *views) buildLetterItems() {
	if vs.letterItems[0] != nil {
		return
	}
	var letters []vitem
	for _, it := range vs.items {
		if d, ok := deleet[it.r]; ok {
			letters = append(letters, vitem{d, it.a, it.b})
		} else if unicode.IsLetter(it.r) || unicode.IsDigit(it.r) {
			letters = append(letters, it)
		}
	}
	if letters == nil {
		letters = []vitem{}
	}
	rev := make([]vitem, len(letters))
	for i, it := range letters {
		rev[len(letters)-1-i] = it
	}
	rot := make([]vitem, len(letters))
	for i, it := range letters {
		if r := it.r; 'a' <= r && r <= 'z' {
			it.r = 'a' + (r-'a'+13)%26
		}
		rot[i] = it
	}
	vs.letterItems = [3][]vitem{letters, rev, rot}
}
