package main

import "github.com/engram-memory/engram/internal/extract/extractfx"

func init() { registerWorker(extractfx.Module()) }
