package config

import (
	"strings"
)

// MarkdownTable renders the settings as the configuration table of
// docs/configuration.md: variable, flag, default (as -h prints it) and
// meaning, in the order of Settings.
func MarkdownTable() string {
	c := Default()
	c.DataDir = "~/.local/share/engram"
	var b strings.Builder
	b.WriteString("| Variable | Flag | Default | Meaning |\n|---|---|---|---|\n")
	for _, s := range c.Settings() {
		def := s.Default
		if def == "" {
			def = "(empty)"
		}
		b.WriteString("| `" + s.Env + "` | `-" + s.Flag + "` | `" + def + "` | " +
			strings.ReplaceAll(s.Usage, "|", "\\|") + " |\n")
	}
	return b.String()
}
