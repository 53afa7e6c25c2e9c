package eval

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/internal/memio"
	"github.com/engram-memory/engram/pkg/memory"
)

// Depth is the ranker's depth: recall is measured at 1, 5, 10 and Depth.
const Depth = 20

// Store is what an evaluation needs of its scratch store.
type Store interface {
	inject.Store
	memio.Store
	memory.PendingStore
}

// LoadStats says what Load wrote.
type LoadStats struct {
	Nodes    int     `json:"nodes"`
	Edges    int     `json:"edges"`
	Merged   int     `json:"merged"`
	Embedded int     `json:"embedded"`
	Seconds  float64 `json:"seconds"`
}

// Load imports into st the part of graph (import format, plain or gzip)
// that the questions ask about, and embeds it with emb.
func Load(ctx context.Context, st Store, emb inject.Embedder, graph io.Reader, qs []Question) (LoadStats, error) {
	start := time.Now()
	var buf bytes.Buffer
	if _, err := FilterGraph(graph, &buf, Projects(qs)); err != nil {
		return LoadStats{}, err
	}
	stats, err := memio.Import(ctx, st, &buf, "", time.Now())
	if err != nil {
		return LoadStats{}, fmt.Errorf("eval: import: %w", err)
	}
	embedded, err := memory.EmbedPending(ctx, st, emb, 64)
	if err != nil {
		return LoadStats{}, fmt.Errorf("eval: embed: %w", err)
	}
	return LoadStats{Nodes: stats.Nodes, Edges: stats.Edges, Merged: stats.Merged, Embedded: embedded,
		Seconds: time.Since(start).Seconds()}, nil
}

// Setup is one configuration to evaluate.
type Setup struct {
	Name     string
	Store    Store
	Embedder inject.Embedder
	Inject   inject.Config
	// Progress, when set, is called after each question.
	Progress func(done, total int)
}

// Ranked is one line of a ranking: a memory with its score and the tokens
// of its rendered block line.
type Ranked struct {
	ID     string  `json:"id"`
	Score  float64 `json:"score"`
	Tokens float64 `json:"tokens"`
}

// QuestionResult is what one question got.
type QuestionResult struct {
	Index    int      `json:"index"`
	Project  string   `json:"project"`
	Category string   `json:"category,omitempty"`
	Question string   `json:"question"`
	Evidence []string `json:"evidence"`
	Ranker   []Ranked `json:"ranker"` // the fused ranking, Depth deep
	Block    []Ranked `json:"block"`  // the recalled lines of the block the configuration builds
	BM25     []Ranked `json:"bm25"`   // the reference ranking, Depth deep
}

// Run asks every question through the injector's Compose (a dry run at
// the question's date), once with the block policy opened up (relative
// floor 0, ceiling Depth: the ranking itself) and once as configured (the
// block), and ranks the same nodes with the reference BM25.
func Run(ctx context.Context, s Setup, qs []Question) (Result, error) {
	rankCfg := s.Inject
	rankCfg.RelativeFloor, rankCfg.MaxRecalled, rankCfg.PlateauKeep = 0, Depth, Depth
	rankCfg.Hits = max(rankCfg.Hits, Depth)
	ranker, err := inject.New(s.Store, s.Embedder, rankCfg)
	if err != nil {
		return Result{}, err
	}
	blocker, err := inject.New(s.Store, s.Embedder, s.Inject)
	if err != nil {
		return Result{}, err
	}
	bm, err := buildBM25(ctx, s.Store, Projects(qs))
	if err != nil {
		return Result{}, err
	}
	res := Result{Name: s.Name, Inject: s.Inject}
	for i, q := range qs {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		now := q.Date
		if now.IsZero() {
			// A question without a date is asked right after the
			// conversation: at its project's latest memory.
			now = bm.latest[q.Project]
		}
		req := inject.Request{Project: q.Project, Session: "eval", Turn: "q" + strconv.Itoa(i), Text: q.Question,
			DryRun: true, Now: now}
		rb, err := ranker.Compose(ctx, req)
		if err != nil {
			return Result{}, fmt.Errorf("eval: question %d: %w", i+1, err)
		}
		bb, err := blocker.Compose(ctx, req)
		if err != nil {
			return Result{}, fmt.Errorf("eval: question %d: %w", i+1, err)
		}
		qr := QuestionResult{Index: i, Project: q.Project, Category: q.Category, Question: q.Question,
			Evidence: q.Evidence, Ranker: lines(rb.Recalled), Block: lines(bb.Recalled)}
		if x := bm.index[q.Project]; x != nil {
			for _, id := range x.search(q.Question, Depth) {
				n := bm.nodes[id]
				l := inject.Line{ID: id, Text: ranker.LineText(n), Provenance: []string{string(n.Subkind)}}
				qr.BM25 = append(qr.BM25, Ranked{ID: id, Tokens: tokens(l.Render())})
			}
		}
		res.Questions = append(res.Questions, qr)
		if s.Progress != nil {
			s.Progress(i+1, len(qs))
		}
	}
	res.summarise()
	return res, nil
}

func lines(ls []inject.Line) []Ranked {
	out := make([]Ranked, len(ls))
	for i, l := range ls {
		out[i] = Ranked{ID: l.ID, Score: l.Score, Tokens: tokens(l.Render())}
	}
	return out
}

// tokens is the estimate the block uses: characters / 4.
func tokens(s string) float64 { return float64(utf8.RuneCountInString(s)) / 4 }

type bm25Set struct {
	index  map[string]*bm25Index
	nodes  map[string]*memory.Node
	latest map[string]time.Time // per project: when its latest memory was written
}

// buildBM25 indexes, per project asked about, the live nodes the project
// sees: its own and the global ones.
func buildBM25(ctx context.Context, st memio.Store, projects map[string]bool) (bm25Set, error) {
	set := bm25Set{index: map[string]*bm25Index{}, nodes: map[string]*memory.Node{}, latest: map[string]time.Time{}}
	var global []*memory.Node
	err := st.Scan(ctx, func(n memory.Node) error {
		if !n.Live() || (n.ProjectID != "" && !projects[n.ProjectID]) {
			return nil
		}
		n.Embedding = nil
		set.nodes[n.ID] = &n
		if t := memory.Written(&n); t.After(set.latest[n.ProjectID]) {
			set.latest[n.ProjectID] = t
		}
		if n.ProjectID == "" {
			global = append(global, &n)
			return nil
		}
		x := set.index[n.ProjectID]
		if x == nil {
			x = newBM25Index()
			set.index[n.ProjectID] = x
		}
		x.add(n.ID, n.Label+"\n"+n.Body)
		return nil
	}, nil)
	if err != nil {
		return set, fmt.Errorf("eval: scan: %w", err)
	}
	for p := range projects {
		x := set.index[p]
		if x == nil {
			x = newBM25Index()
			set.index[p] = x
		}
		for _, n := range global {
			x.add(n.ID, n.Label+"\n"+n.Body)
		}
	}
	return set, nil
}

// RankMetrics are the metrics of a ranking.
type RankMetrics struct {
	R1     float64 `json:"recall_at_1"`
	R5     float64 `json:"recall_at_5"`
	R10    float64 `json:"recall_at_10"`
	R20    float64 `json:"recall_at_20"`
	NDCG10 float64 `json:"ndcg_at_10"`
	MRR    float64 `json:"mrr"`
}

// BlockMetrics are the metrics of the blocks.
type BlockMetrics struct {
	Recall     float64 `json:"recall"`
	LinesMean  float64 `json:"lines_mean"`
	LinesP95   float64 `json:"lines_p95"`
	TokensMean float64 `json:"tokens_mean"`
	TokensP95  float64 `json:"tokens_p95"`
	Empty      float64 `json:"empty_share"`
}

// Scores are the metrics of a set of questions.
type Scores struct {
	Category string       `json:"category,omitempty"`
	N        int          `json:"questions"`
	Ranker   RankMetrics  `json:"ranker"`
	Block    BlockMetrics `json:"block"`
	BM25     RankMetrics  `json:"bm25"`
}

// SweepPoint is the block policy at one relative floor and ceiling.
type SweepPoint struct {
	Floor   float64      `json:"floor"`
	Ceiling int          `json:"ceiling"`
	Block   BlockMetrics `json:"block"`
}

// Result is one configuration's evaluation.
type Result struct {
	Name       string           `json:"name"`
	Inject     inject.Config    `json:"-"`
	Load       LoadStats        `json:"load"`
	Overall    Scores           `json:"overall"`
	Categories []Scores         `json:"categories"`
	Sweep      []SweepPoint     `json:"sweep"`
	BM25TopK   []SweepPoint     `json:"bm25_top_k"` // the reference's top k as a block (Ceiling = k)
	Questions  []QuestionResult `json:"questions,omitempty"`
}

// The policy sweep's grid.
var (
	SweepFloors   = []float64{0, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9}
	SweepCeilings = []int{1, 2, 3, 5, 8, 10, 12}
)

func (r *Result) summarise() {
	by := map[string][]QuestionResult{}
	for _, q := range r.Questions {
		by[q.Category] = append(by[q.Category], q)
	}
	r.Overall = score(r.Questions)
	cats := make([]string, 0, len(by))
	for c := range by {
		cats = append(cats, c)
	}
	sort.Strings(cats)
	r.Categories = nil
	if len(cats) > 1 || (len(cats) == 1 && cats[0] != "") {
		for _, c := range cats {
			s := score(by[c])
			s.Category = c
			r.Categories = append(r.Categories, s)
		}
	}
	r.Sweep = nil
	for _, f := range SweepFloors {
		for _, c := range SweepCeilings {
			cfg := r.Inject
			cfg.RelativeFloor, cfg.MaxRecalled, cfg.PlateauKeep = f, c, min(cfg.PlateauKeep, c)
			blocks := make([][]Ranked, len(r.Questions))
			evs := make([][]string, len(r.Questions))
			for i, q := range r.Questions {
				scores := make([]float64, len(q.Ranker))
				for j, l := range q.Ranker {
					scores[j] = l.Score
				}
				blocks[i], evs[i] = q.Ranker[:inject.Keep(scores, cfg)], q.Evidence
			}
			r.Sweep = append(r.Sweep, SweepPoint{Floor: f, Ceiling: c, Block: blockMetrics(blocks, evs)})
		}
	}
	r.BM25TopK = nil
	for _, k := range []int{1, 2, 3, 5, 8, 10} {
		blocks := make([][]Ranked, len(r.Questions))
		evs := make([][]string, len(r.Questions))
		for i, q := range r.Questions {
			blocks[i], evs[i] = q.BM25[:min(k, len(q.BM25))], q.Evidence
		}
		r.BM25TopK = append(r.BM25TopK, SweepPoint{Ceiling: k, Block: blockMetrics(blocks, evs)})
	}
}

func score(qs []QuestionResult) Scores {
	s := Scores{N: len(qs)}
	ranker := make([][]Ranked, len(qs))
	bm := make([][]Ranked, len(qs))
	blocks := make([][]Ranked, len(qs))
	evs := make([][]string, len(qs))
	for i, q := range qs {
		ranker[i], bm[i], blocks[i], evs[i] = q.Ranker, q.BM25, q.Block, q.Evidence
	}
	s.Ranker = rankMetrics(ranker, evs)
	s.BM25 = rankMetrics(bm, evs)
	s.Block = blockMetrics(blocks, evs)
	return s
}

// recallAt is the share of ev among the first k of ranked.
func recallAt(ranked []Ranked, ev []string, k int) float64 {
	if len(ev) == 0 {
		return 0
	}
	want := make(map[string]bool, len(ev))
	for _, id := range ev {
		want[id] = true
	}
	found := 0
	for _, r := range ranked[:min(k, len(ranked))] {
		if want[r.ID] {
			found++
			delete(want, r.ID)
		}
	}
	return float64(found) / float64(len(ev))
}

func rankMetrics(rankings [][]Ranked, evs [][]string) RankMetrics {
	var m RankMetrics
	n := float64(len(rankings))
	if n == 0 {
		return m
	}
	for i, r := range rankings {
		ev := evs[i]
		m.R1 += recallAt(r, ev, 1) / n
		m.R5 += recallAt(r, ev, 5) / n
		m.R10 += recallAt(r, ev, 10) / n
		m.R20 += recallAt(r, ev, 20) / n
		want := make(map[string]bool, len(ev))
		for _, id := range ev {
			want[id] = true
		}
		dcg, idcg := 0.0, 0.0
		for j := range min(len(ev), 10) {
			idcg += 1 / math.Log2(float64(j)+2)
		}
		first := 0
		for j, x := range r {
			if !want[x.ID] {
				continue
			}
			if first == 0 {
				first = j + 1
			}
			if j < 10 {
				dcg += 1 / math.Log2(float64(j)+2)
			}
			delete(want, x.ID)
		}
		if idcg > 0 {
			m.NDCG10 += dcg / idcg / n
		}
		if first > 0 {
			m.MRR += 1 / float64(first) / n
		}
	}
	return m
}

func blockMetrics(blocks [][]Ranked, evs [][]string) BlockMetrics {
	var m BlockMetrics
	n := float64(len(blocks))
	if n == 0 {
		return m
	}
	ls := make([]float64, len(blocks))
	ts := make([]float64, len(blocks))
	for i, b := range blocks {
		m.Recall += recallAt(b, evs[i], len(b)) / n
		ls[i] = float64(len(b))
		for _, l := range b {
			ts[i] += l.Tokens
		}
		if len(b) == 0 {
			m.Empty += 1 / n
		}
	}
	m.LinesMean, m.LinesP95 = mean(ls), p95(ls)
	m.TokensMean, m.TokensP95 = mean(ts), p95(ts)
	return m
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// p95 is the nearest-rank 95th percentile.
func p95(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(0.95*float64(len(s)))) - 1
	return s[max(0, i)]
}
