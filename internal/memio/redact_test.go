package memio_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/memio"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory/redacttest"
)

// Issue 23: import stores no secret. Every case of the secret corpus goes
// in as a node's label, body, path and entity; the export of the store
// holds none of them and stays valid JSON lines.
func TestImportRedactsTheSecretCorpus(t *testing.T) {
	cases := redacttest.Cases(23, 2026, 2)
	var in bytes.Buffer
	for i, c := range cases {
		line, err := json.Marshal(map[string]any{"type": "node", "id": fmt.Sprintf("n%d", i), "subkind": "observation",
			"project_id": "p1", "label": c.Text, "body": "from the wiki: " + c.Text,
			"paths": []string{c.Text}, "entities": []map[string]string{{"name": c.Text}}})
		if err != nil {
			t.Fatal(err)
		}
		in.Write(line)
		in.WriteByte('\n')
	}
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		st := b.Open(t)
		stats, err := memio.Import(ctx, st, bytes.NewReader(in.Bytes()), "", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatalf("import: %v", err)
		}
		var out bytes.Buffer
		if _, err := memio.Export(ctx, st, &out, ""); err != nil {
			t.Fatal(err)
		}
		export := out.String()
		for i, l := range strings.Split(strings.TrimSpace(export), "\n") {
			if !json.Valid([]byte(l)) {
				t.Fatalf("export line %d is not JSON: %s", i+1, l)
			}
		}
		lower := strings.ToLower(export)
		var contexts strings.Builder
		for _, c := range cases {
			contexts.WriteString(c.Context() + "\n")
		}
		caught := 0
		for _, c := range cases {
			// A piece of the secret survives when the export holds it and
			// no context of the corpus does (contexts repeat across nodes).
			if w := survives(c.Secret, contexts.String(), export); w != "" {
				t.Errorf("%s: %q survived import:\n in %q", c.Kind, w, c.Text)
				continue
			}
			if len(c.Secret) >= 12 && strings.Contains(lower, strings.ToLower(c.Secret)) {
				t.Errorf("%s: the secret survived lower-cased (an entity key)", c.Kind)
				continue
			}
			caught++
		}
		t.Logf("import: %d nodes; caught %d/%d secrets in label, body, path and entity", stats.Nodes, caught, len(cases))
	})
}

// survives is redacttest.Survives for a text made of many cases: a window
// of the secret counts when out holds it and the contexts do not.
func survives(secret, contexts, out string) string {
	if strings.Contains(out, secret) {
		return secret
	}
	for i := 0; len(secret) >= 12 && i+8 <= len(secret); i++ {
		if w := secret[i : i+8]; strings.Contains(out, w) && !strings.Contains(contexts, w) {
			return w
		}
	}
	return ""
}
