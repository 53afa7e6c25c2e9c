package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/config"
)

// TestREADMEListsEverySetting keeps the README's configuration table in
// step with the settings. ENGRAM_PRINT_CONFIG_TABLE=1 prints the table (copy
// the table itself, not the test output around it). A row may also be in
// the reference of its topic under docs/ (the README is being split into
// it).
func TestREADMEListsEverySetting(t *testing.T) {
	if os.Getenv("ENGRAM_PRINT_CONFIG_TABLE") != "" {
		t.Log("\n" + config.MarkdownTable())
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		readme = append(append(readme, '\n'), b...)
	}
	c := config.Default()
	for _, s := range c.Settings() {
		// A row of the table, not just a mention anywhere.
		if !strings.Contains(string(readme), "\n| `"+s.Env+"` | `-"+s.Flag+"` |") {
			t.Errorf("neither README.md nor docs/ document %s (regenerate the table: ENGRAM_PRINT_CONFIG_TABLE=1 go test -run README -v ./internal/config)", s.Env)
		}
	}
}
