package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"

	"github.com/engram-memory/engram/internal/buildinfo"
)

func init() {
	register("version", "print the version: module version, commit and Go version (-json for machines)", versionCmd)
}

func versionCmd(_ context.Context, stdout io.Writer, args []string) error {
	fs := flag.NewFlagSet("engram version", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON: version, commit, commit_time, modified, go")
	fs.Usage = func() { commandUsage(fs.Output(), "version", fs, map[string]bool{"json": true}) }
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errUsage
	}
	i := buildinfo.Read()
	if *asJSON {
		return json.NewEncoder(stdout).Encode(i)
	}
	out(stdout, "%s\n", i)
	return nil
}
