// Command tinymodel writes a tiny llama-architecture GGUF model and the
// Modelfiles that turn it into Ollama chat models and an embedding model,
// for the end-to-end tests against a real Ollama server (docs/ollama.md).
//
//	go run ./tools/tinymodel -out DIR [-seed N] [-call 'NAME={"arg":"value"}' ...]
//
// The same seed and calls always give the same bytes. Each -call adds a fixed
// tool call the chat model emits when the control token <|engram_call_I|>
// (I = 0, 1, ... in flag order) appears in a user message; without -call the
// defaults of tiny.DefaultCalls are used.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/engram-memory/engram/tools/tinymodel/tiny"
)

type callFlags []tiny.Call

func (c *callFlags) String() string { return fmt.Sprint(len(*c)) }

func (c *callFlags) Set(s string) error {
	rest, bare := strings.CutPrefix(s, "bare:")
	name, args, ok := strings.Cut(rest, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=JSON-OBJECT, got %q", s)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(args), &m); err != nil {
		return fmt.Errorf("arguments of %s: %w", name, err)
	}
	*c = append(*c, tiny.Call{Name: name, Arguments: m, Bare: bare})
	return nil
}

func main() {
	out := flag.String("out", "", "folder to write tiny.gguf, Modelfile.chat and Modelfile.embed into (required)")
	seed := flag.Uint64("seed", 1, "seed of the random weights")
	var calls callFlags
	flag.Var(&calls, "call", `fixed tool call NAME={"arg":...} (repeatable, at most 4; prefix "bare:" for a bare-JSON call)`)
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "tinymodel: -out is required")
		flag.Usage()
		os.Exit(2)
	}
	opts := tiny.Options{Seed: *seed, Calls: calls}
	if len(calls) == 0 {
		opts.Calls = tiny.DefaultCalls()
	}
	files, err := tiny.Generate(*out, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tinymodel:", err)
		os.Exit(1)
	}
	fmt.Println(files.GGUF)
	fmt.Println(files.Chat)
	fmt.Println(files.Embed)
	fmt.Println(files.Bare)
	for i, c := range opts.Calls {
		pieces, _ := tiny.CallPieces(c)
		fmt.Printf("%s -> %q\n", tiny.CallControl(i), pieces)
	}
}
