//go:build !engram_testworker

// The end-to-end test of `engram serve` builds with -tags engram_testworker,
// whose test worker takes the compactor's consumer (testworker.go).

package main

import "github.com/engram-memory/engram/internal/compact/compactfx"

func init() { registerWorker(compactfx.Module()) }
