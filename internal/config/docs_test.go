package config_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/config"
)

// configDoc is the configuration reference whose table is generated from
// the settings.
const configDoc = "../../docs/configuration.md"

const tableHeader = "| Variable | Flag | Default | Meaning |"

// TestDocsListEverySetting keeps the configuration table of
// docs/configuration.md equal to the settings: every variable has its row,
// with the flag, the default and the meaning `engram <command> -h` shows,
// and no row names a setting that does not exist. ENGRAM_WRITE_CONFIG_TABLE=1
// rewrites the table in the file from the settings.
func TestDocsListEverySetting(t *testing.T) {
	raw, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "\n"+tableHeader+"\n")
	if start < 0 {
		t.Fatalf("%s has no table headed %q", configDoc, tableHeader)
	}
	start++
	end := strings.Index(doc[start:], "\n\n")
	if end < 0 {
		end = len(doc) - start
	}
	end += start + 1
	want := config.MarkdownTable()
	if os.Getenv("ENGRAM_WRITE_CONFIG_TABLE") != "" {
		doc = doc[:start] + want + doc[end:]
		if err := os.WriteFile(configDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the table of %s", configDoc)
		return
	}
	const regen = " (regenerate the table: ENGRAM_WRITE_CONFIG_TABLE=1 go test -run DocsListEverySetting ./internal/config)"
	got := map[string]string{} // variable -> its row in the doc
	for _, row := range strings.Split(strings.TrimSuffix(doc[start:end], "\n"), "\n")[2:] {
		cells := strings.SplitN(row, " | ", 2)
		got[strings.Trim(strings.TrimPrefix(cells[0], "| "), "`")] = row
	}
	rows := strings.Split(strings.TrimSuffix(want, "\n"), "\n")[2:]
	c := config.Default()
	settings := c.Settings()
	if len(rows) != len(settings) {
		t.Fatalf("MarkdownTable has %d rows for %d settings", len(rows), len(settings))
	}
	known := map[string]bool{}
	for i, s := range settings {
		known[s.Env] = true
		row, ok := got[s.Env]
		switch {
		case !ok:
			t.Errorf("%s does not document %s%s", configDoc, s.Env, regen)
		case row != rows[i]:
			t.Errorf("%s: the row of %s differs from the settings (default %q, flag -%s)\n got: %s\nwant: %s%s",
				configDoc, s.Env, s.Default, s.Flag, row, rows[i], regen)
		}
	}
	for env := range got {
		if !known[env] {
			t.Errorf("%s documents %s, which is no setting%s", configDoc, env, regen)
		}
	}
	if t.Failed() {
		return
	}
	if doc[start:end] != want {
		t.Errorf("%s: the table's rows are not in the settings' order%s", configDoc, regen)
	}
}

// TestMarkdownTableShowsDefaults: the table's default column is what
// `engram <command> -h` prints for each flag (the data dir, which depends on
// the environment, is shown as its usual path).
func TestMarkdownTableShowsDefaults(t *testing.T) {
	c := config.Default()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	none := func(string) (string, bool) { return "", false }
	if err := c.Load(fs, nil, none, config.All); err != nil {
		t.Fatal(err)
	}
	table := config.MarkdownTable()
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		def := f.DefValue
		switch {
		case f.Name == "data":
			def = "~/.local/share/engram"
		case def == "":
			def = "(empty)"
		}
		if !strings.Contains(table, " | `-"+f.Name+"` | `"+def+"` | ") {
			t.Errorf("the table's default of -%s is not %q, what -h prints", f.Name, def)
		}
	})
	if n != len(c.Settings()) {
		t.Errorf("-h shows %d flags, the settings are %d", n, len(c.Settings()))
	}
}
