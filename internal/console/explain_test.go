package console_test

import (
	"html"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestTurnsShowWhy: the session page shows each turn's block as it was
// injected and, for every line of a turn whose record keeps the
// explanation, the rule that admitted it, each retrieval channel's rank
// and score, the prior, and the candidates the policy cut; a turn whose
// record keeps none says so instead of recomputing.
func TestTurnsShowWhy(t *testing.T) {
	u := newUnit(t)
	c := client(t)
	u.login(t, c, tokShop)
	code, page := get(t, c, u.url+"/session?s=s1")
	if code != http.StatusOK {
		t.Fatalf("session page: %d", code)
	}
	turn2 := html.UnescapeString(section(t, page, "turn-turn-2")) // html/template escapes "+" too
	why := u.block.Why
	t.Logf("turn 2's block:\n%s", u.block.Text)
	if !strings.Contains(turn2, u.block.Text) {
		t.Errorf("turn 2 does not show its block as injected:\n%s", turn2)
	}
	if !strings.Contains(turn2, u.fmtPolicy()) {
		t.Errorf("turn 2 lacks the block policy %q:\n%s", u.fmtPolicy(), turn2)
	}
	for _, l := range why.Lines {
		score := 0.0
		if l.Why != nil {
			score = l.Why.Score
		}
		if want := inject.RuleText(l.Rule, score, why); !strings.Contains(turn2, want) {
			t.Errorf("line %s: the page lacks its rule %q", l.ID, want)
		}
		if l.Why == nil {
			continue
		}
		for _, ch := range l.Why.Channels {
			if want := inject.ChannelText(ch); !strings.Contains(turn2, want) {
				t.Errorf("line %s: the page lacks its channel %q", l.ID, want)
			}
		}
		if want := inject.PriorText(l.Why.Prior); !strings.Contains(turn2, want) {
			t.Errorf("line %s: the page lacks its prior %q", l.ID, want)
		}
	}
	if !strings.Contains(turn2, "ranked candidates the block policy cut") {
		t.Errorf("turn 2 lacks the cut list:\n%s", turn2)
	}
	for _, cut := range why.Cut {
		if !strings.Contains(turn2, "["+cut.ID+"]") || !strings.Contains(turn2, inject.RuleText(cut.Rule, cut.Score, why)) {
			t.Errorf("cut %+v not shown", cut)
		}
		n, err := u.st.Get(u.ctx, cut.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(turn2, "["+cut.ID+"]</a> "+n.Label) {
			t.Errorf("cut %+v shown without its label %q", cut, n.Label)
		}
	}
	if len(why.Cut) == 0 {
		t.Error("the seeded turn cut nothing: the cut list is not exercised")
	}
	if turn1 := section(t, page, "turn-turn-1"); !strings.Contains(turn1, "keeps no explanation") || strings.Contains(turn1, "block policy of this turn") {
		t.Errorf("turn 1 (a record without the explanation):\n%s", turn1)
	}
}

func (u *unit) fmtPolicy() string {
	w := u.block.Why
	return "block policy of this turn: relative floor " + f2(w.RelativeFloor) + " × best " + f3(w.Best) + " = " + f3(w.Floor)
}

// TestExplanationIsEscaped: a record's explanation is shown escaped, as
// memory text is (TestMemoryTextIsEscaped): a forged record's ids and
// rules cannot write markup into the page.
func TestExplanationIsEscaped(t *testing.T) {
	u := newUnit(t)
	const evil = `<script>alert("x")</script><img src=x onerror=alert(1)>`
	in := memory.Injection{IDs: []string{u.fly.ID}, Scores: []float64{0.5}, Text: "block " + evil,
		Why: &memory.BlockWhy{Best: 0.5, Floor: 0.2, RelativeFloor: 0.4, MaxRecalled: 10, PlateauKeep: 6,
			Lines: []memory.LineWhy{{ID: u.fly.ID, Rule: evil, Why: &memory.Why{Rank: 1, Score: 0.5,
				Channels: []memory.ChannelWhy{{Channel: evil, Rank: 1, Score: 1, Share: 1}}}}},
			Cut: []memory.CutWhy{{ID: evil, Rank: 2, Score: 0.1, Rule: evil}}}}
	ref := memory.SessionRef{Project: "shop", Session: "s1"}
	if err := u.st.PutInjection(u.ctx, ref, "turn-1", in, 0); err != nil {
		t.Fatal(err)
	}
	c := client(t)
	u.login(t, c, tokShop)
	code, page := get(t, c, u.url+"/session?s=s1")
	if code != http.StatusOK || strings.Contains(page, "<script>alert") || strings.Contains(page, "<img src=x") {
		t.Fatalf("%d, the explanation unescaped:\n%s", code, page)
	}
	turn1 := section(t, page, "turn-turn-1")
	if strings.Count(turn1, "&lt;script&gt;") < 4 { // the block, the rule, the channel, the cut's id and rule
		t.Errorf("the explanation is not shown escaped:\n%s", turn1)
	}
}

// section is the HTML of the page's <section id=...>.
func section(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no section %s in:\n%s", id, page)
	}
	rest := page[i:]
	if j := strings.Index(rest, "</section>"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

func f2(f float64) string                 { return strconvF(f, 2) }
func f3(f float64) string                 { return strconvF(f, 3) }
func strconvF(f float64, prec int) string { return strconv.FormatFloat(f, 'f', prec, 64) }
