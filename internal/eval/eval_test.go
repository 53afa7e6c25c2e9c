package eval

import (
	"bytes"
	"compress/gzip"
	"math"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func ranked(ids ...string) []Ranked {
	out := make([]Ranked, len(ids))
	for i, id := range ids {
		out[i] = Ranked{ID: id, Tokens: 10}
	}
	return out
}

// The metrics on rankings worked out by hand.
func TestRankMetrics(t *testing.T) {
	rankings := [][]Ranked{
		ranked("a", "x", "b"),                 // evidence a, b: hits at 1 and 3
		ranked("x", "y", "z", "w", "v", "c"),  // evidence c: hit at 6
		ranked("x", "y"),                      // evidence d: missed
		ranked("e", "e2", "x", "x", "x", "x"), // evidence e: hit at 1 (e2 is not evidence)
	}
	evs := [][]string{{"a", "b"}, {"c"}, {"d"}, {"e"}}
	m := rankMetrics(rankings, evs)
	if want := (0.5 + 0 + 0 + 1) / 4; !near(m.R1, want) {
		t.Errorf("R@1 = %v, want %v", m.R1, want)
	}
	if want := (1 + 0 + 0 + 1) / 4.0; !near(m.R5, want) {
		t.Errorf("R@5 = %v, want %v", m.R5, want)
	}
	if want := (1 + 1 + 0 + 1) / 4.0; !near(m.R10, want) {
		t.Errorf("R@10 = %v, want %v", m.R10, want)
	}
	if want := (1 + 1.0/6 + 0 + 1) / 4; !near(m.MRR, want) {
		t.Errorf("MRR = %v, want %v", m.MRR, want)
	}
	ndcg1 := (1 + 1/math.Log2(4)) / (1 + 1/math.Log2(3))
	ndcg2 := (1 / math.Log2(7)) / 1
	if want := (ndcg1 + ndcg2 + 0 + 1) / 4; !near(m.NDCG10, want) {
		t.Errorf("nDCG@10 = %v, want %v", m.NDCG10, want)
	}
}

func TestBlockMetrics(t *testing.T) {
	blocks := [][]Ranked{ranked("a", "b"), nil, ranked("c")}
	m := blockMetrics(blocks, [][]string{{"a", "z"}, {"q"}, {"c"}})
	if want := (0.5 + 0 + 1) / 3; !near(m.Recall, want) {
		t.Errorf("recall = %v, want %v", m.Recall, want)
	}
	if !near(m.Empty, 1.0/3) || !near(m.LinesMean, 1) || !near(m.TokensMean, 10) || !near(m.TokensP95, 20) {
		t.Errorf("block metrics = %+v", m)
	}
}

// The reference BM25 ranks by rare shared words and ignores stop words.
func TestBM25Reference(t *testing.T) {
	x := newBM25Index()
	x.add("d1", "What is the best way to cook rice?")
	x.add("d2", "I adopted a greyhound named Biscuit last spring.")
	x.add("d3", "The weather was nice; what a day.")
	x.add("d4", "Biscuit the greyhound loves long walks.")
	got := x.search("what is my dog's name? the greyhound", 10)
	if len(got) != 2 || got[0] != "d2" && got[0] != "d4" {
		t.Fatalf("search = %v, want d2 and d4 (stop words match nothing)", got)
	}
	if got := x.search("the what is", 10); len(got) != 0 {
		t.Errorf("a query of stop words matched %v", got)
	}
}

func TestFilterGraphKeepsTheAskedProjects(t *testing.T) {
	graph := `{"type":"node","id":"a1","project_id":"a","label":"x"}
{"type":"node","id":"b1","project_id":"b","label":"y"}
{"type":"node","id":"g1","label":"global"}
{"type":"edge","src":"a1","dst":"g1","relation":"relates_to"}
{"type":"edge","src":"a1","dst":"b1","relation":"relates_to"}
`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(graph))
	zw.Close()
	for name, in := range map[string][]byte{"plain": []byte(graph), "gzip": gz.Bytes()} {
		var out bytes.Buffer
		n, err := FilterGraph(bytes.NewReader(in), &out, map[string]bool{"a": true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := out.String()
		if n != 2 || !strings.Contains(got, `"a1"`) || !strings.Contains(got, `"g1"`) || strings.Contains(got, `"b1"`) ||
			strings.Count(got, `"edge"`) != 1 {
			t.Errorf("%s: kept %d nodes:\n%s", name, n, got)
		}
	}
}

func TestReadQuestionsReportsEveryProblem(t *testing.T) {
	in := `{"project":"p","question":"q?","evidence":["n1"],"question_date":"2023-05-30T10:00:00Z","answer":3}
{"project":"","question":"q?","evidence":[]}
{"project":"p","question":"q?","evidence":["n1"],"typo":1}
not json
`
	_, err := ReadQuestions(strings.NewReader(in))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"line 2: missing project, evidence", "line 3", "line 4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	qs, err := ReadQuestions(strings.NewReader(strings.SplitN(in, "\n", 2)[0]))
	if err != nil || len(qs) != 1 || qs[0].Date.Year() != 2023 {
		t.Errorf("good line: %+v, %v", qs, err)
	}
}

func TestSampleIsEvenlySpaced(t *testing.T) {
	qs := make([]Question, 10)
	for i := range qs {
		qs[i].Project = string(rune('a' + i))
	}
	got := Sample(qs, 3)
	if len(got) != 3 || got[0].Project != "a" || got[1].Project != "d" || got[2].Project != "g" {
		t.Errorf("Sample(10, 3) = %v", got)
	}
	if len(Sample(qs, 0)) != 10 || len(Sample(qs, 20)) != 10 {
		t.Error("Sample with n <= 0 or n >= len must keep all")
	}
}
