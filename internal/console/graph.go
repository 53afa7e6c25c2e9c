package console

import (
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/engram-memory/engram/pkg/memory"
)

// MaxGraphNeighbours bounds the neighbours drawn around a memory (the
// table below the drawing lists every edge).
const MaxGraphNeighbours = 16

// graphSVG draws a memory and its edges as a small inline SVG, rendered
// on the server: the memory in the middle, its neighbours on a circle, an
// arrow per edge (from src to dst) labelled with the relation. Every text
// is escaped; a neighbour the caller may not see is drawn as "hidden".
func graphSVG(n *memory.Node, edges []edgeView, query string) string {
	const w, h, cx, cy, rad = 640, 360, 320, 180, 135
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="graph" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="the memory's edges">`, w, h, w, h)
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#667"/></marker></defs>`)
	shown := edges
	if len(shown) > MaxGraphNeighbours {
		shown = shown[:MaxGraphNeighbours]
	}
	k := len(shown)
	for i, e := range shown {
		a := -math.Pi/2 + 2*math.Pi*float64(i)/float64(max(k, 1))
		x, y := cx+rad*1.7*math.Cos(a), cy+rad*math.Sin(a)
		// from src to dst, stopping at the boxes' edges
		x1, y1, x2, y2 := float64(cx), float64(cy), x, y
		if !e.Out {
			x1, y1, x2, y2 = x, y, float64(cx), float64(cy)
		}
		dx, dy := x2-x1, y2-y1
		l := math.Hypot(dx, dy)
		if l < 1 {
			l = 1
		}
		sx, sy := x1+dx/l*52, y1+dy/l*22
		ex, ey := x2-dx/l*56, y2-dy/l*24
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#889" stroke-width="%.1f" marker-end="url(#arrow)"/>`,
			sx, sy, ex, ey, 1+math.Min(e.E.Weight, 4)/2)
		fmt.Fprintf(&b, `<text class="rel" x="%.0f" y="%.0f" text-anchor="middle">%s</text>`, (x1+x2)/2, (y1+y2)/2-4, html.EscapeString(string(e.E.Relation)))
		label := "hidden"
		if e.Known {
			label = cut(nodeTitle(&e.Other), 18)
		}
		cls := "nb"
		if e.Known && !e.Other.Live() {
			cls = "nb closed"
		}
		if e.Known {
			fmt.Fprintf(&b, `<a href="/memory/%s?%s">`, html.EscapeString(e.Other.ID), html.EscapeString(query))
		}
		fmt.Fprintf(&b, `<g class="%s"><rect x="%.0f" y="%.0f" width="112" height="40" rx="6"/><text x="%.0f" y="%.0f" text-anchor="middle">%s</text><text class="kind" x="%.0f" y="%.0f" text-anchor="middle">%s</text></g>`,
			cls, x-56, y-20, x, y-3, html.EscapeString(label), x, y+12, html.EscapeString(string(e.Other.Subkind)))
		if e.Known {
			b.WriteString(`</a>`)
		}
	}
	fmt.Fprintf(&b, `<g class="me"><rect x="%d" y="%d" width="120" height="44" rx="8"/><text x="%d" y="%d" text-anchor="middle">%s</text><text class="kind" x="%d" y="%d" text-anchor="middle">%s</text></g>`,
		cx-60, cy-22, cx, cy-4, html.EscapeString(cut(nodeTitle(n), 19)), cx, cy+12, html.EscapeString(string(n.Subkind)))
	if len(edges) > len(shown) {
		fmt.Fprintf(&b, `<text class="rel" x="8" y="%d">%d more edges in the table</text>`, h-8, len(edges)-len(shown))
	}
	if len(edges) == 0 {
		fmt.Fprintf(&b, `<text class="rel" x="%d" y="%d" text-anchor="middle">no edges</text>`, cx, cy+48)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func nodeTitle(n *memory.Node) string {
	if strings.TrimSpace(n.Label) != "" {
		return n.Label
	}
	return n.Body
}
