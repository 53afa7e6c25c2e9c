package main

import "go.uber.org/fx"

// workerModules are the workers `engram serve` runs. A worker joins with a
// file in this folder (e.g. worker_injector.go):
//
//	func init() { registerWorker(app.ProvideWorker(newInjector)) }
//
// where newInjector returns an app.Worker; the single-worker binary
// (cmd/injector/main.go) calls app.RunWorker with the same module.
var workerModules []fx.Option

func registerWorker(m fx.Option) { workerModules = append(workerModules, m) }
