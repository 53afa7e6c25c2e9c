package memory_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/neutralisetest"
)

// The checker sees every payload of the corpus before neutralisation (a
// checker that cannot fail proves nothing), and none after, on both forms.
func TestNeutraliseAttackCorpus(t *testing.T) {
	attacks := neutralisetest.Attacks()
	if len(attacks) < 150 {
		t.Fatalf("attack corpus has %d payloads, want at least 150", len(attacks))
	}
	families := map[string][2]int{}
	for _, a := range attacks {
		if len(neutralisetest.Survives(a.Text)) == 0 {
			t.Errorf("checker does not see the raw %s payload %q", a.Family, a.Text)
		}
		f := families[a.Family]
		f[1]++
		ok := true
		for _, form := range []struct {
			name string
			fn   func(string) string
		}{{"Neutralise", memory.Neutralise}, {"NeutraliseText", memory.NeutraliseText}} {
			out := form.fn(a.Text)
			if s := neutralisetest.Survives(out); len(s) > 0 {
				ok = false
				t.Errorf("%s: %s(%q)\n = %q\n still holds %s", a.Family, form.name, a.Text, out, strings.Join(s, "; "))
			}
			if again := form.fn(out); again != out {
				t.Errorf("%s not idempotent: %q -> %q -> %q", form.name, a.Text, out, again)
			}
		}
		if ok {
			f[0]++
		}
		families[a.Family] = f
	}
	var names []string
	for n := range families {
		names = append(names, n)
	}
	sort.Strings(names)
	var sum strings.Builder
	for _, n := range names {
		fmt.Fprintf(&sum, " %s %d/%d", n, families[n][0], families[n][1])
	}
	t.Logf("attack corpus neutralised per family:%s", sum.String())
}

// Ordinary text of every language of the corpus, code and markdown keeps
// every character (the one-line form only collapses whitespace).
func TestNeutraliseOrdinaryCorpus(t *testing.T) {
	lines := neutralisetest.Ordinary()
	if len(lines) < 300 {
		t.Fatalf("ordinary corpus has %d lines, want at least 300", len(lines))
	}
	altered := 0
	for _, l := range lines {
		one := memory.Neutralise(l) != strings.Join(strings.Fields(l), " ")
		text := memory.NeutraliseText(l) != l
		if one || text {
			altered++
			t.Logf("altered: %q\n -> %q", l, memory.Neutralise(l))
		}
	}
	rate := float64(altered) / float64(len(lines))
	t.Logf("ordinary corpus: %d of %d lines altered (%.2f%%)", altered, len(lines), 100*rate)
	if rate > 0.01 {
		t.Errorf("%.2f%% of ordinary lines altered, want at most 1%%", 100*rate)
	}
	// The whole corpus as one text: the same lines change.
	whole := strings.Join(lines, "\n")
	if got := memory.NeutraliseText(whole); strings.Count(got, "\n") != strings.Count(whole, "\n") {
		t.Errorf("NeutraliseText changed the number of lines of the corpus")
	}
}
