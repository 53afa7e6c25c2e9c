package tiny

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// File names Generate writes into its folder.
const (
	GGUFName       = "tiny.gguf"
	ChatModelfile  = "Modelfile.chat"
	EmbedModelfile = "Modelfile.embed"
	BareModelfile  = "Modelfile.bare"
)

// Files are the paths Generate wrote.
type Files struct {
	GGUF, Chat, Embed string
	Bare              string // chat model whose tool calls are bare JSON (tag "{")
}

// Encode builds the model for opts and returns the GGUF bytes.
func Encode(opts Options) ([]byte, *Model, error) {
	m, err := Build(opts)
	if err != nil {
		return nil, nil, err
	}
	if err := m.checkFinite(); err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	if err := WriteGGUF(&buf, m.KV, m.Tensor); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), m, nil
}

// Generate writes the GGUF file and the Modelfiles into dir (created if
// needed). `ollama create NAME -f <Files.Chat>` makes the chat model;
// `ollama create NAME -f <Files.Embed>` the embedding model and Files.Bare a
// chat model whose tool calls are bare JSON (all the same weights).
func Generate(dir string, opts Options) (Files, error) {
	b, _, err := Encode(opts)
	if err != nil {
		return Files{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Files{}, fmt.Errorf("tiny: %w", err)
	}
	f := Files{
		GGUF:  filepath.Join(dir, GGUFName),
		Chat:  filepath.Join(dir, ChatModelfile),
		Embed: filepath.Join(dir, EmbedModelfile),
		Bare:  filepath.Join(dir, BareModelfile),
	}
	chat, bare, embed := Modelfiles(GGUFName)
	for _, w := range []struct {
		path string
		data []byte
	}{{f.GGUF, b}, {f.Chat, []byte(chat)}, {f.Embed, []byte(embed)}, {f.Bare, []byte(bare)}} {
		if err := os.WriteFile(w.path, w.data, 0o644); err != nil {
			return Files{}, fmt.Errorf("tiny: %w", err)
		}
	}
	return f, nil
}
