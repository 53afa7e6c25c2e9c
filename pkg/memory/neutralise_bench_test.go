package memory_test

import (
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/neutralisetest"
)

// BenchmarkNeutraliseLine: one ordinary line of the corpus per op (the
// memory block neutralises each of its lines).
func BenchmarkNeutraliseLine(b *testing.B) {
	lines := neutralisetest.Ordinary()
	b.ResetTimer()
	for i := range b.N {
		memory.Neutralise(lines[i%len(lines)])
	}
}

// BenchmarkNeutraliseAttack: one attack payload per op.
func BenchmarkNeutraliseAttack(b *testing.B) {
	attacks := neutralisetest.Attacks()
	b.ResetTimer()
	for i := range b.N {
		memory.Neutralise(attacks[i%len(attacks)].Text)
	}
}

// BenchmarkNeutraliseText: the whole ordinary corpus as one text (a long
// summary) per op.
func BenchmarkNeutraliseText(b *testing.B) {
	whole := strings.Join(neutralisetest.Ordinary(), "\n")
	b.SetBytes(int64(len(whole)))
	b.ResetTimer()
	for range b.N {
		memory.NeutraliseText(whole)
	}
}
