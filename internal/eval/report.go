package eval

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// WriteText prints a result as tables: overall and per category, the
// ranker against the reference BM25, the block, and the policy sweep.
func WriteText(w io.Writer, r Result) {
	fmt.Fprintf(w, "%s: %d questions; %d nodes imported (%d merged), %d embedded in %.1f s\n\n",
		nameOr(r.Name), r.Overall.N, r.Load.Nodes, r.Load.Merged, r.Load.Embedded, r.Load.Seconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "set\tn\t\tR@1\tR@5\tR@10\tR@20\tnDCG@10\tMRR\t\tblock recall\tlines\ttokens\tp95\tempty\t")
	row := func(s Scores) {
		name := s.Category
		if name == "" {
			name = "all"
		}
		k, b := s.Ranker, s.Block
		fmt.Fprintf(tw, "%s\t%d\tranker\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\t%.3f\t%.1f\t%.0f\t%.0f\t%.2f\t\n",
			name, s.N, k.R1, k.R5, k.R10, k.R20, k.NDCG10, k.MRR, b.Recall, b.LinesMean, b.TokensMean, b.TokensP95, b.Empty)
		m := s.BM25
		fmt.Fprintf(tw, "\t\tbm25\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\t\t\t\t\t\t\n", m.R1, m.R5, m.R10, m.R20, m.NDCG10, m.MRR)
	}
	row(r.Overall)
	for _, c := range r.Categories {
		row(c)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nblock policy sweep (recall / mean tokens / p95 tokens):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "floor \\ ceiling\t")
	for _, c := range SweepCeilings {
		fmt.Fprintf(tw, "%d\t", c)
	}
	fmt.Fprintln(tw)
	for _, f := range SweepFloors {
		fmt.Fprintf(tw, "%.2f\t", f)
		for _, c := range SweepCeilings {
			for _, p := range r.Sweep {
				if p.Floor == f && p.Ceiling == c {
					fmt.Fprintf(tw, "%.3f/%.0f/%.0f\t", p.Block.Recall, p.Block.TokensMean, p.Block.TokensP95)
				}
			}
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "bm25 top k\t")
	for _, c := range SweepCeilings {
		found := false
		for _, p := range r.BM25TopK {
			if p.Ceiling == c {
				fmt.Fprintf(tw, "%.3f/%.0f/%.0f\t", p.Block.Recall, p.Block.TokensMean, p.Block.TokensP95)
				found = true
			}
		}
		if !found {
			fmt.Fprint(tw, "\t")
		}
	}
	fmt.Fprintln(tw)
	tw.Flush()
}

func nameOr(n string) string {
	if n == "" {
		return "eval"
	}
	return n
}

// WriteCompare prints two results side by side: each metric of a, of b,
// and the difference b - a, overall and per category.
func WriteCompare(w io.Writer, a, b Result) {
	fmt.Fprintf(w, "A = %s\nB = %s\n\n", nameOr(a.Name), nameOr(b.Name))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "set\tmetric\tA\tB\tB-A\t")
	cmp := func(sa, sb Scores) {
		name := sa.Category
		if name == "" {
			name = "all"
		}
		metrics := []struct {
			n    string
			x, y float64
		}{
			{"ranker R@1", sa.Ranker.R1, sb.Ranker.R1},
			{"ranker R@5", sa.Ranker.R5, sb.Ranker.R5},
			{"ranker R@10", sa.Ranker.R10, sb.Ranker.R10},
			{"ranker R@20", sa.Ranker.R20, sb.Ranker.R20},
			{"ranker nDCG@10", sa.Ranker.NDCG10, sb.Ranker.NDCG10},
			{"ranker MRR", sa.Ranker.MRR, sb.Ranker.MRR},
			{"block recall", sa.Block.Recall, sb.Block.Recall},
			{"block tokens", sa.Block.TokensMean, sb.Block.TokensMean},
			{"block tokens p95", sa.Block.TokensP95, sb.Block.TokensP95},
			{"block lines", sa.Block.LinesMean, sb.Block.LinesMean},
			{"block empty", sa.Block.Empty, sb.Block.Empty},
		}
		for i, m := range metrics {
			set := ""
			if i == 0 {
				set = fmt.Sprintf("%s (%d)", name, sa.N)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.3f\t%+.3f\t\n", set, m.n, m.x, m.y, m.y-m.x)
		}
	}
	cmp(a.Overall, b.Overall)
	for _, ca := range a.Categories {
		for _, cb := range b.Categories {
			if ca.Category == cb.Category {
				cmp(ca, cb)
			}
		}
	}
	tw.Flush()
}

// WriteSVG draws the sweep as a recall-versus-tokens chart: one line per
// ceiling through the relative floors, the reference BM25's top k as a
// dashed line, and the configured policy as a ring.
func WriteSVG(w io.Writer, r Result) error {
	const (
		width, height = 720.0, 480.0
		left, right   = 60.0, 160.0
		top, bottom   = 30.0, 50.0
	)
	maxT := 1.0
	for _, p := range append(append([]SweepPoint(nil), r.Sweep...), r.BM25TopK...) {
		maxT = math.Max(maxT, p.Block.TokensMean)
	}
	maxT = math.Ceil(maxT/100) * 100
	x := func(t float64) float64 { return left + (width-left-right)*t/maxT }
	y := func(rc float64) float64 { return height - bottom - (height-top-bottom)*rc }
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&sb, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&sb, `<text x="%.0f" y="18" font-size="14">%s: block recall vs mean tokens (%d questions)</text>`+"\n", left, esc(nameOr(r.Name)), r.Overall.N)
	for i := 0; i <= 10; i++ {
		rc := float64(i) / 10
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="end">%.1f</text>`+"\n",
			left, y(rc), width-right, y(rc), left-6, y(rc)+4, rc)
	}
	for i := 0; i <= 5; i++ {
		t := maxT * float64(i) / 5
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="middle">%.0f</text>`+"\n",
			x(t), top, x(t), height-bottom, x(t), height-bottom+16, t)
	}
	fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle">mean tokens per block</text>`+"\n", (left+width-right)/2, height-12)
	fmt.Fprintf(&sb, `<text x="14" y="%.1f" transform="rotate(-90 14 %.1f)" text-anchor="middle">block recall</text>`+"\n", (top+height-bottom)/2, (top+height-bottom)/2)
	colours := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"}
	legend := 0
	line := func(pts []SweepPoint, colour, dash, label string) {
		var path []string
		for _, p := range pts {
			path = append(path, fmt.Sprintf("%.1f,%.1f", x(p.Block.TokensMean), y(p.Block.Recall)))
		}
		fmt.Fprintf(&sb, `<polyline fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="%s" points="%s"/>`+"\n", colour, dash, strings.Join(path, " "))
		for _, p := range pts {
			fmt.Fprintf(&sb, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>floor %.2f ceiling %d: recall %.3f, %.0f tokens</title></circle>`+"\n",
				x(p.Block.TokensMean), y(p.Block.Recall), colour, p.Floor, p.Ceiling, p.Block.Recall, p.Block.TokensMean)
		}
		ly := top + 16*float64(legend)
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			width-right+10, ly, width-right+30, ly, colour, dash, width-right+36, ly+4, esc(label))
		legend++
	}
	for i, c := range SweepCeilings {
		var pts []SweepPoint
		for _, p := range r.Sweep {
			if p.Ceiling == c {
				pts = append(pts, p)
			}
		}
		line(pts, colours[i%len(colours)], "", fmt.Sprintf("ceiling %d", c))
	}
	line(r.BM25TopK, "#555", "5,4", "BM25 top k")
	b := r.Overall.Block
	fmt.Fprintf(&sb, `<circle cx="%.1f" cy="%.1f" r="7" fill="none" stroke="black" stroke-width="2"><title>configured: recall %.3f, %.0f tokens</title></circle>`+"\n",
		x(b.TokensMean), y(b.Recall), b.Recall, b.TokensMean)
	fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f">configured</text>`+"\n", x(b.TokensMean)+9, y(b.Recall)-8)
	sb.WriteString("</svg>\n")
	_, err := io.WriteString(w, sb.String())
	return err
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// Set is one evaluation set's results: the configuration as run, and with
// -compare the second one.
type Set struct {
	Name    string   `json:"set"`
	Results []Result `json:"results"`
}

// WriteSets prints several sets side by side, one column group per set:
// the ranker beside the reference BM25 (with a second configuration: A,
// B and B - A), the block, and the categories of at least MinCategory
// questions in which the ranker is under BM25 at some depth.
func WriteSets(w io.Writer, sets []Set) {
	compare := false
	for _, s := range sets {
		compare = compare || len(s.Results) > 1
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "\t")
	for _, s := range sets {
		if len(s.Results) == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s (%d)\t\t", s.Name, s.Results[0].Overall.N)
		if compare {
			fmt.Fprint(tw, "\t")
		}
	}
	fmt.Fprintln(tw)
	fmt.Fprint(tw, "\t")
	for range sets {
		if compare {
			fmt.Fprint(tw, "A\tB\tB-A\t")
		} else {
			fmt.Fprint(tw, "ranker\tbm25\t")
		}
	}
	fmt.Fprintln(tw)
	type metric struct {
		name  string
		get   func(Scores) float64
		bm    func(Scores) float64 // nil: no reference value
		digit int
	}
	metrics := []metric{
		{"R@1", func(s Scores) float64 { return s.Ranker.R1 }, func(s Scores) float64 { return s.BM25.R1 }, 3},
		{"R@5", func(s Scores) float64 { return s.Ranker.R5 }, func(s Scores) float64 { return s.BM25.R5 }, 3},
		{"R@10", func(s Scores) float64 { return s.Ranker.R10 }, func(s Scores) float64 { return s.BM25.R10 }, 3},
		{"R@20", func(s Scores) float64 { return s.Ranker.R20 }, func(s Scores) float64 { return s.BM25.R20 }, 3},
		{"nDCG@10", func(s Scores) float64 { return s.Ranker.NDCG10 }, func(s Scores) float64 { return s.BM25.NDCG10 }, 3},
		{"MRR", func(s Scores) float64 { return s.Ranker.MRR }, func(s Scores) float64 { return s.BM25.MRR }, 3},
		{"block recall", func(s Scores) float64 { return s.Block.Recall }, nil, 3},
		{"block tokens", func(s Scores) float64 { return s.Block.TokensMean }, nil, 0},
		{"block tokens p95", func(s Scores) float64 { return s.Block.TokensP95 }, nil, 0},
		{"block lines", func(s Scores) float64 { return s.Block.LinesMean }, nil, 1},
	}
	for _, m := range metrics {
		fmt.Fprintf(tw, "%s\t", m.name)
		for _, s := range sets {
			if len(s.Results) == 0 {
				continue
			}
			a := s.Results[0].Overall
			switch {
			case compare && len(s.Results) > 1:
				b := s.Results[1].Overall
				fmt.Fprintf(tw, "%.*f\t%.*f\t%+.*f\t", m.digit, m.get(a), m.digit, m.get(b), m.digit, m.get(b)-m.get(a))
			case compare:
				fmt.Fprintf(tw, "%.*f\t\t\t", m.digit, m.get(a))
			case m.bm != nil:
				fmt.Fprintf(tw, "%.*f\t%.*f\t", m.digit, m.get(a), m.digit, m.bm(a))
			default:
				fmt.Fprintf(tw, "%.*f\t\t", m.digit, m.get(a))
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	var under []string
	for _, s := range sets {
		for _, r := range s.Results {
			for _, u := range UnderBM25(r, MinCategory) {
				under = append(under, fmt.Sprintf("%s %s: %s", s.Name, nameOr(r.Name), u))
			}
		}
	}
	if len(under) == 0 {
		fmt.Fprintf(w, "\nunder plain BM25 (overall, or a category of %d+ questions, at R@1/5/10/20): none\n", MinCategory)
		return
	}
	fmt.Fprintf(w, "\nunder plain BM25 (overall, or a category of %d+ questions, at R@1/5/10/20):\n", MinCategory)
	for _, u := range under {
		fmt.Fprintf(w, "  %s\n", u)
	}
}

// MinCategory is the smallest category whose figures WriteSets holds to
// the reference BM25 (a smaller one moves by a question).
const MinCategory = 20

// UnderBM25 lists where r's ranker is under the reference BM25: overall
// and in each category of at least minN questions, at each depth
// ("temporal R@10 0.637 < 0.639").
func UnderBM25(r Result, minN int) []string {
	var out []string
	check := func(s Scores) {
		name := s.Category
		if name == "" {
			name = "all"
		}
		for _, d := range []struct {
			at   string
			k, b float64
		}{{"R@1", s.Ranker.R1, s.BM25.R1}, {"R@5", s.Ranker.R5, s.BM25.R5}, {"R@10", s.Ranker.R10, s.BM25.R10}, {"R@20", s.Ranker.R20, s.BM25.R20}} {
			if d.k < d.b-1e-9 {
				out = append(out, fmt.Sprintf("%s %s %.3f < %.3f", name, d.at, d.k, d.b))
			}
		}
	}
	check(r.Overall)
	for _, c := range r.Categories {
		if c.N >= minN {
			check(c)
		}
	}
	return out
}
