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
	var x, y strings.Builder
	word := func(sb *strings.Builder, w, tag string) {
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		if tag != "" {
			sb.WriteString("<" + tag + ">" + html.EscapeString(w) + "</" + tag + ">")
			return
		}
		sb.WriteString(html.EscapeString(w))
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			word(&x, a[i], "")
			word(&y, b[j], "")
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			word(&y, b[j], "ins")
			j++
		default:
			word(&x, a[i], "del")
			i++
		}
	}
	return template.HTML(x.String()), template.HTML(y.String()) //nolint:gosec // every word escaped
}
