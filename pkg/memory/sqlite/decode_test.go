package sqlite

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
	gojson "github.com/goccy/go-json"
)

// TestDecodeNodeMatchesEncodingJSON: decodeNode (goccy/go-json) reads
// every field of a node document encoding/json wrote as encoding/json
// reads it: texts with escapes, control characters, invalid UTF-8,
// HTML-escaped and astral characters; times in zones, with nanoseconds
// and zero; floats from tiny to huge; empty and long lists.
func TestDecodeNodeMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	c := memorytest.NewBenchCorpus()
	pieces := []string{"plain", `quote " and \ back`, "tab\tnew\nline\r", "\x00\x01\x1f ctrl", "<html>&amp;</html>",
		"é ñ 中文 🙂 \U0001F600", "\xff\xfe invalid utf8", "\u2028\u2029 separators", "", strings.Repeat("long ", 300)}
	text := func() string {
		var sb strings.Builder
		for range 1 + rng.IntN(4) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return sb.String()
	}
	zones := []*time.Location{time.UTC, time.FixedZone("x", -7*3600-1800), time.FixedZone("", 5*3600)}
	when := func() time.Time {
		if rng.IntN(4) == 0 {
			return time.Time{}
		}
		return time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).In(zones[rng.IntN(len(zones))])
	}
	floats := []float64{0, 1, 0.1, 1e-300, 1.7976931348623157e308, math.SmallestNonzeroFloat64, 0.35 + 0.6*rng.Float64(), 123456789.125}
	for i := range 3000 {
		n := c.Node()
		if i%2 == 0 {
			n.Label, n.Body, n.SessionID, n.TenantID, n.SupersededBy = text(), text(), text(), text(), text()
		}
		n.Confidence, n.Weight = floats[rng.IntN(len(floats))], floats[rng.IntN(len(floats))]
		n.Access, n.Useful, n.Unhelpful = rng.IntN(1<<30), rng.IntN(3), -rng.IntN(3)
		n.ReachJudged, n.Pinned = rng.IntN(2) == 0, rng.IntN(2) == 0
		n.ArchivedAt, n.StaleAt, n.ValidFrom, n.ValidTo = when(), when(), when(), when()
		n.CreatedAt, n.UpdatedAt, n.AccessedAt = when(), when(), when()
		n.Paths = nil
		for range rng.IntN(4) {
			n.Paths = append(n.Paths, text())
		}
		if rng.IntN(3) == 0 {
			n.Entities = []memory.Entity{{Key: text(), Name: text()}, {Key: "k"}}
		}
		n.EmbeddingModel = text()
		doc, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		var want, got memory.Node
		if err := json.Unmarshal(doc, &want); err != nil {
			t.Fatal(err)
		}
		if err := gojson.Unmarshal(doc, &got); err != nil {
			t.Fatalf("goccy/go-json refused (decodeNode would fall back): %v on %s", err, doc)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("goccy/go-json read\n%+v\nencoding/json\n%+v\nfrom %s", got, want, doc)
		}
	}
	// A document neither reads is refused with encoding/json's error.
	var n memory.Node
	err := decodeNode([]byte(`{"id": 3}`), &n)
	var typeErr *json.UnmarshalTypeError
	if err == nil || !errors.As(err, &typeErr) {
		t.Errorf("a bad document gave %v, want encoding/json's type error", err)
	}
}
