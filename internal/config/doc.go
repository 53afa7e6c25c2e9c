// Package config is Engram's one configuration: defaults, then ENGRAM_*
// environment variables, then command-line flags, then Validate, which
// reports every problem at once (errors.Join) so an operator fixes a bad
// deployment in one go.
//
// Every setting is declared once, in settings.go, with its flag name,
// environment variable, default and meaning. That table drives the flag set,
// the environment lookup, `engram serve -h` and the configuration table of
// docs/configuration.md (a test keeps that table equal to the settings).
//
//	cfg := config.Default()
//	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
//	if err := cfg.Load(fs, os.Args[2:], os.LookupEnv, config.All); err != nil { ... } // parse + Validate
//
// Subcommands that need only part of it (the NATS URL and the HTTP address
// for `engram status`) load a subset of the groups (config.Conn).
// Config.Topology turns the events settings into the JetStream layout.
package config
