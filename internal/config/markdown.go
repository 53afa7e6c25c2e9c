package config

import (
	"strings"
)

// MarkdownTable renders the settings as the README's configuration table:
// variable, flag, default, meaning.
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
