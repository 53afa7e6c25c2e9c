package contract

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/engram-memory/engram/pkg/events"
)

// Vectors are the test vectors every client of the contract runs:
// api/vectors.json.
type Vectors struct {
	Comment         string `json:"comment"`
	SchemaVersion   int    `json:"schema_version"`
	Prefix          string `json:"prefix"`
	MaxIDBytes      int    `json:"max_id_bytes"`
	MaxEventBytes   int    `json:"max_event_bytes"`
	Earliest        string `json:"earliest"`
	MaxAheadSeconds int64  `json:"max_ahead_seconds"`
	// IDPattern matches the ids the clients make (events.NewID).
	IDPattern string `json:"id_pattern"`
	// Tokens: each id and its subject token (events.EncodeToken), which
	// decodes back to the id (events.DecodeToken).
	Tokens []TokenVector `json:"tokens"`
	// BadTokens must not decode.
	BadTokens []BadToken `json:"bad_tokens"`
	// Subjects of tricky ids.
	Subjects []SubjectVector `json:"subjects"`
	// Inboxes: the reply-inbox prefix of each tenant (events.TenantInbox).
	Inboxes []InboxVector `json:"inboxes"`
	// Decode: bodies that decode; event is Go's re-encoding of the result
	// (unknown fields dropped, empty optional fields left out).
	Decode []DecodeVector `json:"decode"`
	// Refuse: bodies events.Decode refuses, with its errors.
	Refuse []RefuseVector `json:"refuse"`
}

// TokenVector is an id and its subject token.
type TokenVector struct {
	ID    string `json:"id"`
	Token string `json:"token"`
}

// BadToken is a token DecodeToken refuses.
type BadToken struct {
	Token string `json:"token"`
	Error string `json:"error"` // Go's error, for reference
}

// SubjectVector is the subject of an event or request.
type SubjectVector struct {
	Kind    string `json:"kind"` // in, out, context, dlq
	Type    string `json:"type,omitempty"`
	Tenant  string `json:"tenant"`
	Project string `json:"project,omitempty"`
	Session string `json:"session,omitempty"`
	Subject string `json:"subject"`
}

// InboxVector is a tenant's reply-inbox prefix.
type InboxVector struct {
	Tenant string `json:"tenant"`
	Inbox  string `json:"inbox"`
}

// DecodeVector is a body that decodes.
type DecodeVector struct {
	Name       string          `json:"name"`
	Body       string          `json:"body,omitempty"`
	BodyBase64 string          `json:"body_base64,omitempty"`
	Event      json.RawMessage `json:"event"`
	// SchemaRefuses: the document's JSON Schema refuses it although the
	// decoder takes it (a reader's leniency a producer should not count
	// on: null for an absent field).
	SchemaRefuses bool `json:"schema_refuses,omitempty"`
}

// RefuseVector is a body events.Decode refuses.
type RefuseVector struct {
	Name       string `json:"name"`
	Body       string `json:"body,omitempty"`
	BodyBase64 string `json:"body_base64,omitempty"`
	// Stage says which check refuses it: text (UTF-8, surrogate escapes),
	// json (not a JSON object), keys (a key twice, a key spelled otherwise
	// than its field), fields (a field missing, mistyped or out of its
	// limits: what a client's validation before sending checks too).
	Stage  string      `json:"stage"`
	Errors []ErrorWant `json:"errors"`
	// SchemaRefuses: the JSON Schema of the AsyncAPI document (standard
	// keywords, formats asserted) refuses it too. The document cannot
	// express every rule (bytes, the clock window, duplicate keys), so
	// some bodies only the decoder refuses.
	SchemaRefuses bool `json:"schema_refuses"`
}

// ErrorWant is one error of a refusal: the field (a JSON path, "" for
// the whole body) and the reason. Match "exact": a client gives the same
// reason; otherwise the reason holds a Go library's words after Match, and
// a client's reason starts with Match.
type ErrorWant struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
	Match  string `json:"match"`
}

const vectorsComment = "Engram's contract test vectors, generated from pkg/events by internal/contract (engram contract): do not edit. " +
	"Every client runs them: tokens encode and decode as given, bad_tokens do not decode, subjects are built as given, " +
	"decode bodies decode (to event), refuse bodies are refused with errors (field and reason; match exact, or a prefix where Go's JSON library words the reason)."

// BuildVectors generates the vectors, checking each against events.Decode:
// a mutation the schema says is invalid must be refused at its field, one it
// says is valid must decode. An error is a disagreement between the schema
// (specs.go) and the decoder.
func BuildVectors() (*Vectors, error) {
	v := &Vectors{
		Comment:         vectorsComment,
		SchemaVersion:   events.SchemaVersion,
		Prefix:          events.DefaultPrefix,
		MaxIDBytes:      events.MaxIDLen,
		MaxEventBytes:   events.DefaultMaxEventBytes,
		Earliest:        events.EarliestTime.Format(time.RFC3339),
		MaxAheadSeconds: int64(events.MaxClockAhead / time.Second),
		IDPattern:       "^[0-9A-HJKMNP-TV-Z]{26}$",
	}
	for _, id := range trickyIDs {
		tok := events.EncodeToken(id)
		back, err := events.DecodeToken(tok)
		if err != nil || back != id {
			return nil, fmt.Errorf("contract: token %q of %q does not decode back: %q %v", tok, id, back, err)
		}
		v.Tokens = append(v.Tokens, TokenVector{ID: id, Token: tok})
	}
	for _, tok := range badTokens {
		_, err := events.DecodeToken(tok)
		if err == nil {
			return nil, fmt.Errorf("contract: bad token %q decodes", tok)
		}
		v.BadTokens = append(v.BadTokens, BadToken{Token: tok, Error: err.Error()})
	}
	s := events.Subjects{}
	for _, r := range subjectRefs {
		for _, t := range events.InputTypes {
			v.Subjects = append(v.Subjects, SubjectVector{Kind: "in", Type: string(t), Tenant: r[0], Project: r[1], Session: r[2], Subject: s.In(t, r[0], r[1], r[2])})
		}
		v.Subjects = append(v.Subjects,
			SubjectVector{Kind: "out", Type: string(events.TypeInjectionReady), Tenant: r[0], Project: r[1], Session: r[2], Subject: s.Out(events.TypeInjectionReady, r[0], r[1], r[2])},
			SubjectVector{Kind: "out", Type: string(events.TypeMemoryChanged), Tenant: r[0], Project: r[1], Subject: s.Out(events.TypeMemoryChanged, r[0], r[1], "")},
			SubjectVector{Kind: "context", Tenant: r[0], Project: r[1], Session: r[2], Subject: s.ContextAPI(r[0], r[1], r[2])},
		)
	}
	v.Subjects = append(v.Subjects, SubjectVector{Kind: "dlq", Tenant: "", Project: events.ConsumerInjector, Subject: s.DLQ(events.ConsumerInjector)})
	for _, t := range []string{"", "acme", "acme corp", "a.b", "ü"} {
		v.Inboxes = append(v.Inboxes, InboxVector{Tenant: t, Inbox: events.TenantInbox(t)})
	}

	exs, err := exampleEvents()
	if err != nil {
		return nil, err
	}
	g := &gen{v: v}
	for _, t := range allTypes() {
		body, err := json.Marshal(exs[t])
		if err != nil {
			return nil, err
		}
		if err := g.decodes(string(t), body); err != nil {
			return nil, err
		}
	}
	for _, t := range allTypes() {
		body, _ := json.Marshal(exs[t])
		var doc map[string]any
		if err := json.Unmarshal(body, &doc); err != nil {
			return nil, err
		}
		env, err := resolveEvent(t)
		if err != nil {
			return nil, err
		}
		if err := g.mutate(string(t), doc, doc, env, ""); err != nil {
			return nil, err
		}
	}
	for _, h := range handDecode {
		if err := g.decodes(h.name, []byte(h.body)); err != nil {
			return nil, err
		}
		if h.schema {
			g.v.Decode[len(g.v.Decode)-1].SchemaRefuses = true
		}
	}
	for _, h := range handRefuse {
		if err := g.refuses(h.name, []byte(h.body), h.field, h.schema); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// gen collects vectors, checking each with events.Decode.
type gen struct {
	v    *Vectors
	seen map[string]bool
}

func setBody(body []byte, text *string, b64 *string) {
	if utf8.Valid(body) {
		*text = string(body)
	} else {
		*b64 = base64.StdEncoding.EncodeToString(body)
	}
}

// decodes adds a vector that must decode.
func (g *gen) decodes(name string, body []byte) error {
	if g.dup(body) {
		return nil
	}
	e, err := events.Decode(body)
	if err != nil {
		return fmt.Errorf("contract: vector %q: the decoder refuses what the schema allows: %w\nbody: %s", name, err, body)
	}
	out, err := json.Marshal(e)
	if err != nil {
		return err
	}
	d := DecodeVector{Name: name, Event: out}
	setBody(body, &d.Body, &d.BodyBase64)
	g.v.Decode = append(g.v.Decode, d)
	return nil
}

func (g *gen) dup(body []byte) bool {
	if g.seen == nil {
		g.seen = map[string]bool{}
	}
	if g.seen[string(body)] {
		return true
	}
	g.seen[string(body)] = true
	return false
}

// refuses adds a vector that must be refused with an error at field (""
// for a body-level error; "*" for any).
func (g *gen) refuses(name string, body []byte, field string, schemaRefuses bool) error {
	if g.dup(body) {
		return nil
	}
	_, err := events.Decode(body)
	if err == nil {
		return fmt.Errorf("contract: vector %q: the decoder accepts what the schema refuses\nbody: %s", name, body)
	}
	if !errors.Is(err, events.ErrInvalidEvent) {
		return fmt.Errorf("contract: vector %q: the decoder's error does not wrap ErrInvalidEvent: %v", name, err)
	}
	want := flatten(err)
	if field != "*" && !slices.ContainsFunc(want, func(w ErrorWant) bool { return w.Field == field }) {
		return fmt.Errorf("contract: vector %q: the decoder refuses, but not at %q: %v\nbody: %s", name, field, err, body)
	}
	r := RefuseVector{Name: name, Stage: stageOf(want), Errors: want, SchemaRefuses: schemaRefuses}
	setBody(body, &r.Body, &r.BodyBase64)
	g.v.Refuse = append(g.v.Refuse, r)
	return nil
}

// flatten lists the errors of a Decode error: each field error, or the
// body-level error.
func flatten(err error) []ErrorWant {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		// errors.Join of field errors (a %w: ... %w wrap is one error).
		all := j.Unwrap()
		if !slices.ContainsFunc(all, func(e error) bool { _, ok := e.(*events.FieldError); return !ok }) {
			errs = all
		}
	}
	var out []ErrorWant
	for _, e := range errs {
		var fe *events.FieldError
		w := ErrorWant{}
		if errors.As(e, &fe) {
			w.Field, w.Reason = fe.Field, fe.Reason
		} else {
			w.Reason = strings.TrimPrefix(e.Error(), events.ErrInvalidEvent.Error()+": ")
		}
		w.Match = "exact"
		// Reasons in the words of Go's JSON or time package: a client
		// matches the part before them.
		for _, lib := range []string{"json: ", "parsing time ", "invalid character ", "unexpected end of JSON"} {
			if i := strings.Index(w.Reason, lib); i >= 0 {
				w.Match = strings.TrimRight(w.Reason[:i], ": ")
				break
			}
		}
		out = append(out, w)
	}
	return out
}

func stageOf(errs []ErrorWant) string {
	if len(errs) == 1 {
		r := errs[0].Reason
		switch {
		case strings.HasPrefix(r, "not valid UTF-8"), strings.HasPrefix(r, "lone UTF-16"):
			return "text"
		case strings.HasPrefix(r, "malformed JSON"):
			return "json"
		case strings.HasPrefix(r, "duplicate key"), strings.HasPrefix(r, "spelled otherwise"):
			return "keys"
		}
	}
	return "fields"
}

// object is a resolved object schema: its properties by name (in order),
// what it requires, its conditional requirement.
type object struct {
	props    []Prop
	required []string
	cond     *Schema // If/Then holder
}

func (o *object) prop(name string) *Schema {
	for _, p := range o.props {
		if p.Name == name {
			return p.Schema
		}
	}
	return nil
}

// componentSchema builds the schema of a component by name.
func componentSchema(name string) (*Schema, error) {
	if name == "Envelope" {
		return envelopeSchema()
	}
	for _, t := range components {
		if t.Name() == name {
			return structSchema(t, "")
		}
	}
	return nil, fmt.Errorf("contract: no component %s", name)
}

// resolve turns a schema into an object view (following $ref and allOf),
// or nil for a non-object.
func resolve(s *Schema) (*object, error) {
	if s.Ref != "" {
		c, err := componentSchema(s.Ref)
		if err != nil {
			return nil, err
		}
		return resolve(c)
	}
	if len(s.AllOf) > 0 {
		o := &object{}
		for _, a := range s.AllOf {
			sub, err := resolve(a)
			if err != nil {
				return nil, err
			}
			if sub == nil {
				continue
			}
			for _, p := range sub.props {
				replaced := false
				for i := range o.props {
					if o.props[i].Name == p.Name {
						// A narrowing: a const or a payload's reference
						// replaces the envelope's general schema.
						o.props[i].Schema = p.Schema
						replaced = true
					}
				}
				if !replaced {
					o.props = append(o.props, p)
				}
			}
			o.required = append(o.required, sub.required...)
			if sub.cond != nil {
				o.cond = sub.cond
			}
		}
		if len(o.props) == 0 {
			return nil, nil
		}
		return o, nil
	}
	if s.Type != "object" || len(s.Properties) == 0 {
		return nil, nil
	}
	o := &object{props: s.Properties, required: s.Required}
	if s.If != nil {
		o.cond = s
	}
	return o, nil
}

// resolveEvent is the object view of an event type's envelope.
func resolveEvent(t events.Type) (*object, error) { return resolve(eventSchema(t)) }

// deref follows a property's $ref (and a documented allOf of one $ref).
func deref(s *Schema) (*Schema, error) {
	if len(s.AllOf) == 1 && s.AllOf[0].Ref != "" {
		s = s.AllOf[0]
	}
	if s.Ref != "" {
		return componentSchema(s.Ref)
	}
	return s, nil
}

// mutate adds, for each property of obj (a JSON object inside doc at
// path, of schema o), the vectors of its rules: removed (refused when
// required, decoded otherwise), an empty, too long, control-character,
// negative, out-of-window, mistyped or unknown value (refused), and
// recurses into nested objects and arrays.
func (g *gen) mutate(name string, doc, obj map[string]any, o *object, path string) error {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	inPayload := strings.HasPrefix(path, "payload.")
	// A mistyped value inside the payload is reported at "payload" (the
	// payload is decoded as a whole); at the head, at the field.
	typeField := func(f string) string {
		if inPayload {
			return "payload"
		}
		return f
	}
	for _, k := range keys {
		ps := o.prop(k)
		if ps == nil {
			continue
		}
		ps, err := deref(ps)
		if err != nil {
			return err
		}
		field := path + k
		label := name + ": " + field
		orig := obj[k]
		try := func(what string, val any, refused bool, at string, schema bool) error {
			obj[k] = val
			body, err := json.Marshal(doc)
			obj[k] = orig
			if err != nil {
				return err
			}
			if refused {
				return g.refuses(label+" "+what, body, at, schema)
			}
			return g.decodes(label+" "+what, body)
		}
		// Removed.
		delete(obj, k)
		body, err := json.Marshal(doc)
		obj[k] = orig
		if err != nil {
			return err
		}
		required := slices.Contains(o.required, k) || o.condRequires(k, obj)
		if dep := o.sameLengthDependent(k, obj); dep != "" {
			// A sibling must be as long as this one (scores and node_ids):
			// only the decoder knows.
			if err := g.refuses(label+" removed", body, path+dep, false); err != nil {
				return err
			}
		} else if required {
			if err := g.refuses(label+" removed", body, field, true); err != nil {
				return err
			}
		} else if err := g.decodes(label+" removed", body); err != nil {
			return err
		}
		switch ps.Type {
		case "string":
			if ps.Format == "date-time" {
				if err := try("malformed time", "yesterday", true, typeField(field), true); err != nil {
					return err
				}
				if ps.hasExt("x-engram-earliest") {
					if err := try("before 2000", "1999-12-31T23:59:59Z", true, field, false); err != nil {
						return err
					}
					if err := try("far ahead", "2999-01-01T00:00:00Z", true, field, false); err != nil {
						return err
					}
				}
				if err := try("with an offset", "2024-05-01T14:00:00.5+02:00", false, "", false); err != nil {
					return err
				}
				break
			}
			if err := try("a number", 42, true, typeField(field), true); err != nil {
				return err
			}
			if ps.MinLength > 0 {
				if err := try("empty", "", true, field, true); err != nil {
					return err
				}
			}
			if len(ps.Enum) > 0 && ps.Const == "" {
				if err := try("unknown value", "bogus_value", true, field, true); err != nil {
					return err
				}
			}
			if len(ps.OpenEnum) > 0 {
				if err := try("unknown value", "bogus_value", false, "", false); err != nil {
					return err
				}
			}
			if ps.MaxBytes > 0 {
				if err := try("too long", strings.Repeat("x", ps.MaxBytes+1), true, field, true); err != nil {
					return err
				}
				if err := try("at the limit", strings.Repeat("x", ps.MaxBytes), false, "", false); err != nil {
					return err
				}
				// Within maxLength (characters), over the bytes.
				if err := try("too many bytes", strings.Repeat("é", ps.MaxBytes/2+1), true, field, false); err != nil {
					return err
				}
			}
			if ps.Pattern == noControl {
				for _, c := range []string{"\x00", "\n", "\x7f", "\u0085"} {
					if err := try(fmt.Sprintf("with %U", []rune(c)[0]), "a"+c+"b", true, field, true); err != nil {
						return err
					}
				}
				if err := try("with unicode", "café ☕ 日本", false, "", false); err != nil {
					return err
				}
			}
			if ps.Pattern == subjectPattern {
				for _, bad := range []string{"a..b", "_INBOX.*", "a b", ">"} {
					if err := try(fmt.Sprintf("%q", bad), bad, true, field, true); err != nil {
						return err
					}
				}
			}
		case "integer":
			if err := try("a string", "1", true, typeField(field), true); err != nil {
				return err
			}
			if err := try("a fraction", 1.5, true, typeField(field), true); err != nil {
				return err
			}
			if ps.Minimum != nil && *ps.Minimum == 0 {
				if err := try("negative", -1, true, field, true); err != nil {
					return err
				}
			}
			if ps.Maximum != nil {
				if err := try("too new", *ps.Maximum+1, true, field, true); err != nil {
					return err
				}
				if err := try("zero", 0, true, field, true); err != nil {
					return err
				}
			}
		case "number":
			if err := try("a string", "0.5", true, typeField(field), true); err != nil {
				return err
			}
		case "boolean":
			if err := try("a string", "true", true, typeField(field), true); err != nil {
				return err
			}
		case "array":
			if err := try("an object", map[string]any{}, true, typeField(field), true); err != nil {
				return err
			}
			if ps.MinItems > 0 {
				if err := try("empty", []any{}, true, field, true); err != nil {
					return err
				}
			}
			if ps.Items.MinLength > 0 {
				if err := try("with an empty element", []any{""}, true, field+"[0]", true); err != nil {
					return err
				}
			}
			if ps.Items.MaxBytes > 0 {
				if err := try("with a too long element", []any{strings.Repeat("x", ps.Items.MaxBytes+1)}, true, "*", true); err != nil {
					return err
				}
			}
			arr, _ := orig.([]any)
			item, err := deref(ps.Items)
			if err != nil {
				return err
			}
			if io, err := resolve(item); err != nil {
				return err
			} else if io != nil {
				for i, el := range arr {
					m, ok := el.(map[string]any)
					if !ok {
						continue
					}
					if err := g.mutate(name, doc, m, io, fmt.Sprintf("%s[%d].", field, i)); err != nil {
						return err
					}
				}
			}
		case "object":
			if err := try("an array", []any{}, true, typeField(field), true); err != nil {
				return err
			}
			if k == "payload" {
				if err := try("a string", "x", true, "payload", true); err != nil {
					return err
				}
			}
			if ps.KeyMinLength > 0 {
				if err := try("with an empty key", map[string]any{"": "x"}, true, field, true); err != nil {
					return err
				}
			}
			if io, err := resolve(ps); err != nil {
				return err
			} else if io != nil {
				m, _ := orig.(map[string]any)
				if err := g.mutate(name, doc, m, io, field+"."); err != nil {
					return err
				}
			}
		}
		if ps.Const != "" {
			if err := try("another type", "bogus_type", true, field, true); err != nil {
				return err
			}
		}
		if other := ps.extString("x-engram-same-length-as"); other != "" {
			if arr, ok := orig.([]any); ok && len(arr) > 0 {
				if err := try("longer than "+other, append(slices.Clone(arr), arr[0]), true, field, false); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// condRequires reports whether the object's conditional requirement (if
// role is tool then tool_status) requires k given its values.
func (o *object) condRequires(k string, obj map[string]any) bool {
	if o.cond == nil || !slices.Contains(o.cond.Then.Required, k) {
		return false
	}
	for _, p := range o.cond.If.Properties {
		if obj[p.Name] != p.Schema.Const {
			return false
		}
	}
	return true
}

// sameLengthDependent names the sibling of k that must be as long as k
// and is not empty in obj, or "".
func (o *object) sameLengthDependent(k string, obj map[string]any) string {
	for _, p := range o.props {
		if p.Schema.extString("x-engram-same-length-as") != k {
			continue
		}
		if arr, ok := obj[p.Name].([]any); ok && len(arr) > 0 {
			return p.Name
		}
	}
	return ""
}

func (s *Schema) extString(name string) string {
	for _, e := range s.Extensions {
		if e.Name == name {
			v, _ := e.Value.(string)
			return v
		}
	}
	return ""
}

func (s *Schema) hasExt(name string) bool {
	return slices.ContainsFunc(s.Extensions, func(e Ext) bool { return e.Name == name })
}

// VectorsJSON is the vectors as api/vectors.json holds them: one vector a
// line.
func VectorsJSON() ([]byte, error) {
	v, err := BuildVectors()
	if err != nil {
		return nil, err
	}
	compact := func(x any) ([]byte, error) {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(x); err != nil {
			return nil, err
		}
		return bytes.TrimRight(b.Bytes(), "\n"), nil
	}
	var out bytes.Buffer
	out.WriteString("{\n")
	rv := reflect.ValueOf(*v)
	for i := range rv.NumField() {
		name, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("json"), ",")
		fmt.Fprintf(&out, "  %q: ", name)
		f := rv.Field(i)
		if f.Kind() == reflect.Slice {
			out.WriteString("[\n")
			for j := range f.Len() {
				b, err := compact(f.Index(j).Interface())
				if err != nil {
					return nil, err
				}
				out.WriteString("    ")
				out.Write(b)
				if j < f.Len()-1 {
					out.WriteByte(',')
				}
				out.WriteByte('\n')
			}
			out.WriteString("  ]")
		} else {
			b, err := compact(f.Interface())
			if err != nil {
				return nil, err
			}
			out.Write(b)
		}
		if i < rv.NumField()-1 {
			out.WriteByte(',')
		}
		out.WriteByte('\n')
	}
	out.WriteString("}\n")
	var check Vectors
	if err := json.Unmarshal(out.Bytes(), &check); err != nil {
		return nil, fmt.Errorf("contract: vectors: %w", err)
	}
	return out.Bytes(), nil
}
