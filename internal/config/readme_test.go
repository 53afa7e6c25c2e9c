package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/config"
)

// TestREADMEListsEverySetting keeps the README's configuration table in
// step with the settings. ENGRAM_PRINT_CONFIG_TABLE=1 prints the table.
func TestREADMEListsEverySetting(t *testing.T) {
	if os.Getenv("ENGRAM_PRINT_CONFIG_TABLE") != "" {
		t.Log("\n" + config.MarkdownTable())
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	c := config.Default()
	for _, s := range c.Settings() {
		if !strings.Contains(string(readme), "`"+s.Env+"`") {
			t.Errorf("README.md does not document %s (regenerate the table: ENGRAM_PRINT_CONFIG_TABLE=1 go test -run README -v ./internal/config)", s.Env)
		}
	}
}
