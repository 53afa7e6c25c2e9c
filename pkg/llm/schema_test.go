package llm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type schemaItem struct {
	Label string  `json:"label" llm:"maxLength=20,minLength=1" desc:"short name"`
	Score float64 `json:"score" llm:"minimum=0,maximum=1"`
}

type schemaDoc struct {
	Kind    string       `json:"kind" llm:"enum=decision|preference|failure"`
	Items   []schemaItem `json:"items" llm:"maxItems=3"`
	Tags    []string     `json:"tags,omitempty" llm:"maxItems=4,maxLength=12"`
	Count   int          `json:"count" llm:"minimum=1,maximum=5"`
	Flag    bool         `json:"flag" llm:"optional"`
	Ignored string       `json:"-"`
	hidden  string
}

func TestSchemaJSON(t *testing.T) {
	s, err := SchemaFor[schemaDoc]()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{` +
		`"kind":{"type":"string","enum":["decision","preference","failure"],"maxLength":10},` +
		`"items":{"type":"array","items":{"type":"object","properties":{` +
		`"label":{"type":"string","description":"short name","minLength":1,"maxLength":20},` +
		`"score":{"type":"number","minimum":0,"maximum":1}},"required":["label","score"],"additionalProperties":false},"maxItems":3},` +
		`"tags":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":4},` +
		`"count":{"type":"integer","minimum":1,"maximum":5},` +
		`"flag":{"type":"boolean"}},` +
		`"required":["kind","items","count"],"additionalProperties":false}`
	if got := s.String(); got != want {
		t.Fatalf("schema JSON\n got %s\nwant %s", got, want)
	}
	// It is valid JSON that a generic decoder reads back.
	var m map[string]any
	if err := json.Unmarshal([]byte(s.String()), &m); err != nil {
		t.Fatal(err)
	}
	_ = schemaDoc{}.hidden
}

func TestSchemaRefusesUnbounded(t *testing.T) {
	type noMax struct {
		Body string `json:"body"`
	}
	type noItems struct {
		List []int `json:"list"`
	}
	type inner struct {
		Deep []string `json:"deep" llm:"maxItems=2"`
	}
	type nested struct {
		In []inner `json:"in" llm:"maxItems=2"`
	}
	type withMap struct {
		M map[string]string `json:"m"`
	}
	type withAny struct {
		A any `json:"a"`
	}
	type rec struct {
		Kids []rec `json:"kids" llm:"maxItems=2"`
	}
	type badTag struct {
		S string `json:"s" llm:"maxLen=3"`
	}
	type minOverMax struct {
		S string `json:"s" llm:"minLength=5,maxLength=3"`
	}
	cases := []struct {
		name string
		fn   func() (*Schema, error)
		want string
	}{
		{"string", SchemaFor[noMax], "noMax.body: string without maxLength"},
		{"slice", SchemaFor[noItems], "noItems.list: array without maxItems"},
		{"nested", SchemaFor[nested], "nested.in[].deep[]: string without maxLength"},
		{"map", SchemaFor[withMap], "withMap.m: unsupported type"},
		{"interface", SchemaFor[withAny], "withAny.a: unsupported type"},
		{"recursive", SchemaFor[rec], "recursive type"},
		{"tag", SchemaFor[badTag], `unknown llm tag option "maxLen"`},
		{"minmax", SchemaFor[minOverMax], "minLength 5 > maxLength 3"},
		{"toplevel", SchemaFor[string], "top level must be a struct"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.fn()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// Every schema a worker registers is bounded: strings have maxLength and
// arrays maxItems (the generator refuses otherwise; CheckBounded re-checks
// the registry, including hand-built tool schemas).
func TestRegisteredSchemasBounded(t *testing.T) {
	RegisterSchema[schemaDoc]("test.schemaDoc")
	RegisterTool(MustTool[schemaItem]("test_item", "d").Spec())
	if len(Schemas()) < 2 {
		t.Fatalf("registry has %d entries", len(Schemas()))
	}
	for _, e := range Schemas() {
		if err := e.Schema.CheckBounded(); err != nil {
			t.Errorf("%s: %v", e.Name, err)
		}
	}
	unbounded := &Schema{Type: "object", Properties: []Property{{Name: "s", Schema: &Schema{Type: "string"}}}}
	if err := unbounded.CheckBounded(); err == nil || !strings.Contains(err.Error(), "$.s") {
		t.Fatalf("CheckBounded(unbounded) = %v", err)
	}
	// Registering the same name with another schema is a programming error.
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate registration with a different schema did not panic")
		}
	}()
	RegisterSchema[schemaItem]("test.schemaDoc")
}

func TestValidateNamesFields(t *testing.T) {
	s, _ := SchemaFor[schemaDoc]()
	cases := []struct {
		doc  string
		want []string
	}{
		{`{"kind":"decision","items":[],"count":1}`, nil},
		{`{"kind":"decision","items":[{"label":"ééééééééééééééééééé","score":0.5}],"count":1}`, nil}, // 19 runes, 38 bytes
		{`{"kind":"nope","items":[],"count":1}`, []string{`field "kind": is "nope", must be one of "decision", "preference", "failure"`}},
		{`{"items":[],"count":1}`, []string{`field "kind": is required but missing`}},
		{`{"kind":"decision","items":[],"count":1,"extra":2}`, []string{`field "extra": is not an allowed field`}},
		{`{"kind":"decision","items":[{"label":"","score":2}],"count":1}`, []string{
			`field "items[0].label": is 0 characters long, at least 1 required`,
			`field "items[0].score": is 2, at most 1 allowed`}},
		{`{"kind":"decision","items":[{"label":"a","score":0},{"label":"a","score":0},{"label":"a","score":0},{"label":"a","score":0}],"count":1}`,
			[]string{`field "items": has 4 items, at most 3 allowed`}},
		{`{"kind":"decision","items":[],"count":1.5}`, []string{`field "count": must be an integer, got 1.5`}},
		{`{"kind":"decision","items":[],"count":"1"}`, []string{`field "count": must be an integer, got string`}},
		{`{"kind":"decision","items":[],"count":1,"tags":["abcdefghijklmn"]}`, []string{`field "tags[0]": is 14 characters long, at most 12 allowed`}},
		{`[1]`, []string{"must be an object, got array"}},
		{`{"kind":`, []string{"not valid JSON"}},
		{`{} {}`, []string{"extra data"}},
		{``, []string{"empty reply"}},
	}
	for _, c := range cases {
		err := s.Validate([]byte(c.doc))
		if c.want == nil {
			if err != nil {
				t.Errorf("Validate(%s) = %v, want nil", c.doc, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("Validate(%s) = nil, want %q", c.doc, c.want)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Validate(%s) = %q, want it to contain %q", c.doc, err, w)
			}
		}
	}
	var ve *ValidationError
	if err := s.Validate([]byte(`{"kind":1}`)); !errors.As(err, &ve) || len(ve.Problems) < 2 {
		t.Fatalf("want a ValidationError with several problems, got %v", err)
	}
}

func TestExampleIsValid(t *testing.T) {
	for _, fn := range []func() (*Schema, error){SchemaFor[schemaDoc], SchemaFor[schemaItem]} {
		s, err := fn()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(s.Example()); err != nil {
			t.Errorf("example %s of %s invalid: %v", s.Example(), s, err)
		}
	}
}

// maximal builds the largest instance: every string at maxLength, every
// array at maxItems, numbers long.
func maximal(s *Schema) any {
	switch s.Type {
	case "object":
		m := map[string]any{}
		for _, p := range s.Properties {
			m[p.Name] = maximal(p.Schema)
		}
		return m
	case "array":
		a := make([]any, *s.MaxItems)
		for i := range a {
			a[i] = maximal(s.Items)
		}
		return a
	case "string":
		return strings.Repeat("w", *s.MaxLength)
	case "number":
		return -1.2345678901234567e-300
	case "integer":
		return int64(-9223372036854775807)
	case "boolean":
		return false
	}
	return nil
}

// A valid reply must never be cut off by the num_predict the schema sets: the
// bound covers the largest instance even at 2 characters per token.
func TestPredictCoversLargestReply(t *testing.T) {
	s, _ := SchemaFor[schemaDoc]()
	b, _ := json.MarshalIndent(maximal(s), "", "  ")
	if s.MaxChars() < len(b) {
		t.Fatalf("MaxChars %d < largest pretty-printed instance %d", s.MaxChars(), len(b))
	}
	if s.PredictTokens()*2 < len(b) {
		t.Fatalf("PredictTokens %d too small for %d chars", s.PredictTokens(), len(b))
	}
}

func TestEstimateTokens(t *testing.T) {
	for in, want := range map[string]int{"": 0, "a": 1, "abcd": 1, "abcde": 2, "éééé": 1} {
		if got := EstimateTokens(in); got != want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestSchemaMarshalsAsValueAndPointer(t *testing.T) {
	s, _ := SchemaFor[schemaItem]()
	byPtr, _ := json.Marshal(s)
	byVal, _ := json.Marshal(*s)
	inMap, _ := json.Marshal(map[string]any{"s": *s})
	if string(byPtr) != string(byVal) || string(inMap) != `{"s":`+string(byPtr)+`}` || !strings.Contains(string(byPtr), `"additionalProperties":false`) {
		t.Fatalf("ptr %s\nval %s\nmap %s", byPtr, byVal, inMap)
	}
}
