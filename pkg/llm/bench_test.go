package llm_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
)

// BenchmarkStructuredRoundTrip measures the client's own overhead for one
// structured call over HTTP to the scripted server (request building, JSON,
// validation, strict decode); a real model dominates this by far.
func BenchmarkStructuredRoundTrip(b *testing.B) {
	srv := llmtest.New(b)
	srv.OnChatAlways(nil, llmtest.JSON(fact{Subject: "deploys", Kind: "decision", Tags: []string{"ci", "cd"}, Weight: 0.7}))
	c := srv.Client()
	r := req("remember the deploy rule")
	for b.Loop() {
		if _, _, err := llm.Structured[fact](context.Background(), c, r); err != nil {
			b.Fatal(err)
		}
		srv.Reset()
		srv.OnChatAlways(nil, llmtest.JSON(fact{Subject: "deploys", Kind: "decision", Tags: []string{"ci", "cd"}, Weight: 0.7}))
	}
}

// BenchmarkDecode measures schema validation plus strict decoding of a reply.
func BenchmarkDecode(b *testing.B) {
	data, _ := json.Marshal(fact{Subject: "deploys", Kind: "decision", Tags: []string{"ci", "cd", "prod"}, Weight: 0.7})
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := llm.Decode[fact](data); err != nil {
			b.Fatal(err)
		}
	}
}
