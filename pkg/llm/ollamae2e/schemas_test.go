package ollamae2e

import (
	"bytes"
	"encoding/json"
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

	"github.com/engram-memory/engram/pkg/llm"
)

// covered lists every production schema this suite sends to the real model,
// by its registered name (llm.Schemas). TestRegisteredSchemas fails when a
// registered schema is missing here, or a name here is no longer registered.
// The value is the user prompt sent with it.
var covered = map[string]string{
	"extract.memories": "TURNS:\nuser: we use tabs, never spaces\nassistant: noted\nINJECTED MEMORIES:\n[m1] prefers tabs\nExtract memories.",
}

// registering lists the packages that register schemas or tools; they are
// imported (in imports_test.go) so their registrations run in this binary.
// TestEveryRegisteringPackageImported keeps it complete.

// sendFormat sends schema as the format of one chat call and checks the
// reply: it ends by itself, is valid against the schema, and decodes
// strictly into typ (when known).
func sendFormat(t *testing.T, c *llm.Client, name string, schema *llm.Schema, typ reflect.Type, prompt string) {
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
	if err := schema.Validate([]byte(content)); err != nil {
		t.Fatalf("%s: reply not valid against its schema: %v\n%s", name, err, content)
	}
	if typ != nil {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(content)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(reflect.New(typ).Interface()); err != nil {
			t.Fatalf("%s: reply does not decode into %v: %v\n%s", name, typ, err, content)
		}
	}
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
	for i := 0; i < 4; i++ {
		v, resp, err := llm.Structured[probeScore](ctxT(t), c, llm.Request{Role: llm.RoleExtract, Project: "probe",
			Messages: []llm.Message{llm.User("Score it. " + strconv.Itoa(i))}})
		if err != nil {
			t.Fatalf("probeScore %d: %v (last reply %q)", i, err, resp.Message.Content)
		}
		if v.Score < 0 || v.Score > 1 {
			t.Errorf("probeScore %d: score %v out of [0,1]", i, v.Score)
		}
	}
}

// TestEveryRegisteringPackageImported scans the module for packages that
// call llm.RegisterSchema or llm.RegisterTool and checks this package
// imports each of them, so their schemas are in llm.Schemas() here.
func TestEveryRegisteringPackageImported(t *testing.T) {
	root, modPath := moduleRoot(t)
	fset := token.NewFileSet()
	registering := map[string]bool{}
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
		if !bytes.Contains(src, []byte("RegisterSchema")) && !bytes.Contains(src, []byte("RegisterTool")) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return nil // someone's half-written file; the compiler will say
		}
		if callsRegister(f) {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			registering[modPath+"/"+filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	imported := ownImports(t)
	for pkg := range registering {
		if pkg == modPath+"/pkg/llm" {
			continue // imported anyway
		}
		if !imported[pkg] {
			t.Errorf("package %s registers schemas or tools but ollamae2e does not import it: add `_ %q` to imports_test.go and its schemas to covered", pkg, pkg)
		}
	}
	t.Logf("registering packages: %v", keys(registering))
}

// callsRegister reports whether f calls <pkg>.RegisterSchema[...](...) or
// <pkg>.RegisterTool(...) where <pkg> imports pkg/llm.
func callsRegister(f *ast.File) bool {
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
	found := false
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
		var name string
		switch x := fun.(type) {
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && id.Name == llmName {
				name = x.Sel.Name
			}
		case *ast.Ident:
			if llmName == "" && f.Name.Name == "llm" {
				name = x.Name // inside pkg/llm itself
			}
		}
		if name == "RegisterSchema" || name == "RegisterTool" {
			found = true
		}
		return !found
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
