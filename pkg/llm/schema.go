package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Schema is the subset of JSON Schema that Engram sends to Ollama, both as a
// structured-output Format and as tool parameters. Build one from a Go type
// with [SchemaFor]; it marshals with a stable key order.
//
// Every string has a MaxLength and every array a MaxItems: an unbounded
// string lets a small model run to the token limit in the middle of the JSON.
type Schema struct {
	Type        string // "object", "array", "string", "integer", "number", "boolean"
	Description string

	Properties []Property // objects, in field order
	Required   []string   // objects

	Items    *Schema // arrays
	MinItems *int
	MaxItems *int

	Enum      []string // strings
	MinLength *int
	MaxLength *int

	Minimum *float64 // integers and numbers
	Maximum *float64
}

// Property is one named property of an object schema.
type Property struct {
	Name   string
	Schema *Schema
}

// Property returns the schema of the named property, or nil.
func (s *Schema) Property(name string) *Schema {
	for _, p := range s.Properties {
		if p.Name == name {
			return p.Schema
		}
	}
	return nil
}

// MarshalJSON writes the schema with keys in a fixed order. Objects carry
// "additionalProperties": false.
func (s Schema) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	(&s).write(&b)
	return b.Bytes(), nil
}

// String is the schema's JSON.
func (s *Schema) String() string {
	b, _ := s.MarshalJSON()
	return string(b)
}

func (s *Schema) write(b *bytes.Buffer) {
	b.WriteByte('{')
	first := true
	key := func(k string) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(strconv.Quote(k))
		b.WriteByte(':')
	}
	str := func(v string) {
		q, _ := json.Marshal(v)
		b.Write(q)
	}
	key("type")
	str(s.Type)
	if s.Description != "" {
		key("description")
		str(s.Description)
	}
	if len(s.Enum) > 0 {
		key("enum")
		q, _ := json.Marshal(s.Enum)
		b.Write(q)
	}
	intKey := func(k string, v *int) {
		if v != nil {
			key(k)
			b.WriteString(strconv.Itoa(*v))
		}
	}
	numKey := func(k string, v *float64) {
		if v != nil {
			key(k)
			b.WriteString(strconv.FormatFloat(*v, 'g', -1, 64))
		}
	}
	intKey("minLength", s.MinLength)
	intKey("maxLength", s.MaxLength)
	numKey("minimum", s.Minimum)
	numKey("maximum", s.Maximum)
	if s.Items != nil {
		key("items")
		s.Items.write(b)
	}
	intKey("minItems", s.MinItems)
	intKey("maxItems", s.MaxItems)
	if s.Type == "object" {
		key("properties")
		b.WriteByte('{')
		for i, p := range s.Properties {
			if i > 0 {
				b.WriteByte(',')
			}
			str(p.Name)
			b.WriteByte(':')
			p.Schema.write(b)
		}
		b.WriteByte('}')
		if len(s.Required) > 0 {
			key("required")
			q, _ := json.Marshal(s.Required)
			b.Write(q)
		}
		key("additionalProperties")
		b.WriteString("false")
	}
	b.WriteByte('}')
}

// SchemaFor builds the JSON Schema of T, which must be a struct.
//
// Field names come from `json` tags (fields tagged "-" and unexported fields
// are skipped). A field is required unless its json tag says omitempty or its
// llm tag says optional. The `desc` tag is the description. The `llm` tag is a
// comma-separated list of:
//
//	maxLength=N minLength=N   strings (on a []string field: each element)
//	enum=a|b|c                strings (sets maxLength to the longest value)
//	maxItems=N minItems=N     slices
//	minimum=X maximum=X       integers and numbers
//	optional                  not required
//
// It refuses (returns an error naming the field) a string without maxLength
// or enum, a slice without maxItems, maps, interfaces, channels, functions
// and recursive types.
func SchemaFor[T any]() (*Schema, error) {
	return schemaOf(reflect.TypeFor[T]())
}

var schemaCache sync.Map // reflect.Type -> schemaResult

type schemaResult struct {
	s   *Schema
	err error
}

func schemaOf(t reflect.Type) (*Schema, error) {
	if v, ok := schemaCache.Load(t); ok {
		r := v.(schemaResult)
		return r.s, r.err
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var s *Schema
	var err error
	if t.Kind() != reflect.Struct {
		err = fmt.Errorf("llm: schema of %v: the top level must be a struct", t)
	} else {
		g := generator{seen: map[reflect.Type]bool{}}
		s, err = g.of(t, t.Name(), fieldTags{})
	}
	schemaCache.Store(t, schemaResult{s, err})
	return s, err
}

type fieldTags struct {
	desc                 string
	maxLength, minLength *int
	maxItems, minItems   *int
	minimum, maximum     *float64
	enum                 []string
	optional             bool
}

func parseTags(path string, f reflect.StructField) (fieldTags, error) {
	ft := fieldTags{desc: f.Tag.Get("desc")}
	tag := f.Tag.Get("llm")
	if tag == "" {
		return ft, nil
	}
	for _, part := range strings.Split(tag, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		atoi := func() (*int, error) {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("llm: schema field %s: %s=%q is not a non-negative integer", path, k, v)
			}
			return &n, nil
		}
		atof := func() (*float64, error) {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("llm: schema field %s: %s=%q is not a number", path, k, v)
			}
			return &x, nil
		}
		var err error
		switch k {
		case "maxLength":
			ft.maxLength, err = atoi()
		case "minLength":
			ft.minLength, err = atoi()
		case "maxItems":
			ft.maxItems, err = atoi()
		case "minItems":
			ft.minItems, err = atoi()
		case "minimum":
			ft.minimum, err = atof()
		case "maximum":
			ft.maximum, err = atof()
		case "enum":
			ft.enum = strings.Split(v, "|")
		case "optional":
			ft.optional = true
		case "required":
			ft.optional = false
		default:
			err = fmt.Errorf("llm: schema field %s: unknown llm tag option %q", path, k)
		}
		if err != nil {
			return ft, err
		}
	}
	return ft, nil
}

type generator struct {
	seen map[reflect.Type]bool
}

func (g *generator) of(t reflect.Type, path string, ft fieldTags) (*Schema, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s := &Schema{Description: ft.desc}
	switch t.Kind() {
	case reflect.String:
		s.Type = "string"
		s.Enum = ft.enum
		s.MinLength, s.MaxLength = ft.minLength, ft.maxLength
		if len(ft.enum) > 0 && s.MaxLength == nil {
			longest := 0
			for _, e := range ft.enum {
				longest = max(longest, len([]rune(e)))
			}
			s.MaxLength = &longest
		}
		if s.MaxLength == nil {
			return nil, fmt.Errorf("llm: schema field %s: string without maxLength (add `llm:\"maxLength=N\"` or an enum)", path)
		}
		if s.MinLength != nil && *s.MinLength > *s.MaxLength {
			return nil, fmt.Errorf("llm: schema field %s: minLength %d > maxLength %d", path, *s.MinLength, *s.MaxLength)
		}
	case reflect.Bool:
		s.Type = "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s.Type = "integer"
		s.Minimum, s.Maximum = ft.minimum, ft.maximum
		lo, hi := intRange(t)
		if s.Minimum == nil && lo != nil {
			s.Minimum = lo
		}
		if s.Maximum == nil && hi != nil {
			s.Maximum = hi
		}
	case reflect.Float32, reflect.Float64:
		s.Type = "number"
		s.Minimum, s.Maximum = ft.minimum, ft.maximum
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil, fmt.Errorf("llm: schema field %s: byte slices are not supported", path)
		}
		s.Type = "array"
		s.MinItems, s.MaxItems = ft.minItems, ft.maxItems
		if s.MaxItems == nil {
			return nil, fmt.Errorf("llm: schema field %s: array without maxItems (add `llm:\"maxItems=N\"`)", path)
		}
		// String bounds and enum on a slice field apply to its elements.
		elemTags := fieldTags{maxLength: ft.maxLength, minLength: ft.minLength, enum: ft.enum,
			minimum: ft.minimum, maximum: ft.maximum}
		item, err := g.of(t.Elem(), path+"[]", elemTags)
		if err != nil {
			return nil, err
		}
		s.Items = item
	case reflect.Struct:
		if g.seen[t] {
			return nil, fmt.Errorf("llm: schema field %s: recursive type %v", path, t)
		}
		g.seen[t] = true
		defer delete(g.seen, t)
		s.Type = "object"
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" && opts == "" {
				continue
			}
			if f.Anonymous && name == "" {
				return nil, fmt.Errorf("llm: schema field %s.%s: embedded structs are not supported", path, f.Name)
			}
			if name == "" {
				name = f.Name
			}
			fpath := path + "." + name
			ftags, err := parseTags(fpath, f)
			if err != nil {
				return nil, err
			}
			if strings.Contains(","+opts+",", ",omitempty,") {
				ftags.optional = true
			}
			ps, err := g.of(f.Type, fpath, ftags)
			if err != nil {
				return nil, err
			}
			s.Properties = append(s.Properties, Property{Name: name, Schema: ps})
			if !ftags.optional {
				s.Required = append(s.Required, name)
			}
		}
	default:
		return nil, fmt.Errorf("llm: schema field %s: unsupported type %v", path, t)
	}
	return s, nil
}

// intRange is the range of the small integer kinds (nil when a float64
// cannot say it exactly or it needs no saying).
func intRange(t reflect.Type) (lo, hi *float64) {
	f := func(x float64) *float64 { return &x }
	switch t.Kind() {
	case reflect.Int8:
		return f(math.MinInt8), f(math.MaxInt8)
	case reflect.Int16:
		return f(math.MinInt16), f(math.MaxInt16)
	case reflect.Int32:
		return f(math.MinInt32), f(math.MaxInt32)
	case reflect.Uint8:
		return f(0), f(math.MaxUint8)
	case reflect.Uint16:
		return f(0), f(math.MaxUint16)
	case reflect.Uint32:
		return f(0), f(math.MaxUint32)
	case reflect.Uint, reflect.Uint64:
		return f(0), nil
	}
	return nil, nil
}

// CheckBounded returns an error naming the first string without maxLength or
// array without maxItems. Schemas from [SchemaFor] always pass.
func (s *Schema) CheckBounded() error { return s.checkBounded("$") }

func (s *Schema) checkBounded(path string) error {
	switch s.Type {
	case "string":
		if s.MaxLength == nil {
			return fmt.Errorf("llm: schema %s: string without maxLength", path)
		}
	case "array":
		if s.MaxItems == nil {
			return fmt.Errorf("llm: schema %s: array without maxItems", path)
		}
		if s.Items == nil {
			return fmt.Errorf("llm: schema %s: array without items", path)
		}
		return s.Items.checkBounded(path + "[]")
	case "object":
		for _, p := range s.Properties {
			if err := p.Schema.checkBounded(path + "." + p.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// MaxChars is an upper bound on the characters of a compact JSON instance of
// the schema whose strings need no escaping, plus room for the whitespace a
// model puts between tokens (room for pretty-printing a few levels deep).
func (s *Schema) MaxChars() int {
	switch s.Type {
	case "string":
		n := 64
		if s.MaxLength != nil {
			n = *s.MaxLength
		}
		return n + 2
	case "integer", "number":
		return 24
	case "boolean":
		return 5
	case "array":
		n := 8
		if s.MaxItems != nil {
			n = *s.MaxItems
		}
		item := 8
		if s.Items != nil {
			item = s.Items.MaxChars()
		}
		return 8 + n*(item+12)
	case "object":
		n := 8
		for _, p := range s.Properties {
			n += len(p.Name) + 4 + 16 + p.Schema.MaxChars()
		}
		return n
	}
	return 32
}

// PredictTokens is the num_predict sent with this schema as Format: enough
// tokens for the largest valid reply (MaxChars at 2 characters per token,
// plus slack), so a valid reply is never cut off by the limit.
func (s *Schema) PredictTokens() int {
	return s.MaxChars()/2 + 64
}
