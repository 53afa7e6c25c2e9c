package contract

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/engram-memory/engram/pkg/events"
)

// Schema is one JSON Schema (the subset the contract uses), written out as
// YAML for the AsyncAPI document and as TypeScript for the client.
type Schema struct {
	Ref         string // a component's name: the schema is {$ref: #/components/schemas/<Ref>}
	Type        string // object, string, integer, number, boolean, array
	Description string
	Const       string
	Enum        []string
	// OpenEnum are known values of a field whose readers must tolerate
	// others (x-engram-known-values; no enum keyword).
	OpenEnum   []string
	Format     string
	MinLength  int
	MaxLength  int
	MaxBytes   int // x-engram-max-bytes: UTF-8 bytes (MaxLength counts characters)
	Pattern    string
	Minimum    *int64
	Maximum    *int64
	MinItems   int
	Items      *Schema
	Properties []Prop
	Required   []string
	// Additional is the schema of a map's values (additionalProperties);
	// KeyMinLength bounds its keys (propertyNames).
	Additional   *Schema
	KeyMinLength int
	AllOf        []*Schema
	// If and Then: a conditional requirement (tool_status when role is tool).
	If, Then *Schema
	// Extensions are x-engram-* keywords the checks of this contract add
	// beyond JSON Schema (a clock window, a subject check), by name.
	Extensions []Ext
	// Go is the Go type it was made from (for TypeScript names), if any.
	Go reflect.Type
}

// Prop is one property of an object schema, in the Go struct's order.
type Prop struct {
	Name   string
	Schema *Schema
}

// Ext is one x-engram-* extension keyword.
type Ext struct {
	Name  string
	Value any
}

// spec says what JSON Schema cannot read off a Go field: its meaning, and
// the rules events.Decode applies to it.
type spec struct {
	doc      string
	required bool
	// id: an id (at most events.MaxIDLen bytes of UTF-8, no control
	// character).
	id bool
	// maxBytes: a string of at most this many bytes (no control-character
	// rule).
	maxBytes int
	enum     []string
	// open: enum lists the known values, readers tolerate others.
	open bool
	// nonNegative: an integer >= 0.
	nonNegative bool
	// bounded: a time events.Decode bounds (after EarliestTime, at most
	// MaxClockAhead ahead of the reader's clock).
	bounded bool
	// subject: a NATS subject (no empty token, no wildcard token, no
	// whitespace).
	subject bool
	// minItems: at least this many elements.
	minItems int
	// nonEmptyItems: the elements (strings) or map keys must not be empty.
	nonEmptyItems bool
	// version: the schema version (1 .. events.SchemaVersion).
	version bool
	// requiredIf names a sibling field and the value that makes this one
	// required.
	requiredIf [2]string
	// sameLengthAs names a sibling array this one, when not empty, must be
	// as long as.
	sameLengthAs string
}

// noControl matches a string without Unicode control characters (Cc:
// U+0000-U+001F, U+007F-U+009F), which events.Decode refuses in ids. It is
// an ECMA-262 regular expression with \u escapes (JSON Schema's dialect).
const noControl = `^[^\u0000-\u001F\u007F-\u009F]*$`

// subjectPattern matches a NATS subject as events.Decode accepts one: dot
// separated tokens, none empty, none the wildcard * or > alone, without
// whitespace or NUL.
const subjectPattern = `^(?:[^. \t\r\n\f\v\u0000]{2,}|[^. \t\r\n\f\v\u0000*>])(?:\.(?:[^. \t\r\n\f\v\u0000]{2,}|[^. \t\r\n\f\v\u0000*>]))*$`

var timeType = reflect.TypeFor[time.Time]()

// components are the Go types that become named schemas, in the order the
// document lists them.
var components = []reflect.Type{
	reflect.TypeFor[events.TurnStarted](),
	reflect.TypeFor[events.TurnEnded](),
	reflect.TypeFor[events.Message](),
	reflect.TypeFor[events.ToolCall](),
	reflect.TypeFor[events.SessionIdle](),
	reflect.TypeFor[events.TokensReported](),
	reflect.TypeFor[events.InjectionReady](),
	reflect.TypeFor[events.MemoryChanged](),
	reflect.TypeFor[events.Change](),
	reflect.TypeFor[events.ConsolidationDone](),
	reflect.TypeFor[events.CompactionDone](),
	reflect.TypeFor[events.ContextRequest](),
	reflect.TypeFor[events.ContextReply](),
	reflect.TypeFor[events.ContextMessage](),
}

// payloadTypes maps each event type to its payload's Go type.
var payloadTypes = func() map[events.Type]reflect.Type {
	m := map[events.Type]reflect.Type{}
	for _, p := range []events.Payload{events.TurnStarted{}, events.TurnEnded{}, events.SessionIdle{}, events.TokensReported{},
		events.InjectionReady{}, events.MemoryChanged{}, events.ConsolidationDone{}, events.CompactionDone{}} {
		m[p.EventType()] = reflect.TypeOf(p)
	}
	return m
}()

// allTypes are the event types, inputs first.
func allTypes() []events.Type { return append(slices.Clone(events.InputTypes), events.OutputTypes...) }

// jsonFields are the JSON fields of struct t, embedded structs flattened,
// in order: name, Go field, and whether omitempty/omitzero is set.
type jsonField struct {
	Name  string
	Field reflect.StructField
	Owner reflect.Type // the struct that declares it (an embedded one's own type)
}

func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{Name: name, Field: f, Owner: t})
	}
	return out
}

// specFor returns the spec of a field, or an error naming the field when
// it has none: a field added to a Go type must be described here before
// the contract can be generated.
func specFor(owner reflect.Type, name string) (spec, error) {
	s, ok := specs[owner][name]
	if !ok {
		return spec{}, fmt.Errorf("contract: %s.%s (json %q) has no spec in internal/contract/specs.go: describe it there", owner.Name(), fieldGoName(owner, name), name)
	}
	return s, nil
}

func fieldGoName(t reflect.Type, json string) string {
	for _, f := range jsonFields(t) {
		if f.Name == json {
			return f.Field.Name
		}
	}
	return "?"
}

// CheckSpecs reports every field of the contract's Go types without a spec
// and every spec of a field that does not exist.
func CheckSpecs() []error {
	var errs []error
	types := append([]reflect.Type{reflect.TypeFor[events.Envelope]()}, components...)
	seen := map[reflect.Type]map[string]bool{}
	for _, t := range types {
		for _, f := range jsonFields(t) {
			if seen[f.Owner] == nil {
				seen[f.Owner] = map[string]bool{}
			}
			seen[f.Owner][f.Name] = true
			if _, err := specFor(f.Owner, f.Name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for owner, fields := range specs {
		for name := range fields {
			if !seen[owner][name] {
				errs = append(errs, fmt.Errorf("contract: specs.go describes %s.%s, which %s does not have", owner.Name(), name, owner.Name()))
			}
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errs
}

// structSchema is the object schema of Go struct t: one property per JSON
// field with its spec's rules.
func structSchema(t reflect.Type, doc string) (*Schema, error) {
	s := &Schema{Type: "object", Description: doc, Go: t}
	var conds []*Schema
	for _, f := range jsonFields(t) {
		sp, err := specFor(f.Owner, f.Name)
		if err != nil {
			return nil, err
		}
		fs, err := fieldSchema(f.Field.Type, sp)
		if err != nil {
			return nil, fmt.Errorf("contract: %s.%s: %w", t.Name(), f.Name, err)
		}
		s.Properties = append(s.Properties, Prop{Name: f.Name, Schema: fs})
		if sp.required {
			s.Required = append(s.Required, f.Name)
		}
		if sp.requiredIf[0] != "" {
			conds = append(conds, &Schema{
				If:   &Schema{Type: "object", Properties: []Prop{{Name: sp.requiredIf[0], Schema: &Schema{Const: sp.requiredIf[1]}}}, Required: []string{sp.requiredIf[0]}},
				Then: &Schema{Required: []string{f.Name}},
			})
		}
	}
	switch len(conds) {
	case 0:
	case 1:
		s.If, s.Then = conds[0].If, conds[0].Then
	default:
		return nil, fmt.Errorf("contract: %s: more than one conditional requirement", t.Name())
	}
	return s, nil
}

// fieldSchema is the schema of one field of Go type t with spec sp.
func fieldSchema(t reflect.Type, sp spec) (*Schema, error) {
	var s *Schema
	switch {
	case t == timeType:
		s = &Schema{Type: "string", Format: "date-time"}
		if sp.bounded {
			s.Extensions = append(s.Extensions,
				Ext{"x-engram-earliest", events.EarliestTime.Format(time.RFC3339)},
				Ext{"x-engram-max-ahead-seconds", int64(events.MaxClockAhead / time.Second)})
		}
	case t.Kind() == reflect.String:
		s = &Schema{Type: "string"}
		switch {
		case sp.id:
			s.MaxLength, s.MaxBytes, s.Pattern = events.MaxIDLen, events.MaxIDLen, noControl
		case sp.maxBytes > 0:
			s.MaxLength, s.MaxBytes = sp.maxBytes, sp.maxBytes
		}
		if sp.required {
			s.MinLength = 1
		}
		if sp.subject {
			s.Pattern, s.MaxLength = subjectPattern, 4096
			s.Extensions = append(s.Extensions, Ext{"x-engram-subject", true})
		}
		switch {
		case sp.open:
			s.OpenEnum = sp.enum
		default:
			s.Enum = sp.enum
		}
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
		s = &Schema{Type: "integer"}
		if sp.nonNegative {
			s.Minimum = ptr(int64(0))
		}
		if sp.version {
			s.Minimum, s.Maximum = ptr(int64(1)), ptr(int64(events.SchemaVersion))
		}
	case t.Kind() == reflect.Float64:
		s = &Schema{Type: "number"}
	case t.Kind() == reflect.Bool:
		s = &Schema{Type: "boolean"}
	case t.Kind() == reflect.Slice:
		item, err := fieldSchema(t.Elem(), spec{})
		if err != nil {
			return nil, err
		}
		if sp.nonEmptyItems {
			item.MinLength = 1
		}
		if sp.id {
			item.MaxLength, item.MaxBytes, item.Pattern = events.MaxIDLen, events.MaxIDLen, noControl
		}
		s = &Schema{Type: "array", Items: item, MinItems: sp.minItems}
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		val, err := fieldSchema(t.Elem(), spec{})
		if err != nil {
			return nil, err
		}
		s = &Schema{Type: "object", Additional: val}
		if sp.nonEmptyItems {
			s.KeyMinLength = 1
		}
	case t.Kind() == reflect.Struct && slices.Contains(components, t):
		s = &Schema{Ref: t.Name()}
	case t.Kind() == reflect.Interface:
		s = &Schema{Type: "object"} // the payload: each message's schema says which
	default:
		return nil, fmt.Errorf("no schema for Go type %s", t)
	}
	if sp.sameLengthAs != "" {
		s.Extensions = append(s.Extensions, Ext{"x-engram-same-length-as", sp.sameLengthAs})
	}
	if sp.minItems > 0 && s.Type == "array" {
		s.MinItems = sp.minItems
	}
	if s.Ref != "" {
		// A $ref stands alone in draft 7: the doc goes to the referencing
		// property through allOf.
		if sp.doc == "" {
			return s, nil
		}
		return &Schema{Description: sp.doc, AllOf: []*Schema{s}}, nil
	}
	s.Description = sp.doc
	return s, nil
}

func ptr[T any](v T) *T { return &v }

// envelopeSchema is the envelope as every message shares it: the head
// fields, the payload an object (each message narrows type and payload).
func envelopeSchema() (*Schema, error) {
	return structSchema(reflect.TypeFor[events.Envelope](), envelopeDoc)
}

// eventSchema is the envelope of one event type: the envelope's schema
// with type fixed, the session and turn ids required where the type needs
// them, and the type's payload.
func eventSchema(t events.Type) *Schema {
	var req []string
	if t != events.TypeMemoryChanged {
		req = append(req, "session_id")
	}
	if t == events.TypeTurnStarted || t == events.TypeTurnEnded || t == events.TypeInjectionReady {
		req = append(req, "turn_id")
	}
	narrow := &Schema{Type: "object", Properties: []Prop{
		{Name: "type", Schema: &Schema{Const: string(t)}},
		{Name: "payload", Schema: &Schema{Ref: payloadTypes[t].Name()}},
	}, Required: req}
	return &Schema{Description: typeDocs[t], AllOf: []*Schema{{Ref: "Envelope"}, narrow}}
}

// EventSchemaName is the component name of an event type's envelope
// schema: turn_started -> TurnStartedEvent.
func EventSchemaName(t events.Type) string { return payloadTypes[t].Name() + "Event" }
