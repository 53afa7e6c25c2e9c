package console

import (
	"html"
	"html/template"
	"strings"
)

// maxDiffWords bounds the words diffed (the LCS table is their product);
// longer texts are shown whole, without marks.
const maxDiffWords = 600

// diffHTML marks the words removed from before (<del>) and added in
// after (<ins>), by the longest common subsequence of their words. Every
// word is escaped.
func diffHTML(before, after string) (template.HTML, template.HTML) {
	a, b := strings.Fields(before), strings.Fields(after)
	esc := func(ws []string) template.HTML {
		return template.HTML(html.EscapeString(strings.Join(ws, " "))) //nolint:gosec // escaped
	}
	if len(a) == 0 || len(b) == 0 || len(a) > maxDiffWords || len(b) > maxDiffWords {
		return esc(a), esc(b)
	}
	// lcs[i][j]: the LCS length of a[i:] and b[j:]
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	// runs of words with the same mark become one element
	type run struct {
		tag   string
		words []string
	}
	var xs, ys []run
	add := func(rs []run, w, tag string) []run {
		if n := len(rs); n > 0 && rs[n-1].tag == tag {
			rs[n-1].words = append(rs[n-1].words, w)
			return rs
		}
		return append(rs, run{tag: tag, words: []string{w}})
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			xs, ys = add(xs, a[i], ""), add(ys, b[j], "")
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			ys = add(ys, b[j], "ins")
			j++
		default:
			xs = add(xs, a[i], "del")
			i++
		}
	}
	render := func(rs []run) string {
		var sb strings.Builder
		for k, r := range rs {
			if k > 0 {
				sb.WriteByte(' ')
			}
			text := html.EscapeString(strings.Join(r.words, " "))
			if r.tag != "" {
				text = "<" + r.tag + ">" + text + "</" + r.tag + ">"
			}
			sb.WriteString(text)
		}
		return sb.String()
	}
	x, y := render(xs), render(ys)
	return template.HTML(x), template.HTML(y) //nolint:gosec // every word escaped
}
