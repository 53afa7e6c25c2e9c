package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/engram-memory/engram/internal/contract"
)

func init() {
	register("contract", "write the event contract: api/asyncapi.yaml, api/vectors.json and the TypeScript client's types", contractCmd)
}

// contractCmd writes (or with -check, checks) the contract files generated
// from pkg/events under the repository root.
func contractCmd(_ context.Context, stdout io.Writer, args []string) error {
	fs := flag.NewFlagSet("contract", flag.ContinueOnError)
	root := fs.String("root", ".", "the repository's root directory")
	check := fs.Bool("check", false, "write nothing: fail when a file differs from what would be generated")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: engram contract [-root DIR] [-check]\n\n"+
			"Generates Engram's event contract from the Go types of pkg/events: %s (AsyncAPI 3),\n"+
			"%s (the test vectors every client runs) and %s.\n\n",
			contract.AsyncAPIFile, contract.VectorsFile, contract.TypeScriptFile)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if *check {
		stale, err := contract.Check(*root)
		if err != nil {
			return err
		}
		if len(stale) > 0 {
			return fmt.Errorf("contract: out of date: %s (run engram contract)", strings.Join(stale, ", "))
		}
		fmt.Fprintln(stdout, "contract: up to date")
		return nil
	}
	changed, err := contract.Write(*root)
	if err != nil {
		return err
	}
	if len(changed) == 0 {
		fmt.Fprintln(stdout, "contract: up to date")
		return nil
	}
	for _, f := range changed {
		fmt.Fprintln(stdout, "wrote "+f)
	}
	return nil
}
