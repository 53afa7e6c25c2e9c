package main

import "github.com/engram-memory/engram/internal/inject/injectfx"

func init() { registerWorker(injectfx.Module()) }
