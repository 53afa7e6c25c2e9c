package extract_test

import (
	"testing"

	"github.com/engram-memory/engram/internal/extract"
	"github.com/engram-memory/engram/pkg/llm"
)

func TestSchemaRegistered(t *testing.T) {
	for _, e := range llm.Schemas() {
		if e.Name == extract.SchemaName {
			if err := e.Schema.CheckBounded(); err != nil {
				t.Fatal(err)
			}
			mem := e.Schema.Property("memories")
			if mem == nil || mem.MaxItems == nil || *mem.MaxItems != extract.MaxReplyMemories {
				t.Fatalf("memories bound: %+v", mem)
			}
			label := mem.Items.Property("label")
			if label == nil || label.MaxLength == nil || *label.MaxLength != extract.MaxLabelChars {
				t.Fatalf("label bound: %+v", label)
			}
			t.Logf("reply schema: %d characters at most, num_predict %d", e.Schema.MaxChars(), e.Schema.PredictTokens())
			return
		}
	}
	t.Fatalf("schema %q is not in the llm registry", extract.SchemaName)
}
