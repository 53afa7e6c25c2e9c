package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/memio"
	"github.com/engram-memory/engram/pkg/memory"
)

func init() {
	register("memory", "seed, inspect, move and erase a memory graph: engram memory import [-tenant T] FILE.jsonl | export [-tenant T] [-project P [-session S] [-transcripts]] [-o FILE] | history [-tenant T] [-project P] [-session S] | undo [-tenant T] PASS | erase -tenant T [-project P [-session S]] [-verify]", memoryCmd)
}

var memoryCommands = []subcommand{
	{"import [-tenant T] FILE.jsonl[.gz]", "write a graph of JSON lines (plain or gzip; - is stdin) into the store, validated all or nothing, and embed it"},
	{"export [-tenant T] [-project P [-session S] [-transcripts]] [-o FILE]", "write the graph (a project's, a session's; with their transcripts) as JSON lines"},
	{"history [-tenant T] [-project P] [-session S]", "consolidation passes and their changes, newest first"},
	{"undo [-tenant T] PASS", "revert a consolidation pass"},
	{"erase -tenant T [-project P [-session S]] [-verify] [-json]", "erase a tenant, project or session for good, with a receipt (through a running serve)"},
}

func memoryCmd(ctx context.Context, stdout io.Writer, args []string) error {
	if err := groupHelp("memory", memoryCommands, args); err != nil {
		return err
	}
	switch args[0] {
	case "import":
		return memoryImport(ctx, stdout, args[1:])
	case "export":
		return memoryExport(ctx, stdout, args[1:])
	case "history":
		return memoryHistory(ctx, stdout, args[1:])
	case "undo":
		return memoryUndo(ctx, stdout, args[1:])
	case "erase":
		return memoryErase(ctx, stdout, args[1:])
	}
	return fmt.Errorf("%w: unknown memory command %q (import, export, history, undo, erase; engram memory -h)", errUsage, args[0])
}

// memoryImport writes a JSON-lines file into the configured store (the data
// dir's SQLite, which a running `engram serve` holds: stop it first; or
// ENGRAM_REDIS_URL) and embeds the imported memories with the configured
// embedder, so that recall is ready at once.
func memoryImport(ctx context.Context, stdout io.Writer, args []string) error {
	var tenant string
	cfg, fs, err := loadConfig("memory import", args, config.Runtime|config.Conn, func(fs *flag.FlagSet) {
		fs.StringVar(&tenant, "tenant", "", "the tenant whose graph the file is written into (default: the default tenant)")
	})
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: engram memory import FILE.jsonl (- for stdin)", errUsage)
	}
	var r io.Reader = os.Stdin
	if name := fs.Arg(0); name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	if r, err = memio.Decompress(r); err != nil {
		return err
	}
	st, err := openStore(ctx, cfg, "")
	if err != nil {
		return err
	}
	defer st.Close()
	var opts []memio.Option
	if isTerminal(os.Stderr) {
		opts = append(opts, memio.WithProgress(10000, progressLine(os.Stderr)))
	}
	var written []memory.Node
	opts = append(opts, memio.WithWritten(func(ns []memory.Node) { written = append(written, ns...) }))
	stats, err := memio.Import(ctx, st, r, tenant, time.Now(), opts...)
	endProgress(os.Stderr, opts[:len(opts)-1])
	if err != nil {
		return err
	}
	announced := announceImport(ctx, cfg, written)
	c, _, err := app.NewLLM(cfg, nil)
	if err != nil {
		return err
	}
	embedded, err := memory.EmbedPending(ctx, st, app.NewEmbedder(cfg, c), 64)
	if err != nil {
		return fmt.Errorf("imported %d nodes and %d edges, but embedding them failed (the running workers embed them when the embedder is back): %w",
			stats.Nodes, stats.Edges, err)
	}
	if announced != "" {
		announced = "; " + announced
	}
	out(stdout, "imported %d nodes and %d edges; merged %d repeated texts into the first node holding each; embedded %d%s\n",
		stats.Nodes, stats.Edges, stats.Merged, embedded, announced)
	if stats.Messages+stats.Summaries > 0 {
		out(stdout, "imported %d transcript messages and %d summaries\n", stats.Messages, stats.Summaries)
	}
	return nil
}

// announceImport publishes memory_changed for the nodes an import wrote,
// as the workers announce their edits, and says what it did ("" when
// there is nobody to tell).
func announceImport(ctx context.Context, cfg config.Config, written []memory.Node) string {
	if len(written) == 0 || (cfg.Store.Kind == config.StoreSQLite && cfg.NATS.URL == "") {
		// A SQLite import runs while no local serve does (serve holds the
		// database): nobody listens.
		return ""
	}
	ec, done, err := busPublisher(cfg)
	if err != nil {
		return "no memory_changed published (" + err.Error() + ")"
	}
	defer done()
	n, err := publishWritten(ctx, ec, written)
	if err != nil {
		return fmt.Sprintf("%d memory_changed published, then: %v", n, err)
	}
	return fmt.Sprintf("%d memory_changed published", n)
}

func memoryExport(ctx context.Context, stdout io.Writer, args []string) error {
	var file string
	var sel memio.Selection
	cfg, _, err := loadConfig("memory export", args, config.Runtime|config.Conn, func(fs *flag.FlagSet) {
		fs.StringVar(&file, "o", "-", "output file; - is stdout")
		fs.StringVar(&sel.Tenant, "tenant", "", "the tenant whose graph is written (default: the default tenant); nothing of another tenant is")
		fs.StringVar(&sel.Project, "project", "", "only this project's memories (not the tenant's global ones)")
		fs.StringVar(&sel.Session, "session", "", "only the memories written in this session of -project")
		fs.BoolVar(&sel.Transcripts, "transcripts", false, "also the sessions' messages and summaries (needs -project): what `memory import` writes back")
	})
	if err != nil {
		return err
	}
	if (sel.Session != "" || sel.Transcripts) && sel.Project == "" {
		return fmt.Errorf("%w: -session and -transcripts need -project", errUsage)
	}
	st, err := openStore(ctx, cfg, "")
	if err != nil {
		return err
	}
	defer st.Close()
	if file == "-" {
		_, err := memio.ExportSelection(ctx, st, stdout, sel)
		return err
	}
	// Write beside the target and rename, so a failed export never leaves a
	// truncated file where a good one was.
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	stats, err := memio.ExportSelection(ctx, st, tmp, sel)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return err
	}
	if sel.Transcripts {
		out(stdout, "exported %d nodes, %d edges, %d messages and %d summaries to %s\n", stats.Nodes, stats.Edges, stats.Messages, stats.Summaries, file)
		return nil
	}
	out(stdout, "exported %d nodes and %d edges to %s\n", stats.Nodes, stats.Edges, file)
	return nil
}

// isTerminal reports whether f is a terminal (a progress line is for a
// person, not for a log).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressLine rewrites one line of w with an import's progress.
func progressLine(w io.Writer) func(memio.Progress) {
	return func(p memio.Progress) {
		if p.Total > 0 {
			fmt.Fprintf(w, "\r\033[Kread %d lines; written %d of %d nodes and edges", p.Lines, p.Written, p.Total)
			return
		}
		fmt.Fprintf(w, "\r\033[Kread %d lines", p.Lines)
	}
}

// endProgress ends the progress line, if one was shown.
func endProgress(w io.Writer, opts []memio.Option) {
	if len(opts) > 0 {
		fmt.Fprintln(w)
	}
}
