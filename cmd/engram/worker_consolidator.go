package main

import "github.com/engram-memory/engram/internal/consolidate/consolidatefx"

func init() { registerWorker(consolidatefx.Module()) }
