package ollamae2e

// Packages that register production schemas or tools (llm.RegisterSchema,
// llm.RegisterTool) are imported here for their registrations.
// TestEveryRegisteringPackageImported lists the ones missing; add each one's
// schema names to covered (schemas_test.go).
import (
	_ "github.com/engram-memory/engram/internal/consolidate"
	_ "github.com/engram-memory/engram/internal/extract"
)
