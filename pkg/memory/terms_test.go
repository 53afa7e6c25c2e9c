package memory

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTerms(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"", []string{}},
		{"a b c", []string{}},
		{"Fix the parseConfig() bug in pkg/config/load.go", []string{"parseconfig", "config", "load", "fix", "the", "bug", "pkg", "in", "go"}},
		{"Redis redis REDIS re", []string{"redis", "re"}},
		{"snake_case-and.dots", []string{"snake", "case", "dots", "and"}},
		{"Größe über 42 x", []string{"größe", "über", "42"}},
		{"!!!@@@###", []string{}},
	}
	for _, c := range cases {
		got := Terms(c.in)
		if !slices.Equal(got, c.want) {
			t.Errorf("Terms(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestTermsCap(t *testing.T) {
	var words []string
	for i := range 50 {
		words = append(words, strings.Repeat("w", 2+i%10)+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	got := Terms(strings.Join(words, " "))
	if len(got) != MaxTerms {
		t.Fatalf("len = %d, want %d", len(got), MaxTerms)
	}
	if utf8.RuneCountInString(got[0]) != 13 || utf8.RuneCountInString(got[len(got)-1]) < 4 {
		t.Fatalf("not longest first: first %q last %q", got[0], got[len(got)-1])
	}
}

func FuzzTerms(f *testing.F) {
	for _, s := range []string{"", "hello world", "pkg/memory/store.go parseConfig()", "ÄÖÜ äöü 漢字 ab", "a\x00b\xffcd", strings.Repeat("xy ", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Terms(s)
		if len(got) > MaxTerms {
			t.Fatalf("%d terms", len(got))
		}
		seen := map[string]bool{}
		for i, term := range got {
			if utf8.RuneCountInString(term) < 2 {
				t.Fatalf("short term %q", term)
			}
			if term != strings.ToLower(term) {
				t.Fatalf("not lower-case: %q", term)
			}
			if seen[term] {
				t.Fatalf("duplicate %q", term)
			}
			seen[term] = true
			if i > 0 && utf8.RuneCountInString(got[i-1]) < utf8.RuneCountInString(term) {
				t.Fatalf("not longest first: %q", got)
			}
			if strings.ContainsFunc(term, func(r rune) bool { return r == ' ' || r == '/' || r == '.' }) {
				t.Fatalf("separator in term %q", term)
			}
		}
	})
}

func TestStemPrefix(t *testing.T) {
	cases := map[string]string{
		// Cut to the stem's shared part, so that the prefix match reaches the other forms.
		"restaurants": "restaur",
		"happy":       "happ",
		"babies":      "babi",
		// Short stems are not used: "tried" -> "tri" would match "trip".
		"tried": "tried",
		// A word that is its own stem stays.
		"deploy": "deploy",
		"bus":    "bus",
		// Not English letters: left as they are.
		"größe": "größe",
		"42":    "42",
	}
	for in, want := range cases {
		if got := StemPrefix(in); got != want {
			t.Errorf("StemPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLexTerms(t *testing.T) {
	got := LexTerms(Terms("What did the Korean restaurants do: deploy, deploys, deployed, restaurant"))
	want := []LexTerm{
		{Prefix: "restaur", Words: []string{"restaurants", "restaurant"}, Weight: 1},
		{Prefix: "deploy", Words: []string{"deployed", "deploys", "deploy"}, Weight: 1},
		{Prefix: "korean", Words: []string{"korean"}, Weight: 1},
		{Prefix: "what", Words: []string{"what"}, Weight: StopWordWeight},
		{Prefix: "did", Words: []string{"did"}, Weight: StopWordWeight},
		{Prefix: "the", Words: []string{"the"}, Weight: StopWordWeight},
		{Prefix: "do", Words: []string{"do"}, Weight: StopWordWeight},
	}
	if !slices.EqualFunc(got, want, func(a, b LexTerm) bool {
		return a.Prefix == b.Prefix && slices.Equal(a.Words, b.Words) && a.Weight == b.Weight
	}) {
		t.Errorf("LexTerms = %+v, want %+v", got, want)
	}
	if got := LexTerms([]string{"", "go", "go"}); len(got) != 1 || got[0].Prefix != "go" || !slices.Equal(got[0].Words, []string{"go"}) || got[0].Weight != 1 {
		t.Errorf("LexTerms of a repeated short word = %+v", got)
	}
}

func TestQueryTermsDropStopWords(t *testing.T) {
	if got := QueryTerms("What did I tell you about my dog's name?"); !slices.Equal(got, []string{"tell", "name", "dog"}) {
		t.Errorf("QueryTerms = %q", got)
	}
	if got := QueryTerms("what is it"); !slices.Equal(got, []string{"what", "is", "it"}) {
		t.Errorf("a question of stop words only must keep them: %q", got)
	}
}
