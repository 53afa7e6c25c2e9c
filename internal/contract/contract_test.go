package contract

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/engram-memory/engram/pkg/events"
)

const root = "../.."

// TestGeneratedFilesAreCurrent: the committed contract files are what the
// Go types give now.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	stale, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) > 0 {
		t.Fatalf("out of date: %s\nrun: go generate ./internal/contract (or engram contract)", strings.Join(stale, ", "))
	}
}

// TestEveryFieldHasASpec: every JSON field of the contract's Go types is
// described in specs.go, and nothing else is.
func TestEveryFieldHasASpec(t *testing.T) {
	for _, err := range CheckSpecs() {
		t.Error(err)
	}
}

// TestANewFieldWithoutASpecFails: a field the specs do not describe stops
// the generator, naming it.
func TestANewFieldWithoutASpecFails(t *testing.T) {
	typ := reflect.TypeFor[events.TurnStarted]()
	saved := specs[typ]["paths"]
	delete(specs[typ], "paths")
	defer func() { specs[typ]["paths"] = saved }()
	errs := CheckSpecs()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "TurnStarted.Paths") {
		t.Fatalf("CheckSpecs without the spec of TurnStarted.paths = %v", errs)
	}
	if _, err := Files(); err == nil || !strings.Contains(err.Error(), "TurnStarted.Paths") {
		t.Fatalf("Files without the spec of TurnStarted.paths: err = %v", err)
	}
	type extra struct {
		New int `json:"new_field"`
	}
	if _, err := structSchema(reflect.TypeFor[extra](), ""); err == nil || !strings.Contains(err.Error(), "new_field") {
		t.Fatalf("a struct with an undescribed field: err = %v", err)
	}
}

// TestDocumentMatchesGoTypes reads api/asyncapi.yaml as a platform would
// and compares each schema of a Go type with the type itself, by
// reflection: the same properties, and the required ones the decoder
// requires (an empty value is refused as missing).
func TestDocumentMatchesGoTypes(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, AsyncAPIFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		AsyncAPI   string `yaml:"asyncapi"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `yaml:"properties"`
				Required   []string       `yaml:"required"`
			} `yaml:"schemas"`
			Messages map[string]any `yaml:"messages"`
		} `yaml:"components"`
		Channels map[string]struct {
			Address any `yaml:"address"`
		} `yaml:"channels"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.AsyncAPI, "3.") {
		t.Errorf("asyncapi %q, want 3.x", doc.AsyncAPI)
	}
	for _, typ := range append([]reflect.Type{reflect.TypeFor[events.Envelope]()}, components...) {
		s, ok := doc.Components.Schemas[typ.Name()]
		if !ok {
			t.Errorf("no schema %s", typ.Name())
			continue
		}
		var fields []string
		for _, f := range jsonFields(typ) {
			fields = append(fields, f.Name)
		}
		var props []string
		for p := range s.Properties {
			props = append(props, p)
		}
		slices.Sort(fields)
		slices.Sort(props)
		if !slices.Equal(fields, props) {
			t.Errorf("%s: the document's properties %v, the Go type's JSON fields %v", typ.Name(), props, fields)
		}
	}
	for _, et := range allTypes() {
		if _, ok := doc.Components.Schemas[EventSchemaName(et)]; !ok {
			t.Errorf("no schema %s", EventSchemaName(et))
		}
		if _, ok := doc.Components.Messages[camel(string(et))]; !ok {
			t.Errorf("no message %s", camel(string(et)))
		}
		ch, ok := doc.Channels[camel(string(et))]
		if !ok {
			t.Errorf("no channel %s", camel(string(et)))
			continue
		}
		dir := "in"
		if et.IsOutput() {
			dir = "out"
		}
		if want := "engram." + dir + "." + string(et) + ".{tenant}.{project}.{session}"; ch.Address != want {
			t.Errorf("channel %s: address %v, want %s", camel(string(et)), ch.Address, want)
		}
	}
	// What the decoder requires, found by the decoder: an example with the
	// field emptied is refused as missing exactly for the required ones.
	exs, err := exampleEvents()
	if err != nil {
		t.Fatal(err)
	}
	for _, et := range allTypes() {
		ptype := payloadTypes[et]
		req := doc.Components.Schemas[ptype.Name()].Required
		body, _ := json.Marshal(exs[et])
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		payload := m["payload"].(map[string]any)
		for _, f := range jsonFields(ptype) {
			orig, present := payload[f.Name]
			if !present {
				continue
			}
			delete(payload, f.Name)
			b, _ := json.Marshal(m)
			payload[f.Name] = orig
			_, err := events.Decode(b)
			missing := err != nil && strings.Contains(err.Error(), "payload."+f.Name+": missing")
			if missing != slices.Contains(req, f.Name) {
				t.Errorf("%s.%s: the document requires it: %v; the decoder without it: %v", ptype.Name(), f.Name, slices.Contains(req, f.Name), err)
			}
		}
	}
}

// TestVectorsAgreeWithTheDecoder runs the committed api/vectors.json
// through the Go implementation, as every other client does.
func TestVectorsAgreeWithTheDecoder(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, VectorsFile))
	if err != nil {
		t.Fatal(err)
	}
	var v Vectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Decode) < 50 || len(v.Refuse) < 200 || len(v.Tokens) < 10 || len(v.Subjects) < 10 {
		t.Fatalf("too few vectors: %d decode, %d refuse, %d tokens, %d subjects", len(v.Decode), len(v.Refuse), len(v.Tokens), len(v.Subjects))
	}
	body := func(text, b64 string) []byte {
		if b64 != "" {
			b, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		return []byte(text)
	}
	for _, d := range v.Decode {
		e, err := events.Decode(body(d.Body, d.BodyBase64))
		if err != nil {
			t.Errorf("%s: %v", d.Name, err)
			continue
		}
		got, _ := json.Marshal(e)
		if string(got) != string(d.Event) {
			t.Errorf("%s: decoded to %s, want %s", d.Name, got, d.Event)
		}
	}
	for _, r := range v.Refuse {
		_, err := events.Decode(body(r.Body, r.BodyBase64))
		if err == nil {
			t.Errorf("%s: decoded", r.Name)
			continue
		}
		if got := flatten(err); !reflect.DeepEqual(got, r.Errors) {
			t.Errorf("%s: errors %+v, want %+v", r.Name, got, r.Errors)
		}
	}
	for _, tv := range v.Tokens {
		if got := events.EncodeToken(tv.ID); got != tv.Token {
			t.Errorf("EncodeToken(%q) = %q, want %q", tv.ID, got, tv.Token)
		}
		if got, err := events.DecodeToken(tv.Token); err != nil || got != tv.ID {
			t.Errorf("DecodeToken(%q) = %q, %v", tv.Token, got, err)
		}
	}
	for _, bt := range v.BadTokens {
		if _, err := events.DecodeToken(bt.Token); err == nil {
			t.Errorf("DecodeToken(%q) succeeded", bt.Token)
		}
	}
	s := events.Subjects{Prefix: v.Prefix}
	for _, sv := range v.Subjects {
		var got string
		switch sv.Kind {
		case "in":
			got = s.In(events.Type(sv.Type), sv.Tenant, sv.Project, sv.Session)
		case "out":
			got = s.Out(events.Type(sv.Type), sv.Tenant, sv.Project, sv.Session)
		case "context":
			got = s.ContextAPI(sv.Tenant, sv.Project, sv.Session)
		case "dlq":
			got = s.DLQ(sv.Project)
		}
		if got != sv.Subject {
			t.Errorf("%+v: subject %q", sv, got)
		}
	}
	for _, in := range v.Inboxes {
		if got := events.TenantInbox(in.Tenant); got != in.Inbox {
			t.Errorf("TenantInbox(%q) = %q, want %q", in.Tenant, got, in.Inbox)
		}
	}
}
