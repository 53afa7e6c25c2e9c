package console

import "testing"

func TestDiffHTML(t *testing.T) {
	for _, c := range []struct{ before, after, wantB, wantA string }{
		{"Run go test -race before merging", "Run go test -race and go vet before merging",
			"Run go test -race before merging", "Run go test -race <ins>and go vet</ins> before merging"},
		{"The staging database is Postgres 16", "The staging database is MySQL",
			"The staging database is <del>Postgres 16</del>", "The staging database is <ins>MySQL</ins>"},
		{"a <script>x</script>", "a <b>", "a <del>&lt;script&gt;x&lt;/script&gt;</del>", "a <ins>&lt;b&gt;</ins>"},
		{"gone", "", "gone", ""},
	} {
		b, a := diffHTML(c.before, c.after)
		if string(b) != c.wantB || string(a) != c.wantA {
			t.Errorf("diff(%q, %q) = %q, %q; want %q, %q", c.before, c.after, b, a, c.wantB, c.wantA)
		}
	}
}
