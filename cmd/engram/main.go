// Command engram runs Engram and operates it.
//
//	engram serve      embedded NATS + SQLite + every worker + idle detector + health
//	engram setup      create or update the streams and consumers (ENGRAM_NATS_URL)
//	engram status     streams and consumers (lag) and the workers' readiness
//	engram dlq        list, show and replay dead letters
//	engram publish    publish input events from JSON (stdin or -f file)
//	engram inject     print the memory block for a question
//	engram context    print what the platform sends next for a conversation
//	engram compact    force a compaction of a conversation
//	engram mcp        serve the `memory` MCP tool to an agent over stdio
//	engram memory     import and export the memory graph as JSON lines; history and undo of consolidation passes
//	engram consolidate run a consolidation pass over a session now
//	engram bench      measure Engram (engram bench inject)
//	engram nats-config print the NATS configuration of the role users (deploy/nats/accounts.conf)
//	engram probe      exit 0 when a process's /healthz (or /readyz) answers: container health checks
//
// Every command reads ENGRAM_* variables and its own flags (`engram <cmd> -h`)
// and, by default, talks to a local `engram serve` (nats://127.0.0.1:4222,
// http://127.0.0.1:7474) as the admin user of the credentials serve keeps in
// its data dir (-data).
//
// Commands register themselves in the commands table (register in an init
// function), so a new subcommand is a new file in this folder.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/credurl"
)

// command is one subcommand. run gets the arguments after the command name
// and writes its output to stdout.
type command struct {
	summary string
	run     func(ctx context.Context, stdout io.Writer, args []string) error
}

var commands = map[string]command{}

// register adds a subcommand; call it from an init function.
func register(name, summary string, run func(ctx context.Context, stdout io.Writer, args []string) error) {
	if _, dup := commands[name]; dup {
		panic("engram: command registered twice: " + name)
	}
	commands[name] = command{summary: summary, run: run}
}

// errUsage marks an error already explained to the user (exit status 2).
var errUsage = errors.New("usage")

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: engram <command> [flags] [args]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'engram <command> -h' for the command's flags. Every flag has an ENGRAM_* variable.")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "engram: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	ctx, stop := app.SignalContext(context.Background())
	defer stop()
	// Whatever a command returns, a URL's password is not printed.
	err := credurl.Error(cmd.run(ctx, stdout, args[1:]))
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		if msg := strings.TrimSpace(strings.TrimPrefix(err.Error(), errUsage.Error()+":")); msg != "" && msg != errUsage.Error() {
			fmt.Fprintf(stderr, "engram %s: %s\n", args[0], msg)
		}
		return 2
	}
	fmt.Fprintf(stderr, "engram %s: %v\n", args[0], err)
	return 1
}
