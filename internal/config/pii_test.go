package config_test

import (
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/config"
)

// ENGRAM_REDACT_PII is validated at start: a tenant id that cannot be one is
// named; "*", "default" and tenant ids pass.
func TestRedactPIISetting(t *testing.T) {
	c := config.Default()
	c.RedactPII = []string{"acme", "default", "*"}
	if err := c.Validate(); err != nil && strings.Contains(err.Error(), "ENGRAM_REDACT_PII") {
		t.Errorf("valid list refused: %v", err)
	}
	c.RedactPII = []string{"acme", strings.Repeat("x", 300)}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "ENGRAM_REDACT_PII") {
		t.Errorf("a tenant id of 300 bytes: %v", err)
	}
}
