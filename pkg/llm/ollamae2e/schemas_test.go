package ollamae2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"github.com/engram-memory/engram/pkg/llm"
)

// covered lists every production schema this suite sends to the real model,
// by its registered name (llm.Schemas). TestRegisteredSchemas fails when a
// registered schema is missing here, or a name here is no longer registered.
// The value is the user prompt sent with it.
var covered = map[string]string{
	"extract.memories": "TURNS:\nuser: we use tabs, never spaces\nassistant: noted\nINJECTED MEMORIES:\n[m1] prefers tabs\nExtract memories.",
	// The consolidator's memory tools (internal/consolidate).
	"tool.memory_recall":   "Look up what memory holds about the user's garden.",
	"tool.memory_remember": "The user said: I swim every Tuesday. Store it.",
	"tool.memory_revise":   "[m1] The user lives in Lyon. The user said: I moved to Porto. Revise m1.",
	"tool.memory_forget":   "[m1] The user is in Rome next week (that week has passed). Forget m1.",
	"tool.memory_link":     "[m1] The user climbs every weekend. Link m1 to the topic climbing.",
	"tool.memory_unlink":   "[m1] The user climbs every weekend. Unlink m1 from the topic climbing.",
	"tool.memory_done":     "Memory matches the conversation. End the pass.",
}

// registering lists the packages that register schemas or tools; they are
// imported (in imports_test.go) so their registrations run in this binary.
// TestEveryRegisteringPackageImported keeps it complete.

// sendFormat sends schema as the format of one chat call and checks the
// reply: it ends by itself, is valid against the schema, and decodes
// strictly into typ (when known). The one exception is the grammar's known
// gap: minimum/maximum of "number" fields are not enforced by Ollama 0.17.4
// (see TestNumberRangesNotEnforced); such problems are counted, not failed.
// It returns the number of out-of-range numbers.
func sendFormat(t *testing.T, c *llm.Client, name string, schema *llm.Schema, typ reflect.Type, prompt string) int {
	t.Helper()
	resp, err := c.Chat(ctxT(t), llm.Request{Role: llm.RoleExtract, Project: "schemas",
		Messages: []llm.Message{llm.System("Reply with one JSON object."), llm.User(prompt)},
		Format:   schema, MaxTokens: schema.PredictTokens()})
	if err != nil {
		t.Fatalf("%s: chat: %v", name, err)
	}
	content := strings.TrimSpace(resp.Message.Content)
	if resp.DoneReason != "stop" {
		t.Fatalf("%s: done %q after %d tokens (num_predict %d): %q", name, resp.DoneReason,
			resp.CompletionTokens, schema.PredictTokens(), content)
	}
	numbers := 0
	if err := schema.Validate([]byte(content)); err != nil {
		var ve *llm.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("%s: reply is not JSON: %v\n%s", name, err, content)
		}
		for _, p := range ve.Problems {
			if isNumberRange(schema, p) {
				numbers++
				continue
			}
			t.Errorf("%s: reply not valid against its schema: %s\n%s", name, p, content)
		}
	}
	if typ != nil && numbers == 0 {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(content)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(reflect.New(typ).Interface()); err != nil {
			t.Errorf("%s: reply does not decode into %v: %v\n%s", name, typ, err, content)
		}
	}
	return numbers
}

// isNumberRange reports whether p is a minimum/maximum (or overflow)
// problem of a field whose schema type is "number".
func isNumberRange(root *llm.Schema, p llm.Problem) bool {
	s := root
	for _, part := range strings.Split(p.Path, ".") {
		name, _, indexed := strings.Cut(part, "[")
		if name != "" {
			if s = s.Property(name); s == nil {
				return false
			}
		}
		for ; indexed; _, part, indexed = strings.Cut(part, "[") {
			if s = s.Items; s == nil {
				return false
			}
			_, part, _ = strings.Cut(part, "]")
		}
	}
	if s.Type != "number" {
		return false
	}
	return strings.Contains(p.Message, "allowed") || strings.Contains(p.Message, "required") ||
		strings.Contains(p.Message, "out of range")
}

// deep returns a copy of s whose arrays must have at least one item, so the
// grammar walks every nested object (a tiny model otherwise often answers
// with empty arrays).
func deep(s *llm.Schema) *llm.Schema {
	c := *s
	if c.Items != nil {
		c.Items = deep(c.Items)
		if c.MaxItems != nil && *c.MaxItems > 0 && (c.MinItems == nil || *c.MinItems == 0) {
			one := 1
			c.MinItems = &one
		}
	}
	c.Properties = nil
	for _, p := range s.Properties {
		c.Properties = append(c.Properties, llm.Property{Name: p.Name, Schema: deep(p.Schema)})
	}
	return &c
}

// TestRegisteredSchemas sends every registered production schema to the real
// model: format schemas as the format of a chat call, tool schemas both as a
// tool offered to the model and as a format (the shape of the arguments).
func TestRegisteredSchemas(t *testing.T) {
	need(t)
	c := client(t)
	entries := llm.Schemas()
	registered := map[string]bool{}
	for _, e := range entries {
		registered[e.Name] = true
		t.Run(e.Name, func(t *testing.T) {
			prompt, ok := covered[e.Name]
			if !ok {
				t.Errorf("schema %q (%s) is registered but has no case in ollamae2e.covered: add it", e.Name, e.Kind)
				prompt = "Fill in the fields."
			}
			switch e.Kind {
			case "format":
				sendFormat(t, c, e.Name, e.Schema, e.Type, prompt)
				n := 0
				for i := 0; i < 3; i++ {
					n += sendFormat(t, c, e.Name+" (arrays non-empty)", deep(e.Schema), e.Type, prompt)
				}
				if n > 0 {
					t.Logf("%s: %d numbers outside their minimum/maximum (not enforced by the grammar; see TestNumberRangesNotEnforced)", e.Name, n)
				}
			case "tool":
				name := strings.TrimPrefix(e.Name, "tool.")
				spec := llm.ToolSpec{Name: name, Description: "test", Parameters: e.Schema}
				resp, err := c.Chat(ctxT(t), llm.Request{Role: llm.RoleConsolidate, Project: "schemas",
					Messages: []llm.Message{llm.User(prompt)}, Tools: []llm.ToolSpec{spec}})
				if err != nil {
					t.Fatalf("tool %s offered: %v", name, err)
				}
				if resp.DoneReason != "stop" {
					t.Errorf("tool %s offered: done %q", name, resp.DoneReason)
				}
				sendFormat(t, c, e.Name, e.Schema, e.Type, prompt)
				sendFormat(t, c, e.Name+" (arrays non-empty)", deep(e.Schema), e.Type, prompt)
			default:
				t.Errorf("schema %q: unknown kind %q", e.Name, e.Kind)
			}
		})
	}
	for name := range covered {
		if !registered[name] {
			t.Errorf("ollamae2e.covered names %q, which is no longer registered (or its package is not imported)", name)
		}
	}
	t.Logf("%d registered schemas sent", len(entries))
}

// The probe types cover every construct SchemaFor produces, so the real
// grammar path is exercised even before workers register their schemas.
type probeMemory struct {
	Kind     string   `json:"kind" llm:"enum=decision|preference|pattern|failure"`
	Label    string   `json:"label" llm:"minLength=1,maxLength=40"`
	Body     string   `json:"body" llm:"maxLength=200"`
	Priority int      `json:"priority" llm:"minimum=1,maximum=5"`
	Count    uint     `json:"count" llm:"maximum=1000"`
	Pinned   bool     `json:"pinned"`
	Paths    []string `json:"paths" llm:"maxItems=3,maxLength=30"`
	Note     string   `json:"note,omitempty" llm:"maxLength=20"`
}

type probeReply struct {
	Memories []probeMemory `json:"memories" llm:"minItems=1,maxItems=3"`
	Summary  string        `json:"summary" llm:"maxLength=80"`
	Verdicts []string      `json:"verdicts" llm:"maxItems=4,enum=helpful|unhelpful|unused"`
}

type probeScore struct {
	Score float64 `json:"score" llm:"minimum=0,maximum=1"`
	Why   string  `json:"why" llm:"maxLength=60"`
}

// TestStructuredProbes drives llm.Structured with the probe types: the reply
// decodes and validates (its content is nonsense; that is not checked).
func TestStructuredProbes(t *testing.T) {
	c := client(t)
	for i := 0; i < 4; i++ {
		v, resp, err := llm.Structured[probeReply](ctxT(t), c, llm.Request{Role: llm.RoleExtract, Project: "probe",
			Messages: []llm.Message{llm.User("Extract memories. " + strconv.Itoa(i))}})
		if err != nil {
			t.Fatalf("probeReply %d: %v (last reply %q)", i, err, resp.Message.Content)
		}
		if len(v.Memories) < 1 || len(v.Memories) > 3 {
			t.Errorf("probeReply %d: %d memories", i, len(v.Memories))
		}
		for _, m := range v.Memories {
			if !slices.Contains([]string{"decision", "preference", "pattern", "failure"}, m.Kind) ||
				m.Priority < 1 || m.Priority > 5 || len(m.Label) < 1 || len(m.Label) > 40 {
				t.Errorf("probeReply %d: out of bounds: %+v", i, m)
			}
		}
	}
	// A number range is not enforced by the grammar: Structured either
	// returns a value inside it or fails with ErrMisbehaved, never a value
	// outside it.
	for i := 0; i < 4; i++ {
		v, _, err := llm.Structured[probeScore](ctxT(t), c, llm.Request{Role: llm.RoleExtract, Project: "probe",
			Messages: []llm.Message{llm.User("Score it. " + strconv.Itoa(i))}})
		switch {
		case errors.Is(err, llm.ErrMisbehaved):
			t.Logf("probeScore %d: %v", i, err)
		case err != nil:
			t.Fatalf("probeScore %d: %v", i, err)
		case v.Score < 0 || v.Score > 1:
			t.Errorf("probeScore %d: score %v out of [0,1] returned as valid", i, v.Score)
		}
	}
}

// TestStructuredCutOff: a reply cut at num_predict mid-JSON (done reason
// "length") is a misbehaving model, transient, never a decode of half an
// object.
func TestStructuredCutOff(t *testing.T) {
	c := client(t)
	_, resp, err := llm.Structured[probeReply](ctxT(t), c, llm.Request{Role: llm.RoleExtract, Project: "probe",
		Messages: []llm.Message{llm.User("Extract memories.")}, MaxTokens: 6})
	if !errors.Is(err, llm.ErrMisbehaved) || llm.Classify(err) != llm.ClassTransient {
		t.Fatalf("cut-off reply: %v (class %v), want ErrMisbehaved, transient", err, llm.Classify(err))
	}
	if resp.DoneReason != "length" || !strings.Contains(err.Error(), "cut off") {
		t.Errorf("done %q, error %v: want the token limit named", resp.DoneReason, err)
	}
}

// TestNumberRangesNotEnforced records a fact of the pinned Ollama: the JSON
// Schema grammar bounds integers (minimum/maximum) but not numbers. With a
// fixed sampling seed the tiny model writes out-of-range numbers; if a new
// version starts enforcing them, this test says so (update docs/ollama.md).
func TestNumberRangesNotEnforced(t *testing.T) {
	s := need(t)
	schema, err := llm.SchemaFor[probeScore]()
	if err != nil {
		t.Fatal(err)
	}
	ints, err := llm.SchemaFor[struct {
		N int `json:"n" llm:"minimum=1,maximum=5"`
	}]()
	if err != nil {
		t.Fatal(err)
	}
	outside, intOutside := 0, 0
	for seed := 1; seed <= 8; seed++ {
		for _, sc := range []*llm.Schema{schema, ints} {
			format, _ := sc.MarshalJSON()
			stream := false
			var content string
			err := s.api.Chat(ctxT(t), &api.ChatRequest{Model: chatModel, Stream: &stream, Format: format,
				Options:  map[string]any{"seed": seed, "num_predict": 256},
				Messages: []api.Message{{Role: "user", Content: "Score it."}},
			}, func(r api.ChatResponse) error { content += r.Message.Content; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if err := sc.Validate([]byte(content)); err != nil {
				if sc == ints {
					intOutside++
					t.Errorf("integer range violated: %v: %s", err, content)
				} else {
					outside++
				}
			}
		}
	}
	t.Logf("ollama %s: %d of 8 number replies outside [0,1]; %d of 8 integer replies outside [1,5]", s.version, outside, intOutside)
	if outside == 0 {
		t.Errorf("ollama %s kept every number inside its minimum/maximum: number ranges may be enforced now; update docs/ollama.md and this test", s.version)
	}
}

// TestEveryRegisteringPackageImported scans the module for packages that
// use pkg/llm's schemas (llm.RegisterSchema, llm.RegisterTool,
// llm.Structured, llm.NewTool, llm.MustTool) and checks that this package
// imports each of them, so their schemas are in llm.Schemas() here, and that
// a package using Structured or defining tools also registers them.
func TestEveryRegisteringPackageImported(t *testing.T) {
	root, modPath := moduleRoot(t)
	fset := token.NewFileSet()
	uses := map[string]map[string]bool{} // package -> llm functions called
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Contains(src, []byte("pkg/llm\"")) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return nil // someone's half-written file; the compiler will say
		}
		if called := llmCalls(f); len(called) > 0 {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			pkg := modPath + "/" + filepath.ToSlash(rel)
			if uses[pkg] == nil {
				uses[pkg] = map[string]bool{}
			}
			for name := range called {
				uses[pkg][name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	imported := ownImports(t)
	names := map[string]bool{}
	for pkg, called := range uses {
		names[pkg] = true
		if !imported[pkg] {
			t.Errorf("package %s uses llm schemas or tools but ollamae2e does not import it: add `_ %q` to imports_test.go and its schema names to covered", pkg, pkg)
		}
		if called["Structured"] && !called["RegisterSchema"] {
			t.Errorf("package %s calls llm.Structured but registers no schema: register each type with llm.RegisterSchema so the real-Ollama suite sends it", pkg)
		}
		if (called["NewTool"] || called["MustTool"]) && !called["RegisterTool"] {
			t.Errorf("package %s defines tools but registers none: call llm.RegisterTool(tool.Spec()) for each", pkg)
		}
	}
	t.Logf("packages using llm schemas: %v", keys(names))
}

// llmCalls returns which of pkg/llm's schema functions f calls (as
// <llm>.Name(...) or <llm>.Name[T](...)).
func llmCalls(f *ast.File) map[string]bool {
	llmName := ""
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if strings.HasSuffix(p, "/pkg/llm") {
			llmName = "llm"
			if imp.Name != nil {
				llmName = imp.Name.Name
			}
		}
	}
	found := map[string]bool{}
	if llmName == "" {
		return found
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		fun := call.Fun
		switch x := fun.(type) {
		case *ast.IndexExpr:
			fun = x.X
		case *ast.IndexListExpr:
			fun = x.X
		}
		if sel, ok := fun.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == llmName {
				switch sel.Sel.Name {
				case "RegisterSchema", "RegisterTool", "Structured", "NewTool", "MustTool":
					found[sel.Sel.Name] = true
				}
			}
		}
		return true
	})
	return found
}

func moduleRoot(t *testing.T) (dir, modPath string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
					return dir, strings.TrimSpace(rest)
				}
			}
			t.Fatalf("no module line in %s/go.mod", dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}

// ownImports returns the import paths of this package's test files.
func ownImports(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			out[p] = true
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestLLMCallsScanner(t *testing.T) {
	src := `package w
import (
	model "github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)
var tool = model.MustTool[args]("recall", "")
func f() { _, _, _ = model.Structured[reply](nil, nil, model.Request{}); llmtest.RegisterSchema() }
`
	f, err := parser.ParseFile(token.NewFileSet(), "w.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := keys(llmCalls(f))
	if want := []string{"MustTool", "Structured"}; !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
}
