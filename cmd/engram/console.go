package main

import "github.com/engram-memory/engram/internal/console/consolefx"

// The memory console (ENGRAM_CONSOLE_ADDR; on by default in serve).
func init() { registerServe(consolefx.Module()) }
