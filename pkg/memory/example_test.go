package memory_test

import (
	"fmt"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

func ExampleTerms() {
	fmt.Println(memory.Terms("Why does parseConfig() fail in pkg/config/load.go? a b"))
	// Output: [parseconfig config does fail load why pkg in go]
}

func ExampleRedact() {
	fmt.Println(memory.Redact("export DB_PASSWORD=hunter2; curl https://bob:s3cret@example.com"))
	// Output: export DB_PASSWORD=[redacted]; curl https://[redacted]@example.com
}

func ExampleReinforce() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old, _ := memory.PrepareNew(memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "Use WAL", Confidence: 0.6}, now)
	again := memory.Node{Subkind: memory.Decision, ProjectID: "p", Label: "use wal", Confidence: 0.4, AssertedBy: memory.AssertedUser}
	n := memory.Reinforce(old, again, now.Add(time.Hour))
	fmt.Println(n.Weight, n.Confidence, n.AssertedBy, n.Label)
	// Output: 1.25 0.6 user Use WAL
}
