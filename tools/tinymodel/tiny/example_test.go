package tiny_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/engram-memory/engram/tools/tinymodel/tiny"
)

// Generate writes the model and its Modelfiles; `ollama create NAME -f
// Modelfile.chat` (run in that folder) then makes a chat model whose tool
// call 0 is emitted when a user message contains tiny.CallControl(0).
func ExampleGenerate() {
	dir, err := os.MkdirTemp("", "tiny")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	files, err := tiny.Generate(dir, tiny.Options{Seed: 1, Calls: []tiny.Call{
		{Name: "recall", Arguments: map[string]any{"query": "tabs or spaces"}},
	}})
	if err != nil {
		panic(err)
	}
	fmt.Println(filepath.Base(files.GGUF), filepath.Base(files.Chat), filepath.Base(files.Embed))
	text, _ := tiny.CallText(tiny.Call{Name: "recall", Arguments: map[string]any{"query": "tabs or spaces"}})
	fmt.Println(tiny.CallControl(0), "->", text)
	// Output:
	// tiny.gguf Modelfile.chat Modelfile.embed
	// <|engram_call_0|> -> <tool_call>{"name":"recall","arguments":{"query":"tabs or spaces"}}</tool_call>
}
