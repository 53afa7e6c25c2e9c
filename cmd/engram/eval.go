package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mattn/go-isatty"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/eval"
)

func init() {
	register("eval", "measure retrieval on a graph and its questions (engram eval DIR | GRAPH QUESTIONS)", evalCmd)
}

const evalHelp = `usage: engram eval [flags] DIR...
       engram eval [flags] GRAPH QUESTIONS

Measures retrieval on real conversations: imports the graph into a fresh
temporary store of its own (SQLite, or a new namespace of ENGRAM_REDIS_URL
with -store redis; never the user's data), only the projects the questions
ask about, embeds it with the configured embedder, and asks every question
through the injector's Compose, as a turn_started would, at the question's
date. A plain BM25 (Okapi k1 1.5, b 0.75, English stop words, no stemming,
label + body) over the same nodes is the reference, computed in the same run.

DIR holds graph.jsonl(.gz) and questions.jsonl (../shared/eval/longmemeval-dev,
../shared/eval/locomo-dev). Several DIRs are evaluated in one run, each in a
store of its own, and printed side by side at the end (with the categories of
20 or more questions in which the ranker is under plain BM25).

GRAPH is the import format of 'engram memory import' (plain or gzip): one JSON
object per line, {"type":"node","id":...,"project_id":...,"label":...,...} or
{"type":"edge","src":...,"dst":...,"relation":...}.

QUESTIONS is JSON lines (plain or gzip), one question per line:
  {"project": "p", "question": "...", "evidence": ["node id", ...],
   "category": "optional", "question_date": "2023-05-30T10:00:00Z (optional)"}
evidence: the ids of the nodes that hold the answer; question_date: when the
question is asked (the turn's time: recency and time words are judged from it;
without it, when the project's latest memory was written: the question is asked
right after the conversation).

Reported, overall and per category:
  ranker  the fused ranking itself (relative floor 0, ceiling 20): recall@1/5/10/20
          (share of a question's evidence among the first k), nDCG@10, MRR
  bm25    the same for the reference BM25
  block   the block the configuration builds: recall, lines, tokens (characters / 4
          of the recalled lines as rendered; mean and p95), share of empty blocks
  sweep   the block policy over relative floors x ceilings (recall / tokens)

-compare SPEC runs a second configuration B beside the first (A, the flags and
environment) in the same run and prints both and B - A: SPEC is an env file
(KEY=VALUE lines, # comments) or KEY=VALUE pairs separated by commas or spaces,
applied over A's environment (flags still win), e.g.
  engram eval -compare ENGRAM_INJECT_RELATIVE_FLOOR=0.5 ../shared/eval/longmemeval-dev
With several DIRs, each set runs both, and the side-by-side table shows A, B
and B - A per set:
  engram eval -compare ENGRAM_RANK_FEEDBACK=0 ../shared/eval/*-dev

Flags:
`

func evalCmd(ctx context.Context, stdout io.Writer, args []string) error {
	var (
		asJSON, details bool
		compare, svg    string
		sample          int
	)
	extra := func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
		fs.BoolVar(&details, "details", false, "with -json: include every question's rankings")
		fs.StringVar(&compare, "compare", "", "a second configuration to run beside this one: an env file or KEY=VALUE pairs")
		fs.StringVar(&svg, "svg", "", "write the policy sweep as an SVG chart to this file (with several sets, one file each: NAME-SET.svg)")
		fs.IntVar(&sample, "sample", 0, "ask only this many questions of each set, evenly spaced through its file (0: all)")
		fs.Usage = func() {
			fmt.Fprint(fs.Output(), evalHelp)
			fs.PrintDefaults()
		}
	}
	cfgA, fs, err := loadConfig("eval", args, config.Runtime, extra)
	if err != nil {
		return err
	}
	inputs, err := evalInputs(fs.Args())
	if err != nil {
		return err
	}
	setups := []evalSetup{{name: "A", cfg: cfgA}}
	if compare != "" {
		env, err := compareEnv(compare)
		if err != nil {
			return err
		}
		cfgB, _, err := loadConfigEnv("eval", args, config.Runtime, extra, func(k string) (string, bool) {
			if v, ok := env[k]; ok {
				return v, true
			}
			return os.LookupEnv(k)
		})
		if err != nil {
			return err
		}
		setups[0].name = "A (as configured)"
		setups = append(setups, evalSetup{name: "B (" + compare + ")", cfg: cfgB})
	}
	sets := make([]eval.Set, 0, len(inputs))
	for _, in := range inputs {
		qf, err := os.Open(in.questions)
		if err != nil {
			return err
		}
		qs, err := eval.ReadQuestions(qf)
		qf.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", in.name, err)
		}
		qs = eval.Sample(qs, sample)
		results, err := runEvals(ctx, setups, in.graph, qs)
		if err != nil {
			return fmt.Errorf("%s: %w", in.name, err)
		}
		if svg != "" {
			path := svg
			if len(inputs) > 1 {
				path = strings.TrimSuffix(svg, filepath.Ext(svg)) + "-" + in.name + filepath.Ext(svg)
			}
			if err := writeSVG(path, results[len(results)-1]); err != nil {
				return err
			}
		}
		sets = append(sets, eval.Set{Name: in.name, Results: results})
	}
	if asJSON {
		if !details {
			for _, s := range sets {
				for i := range s.Results {
					s.Results[i].Questions = nil
				}
			}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		one := func(rs []eval.Result) any {
			if len(rs) == 1 {
				return rs[0]
			}
			return map[string]eval.Result{"a": rs[0], "b": rs[1]}
		}
		if len(sets) == 1 {
			return enc.Encode(one(sets[0].Results))
		}
		bySet := make(map[string]any, len(sets))
		for _, s := range sets {
			bySet[s.Name] = one(s.Results)
		}
		return enc.Encode(map[string]any{"sets": bySet})
	}
	for _, s := range sets {
		for _, r := range s.Results {
			if len(sets) > 1 {
				fmt.Fprintf(stdout, "== %s ==\n", s.Name)
			}
			eval.WriteText(stdout, r)
			fmt.Fprintln(stdout)
		}
		if len(s.Results) == 2 {
			eval.WriteCompare(stdout, s.Results[0], s.Results[1])
			fmt.Fprintln(stdout)
		}
	}
	if len(sets) > 1 || len(setups) > 1 {
		eval.WriteSets(stdout, sets)
	}
	return nil
}

type evalSetup struct {
	name string
	cfg  config.Config
}

// runEvals evaluates each setup. Setups that differ only in what is read
// at question time (the injector's settings) share one loaded store; a
// different store or model gets its own.
func runEvals(ctx context.Context, setups []evalSetup, graph string, qs []eval.Question) ([]eval.Result, error) {
	type loaded struct {
		cfg  config.Config
		st   eval.Store
		emb  app.Embedder
		load eval.LoadStats
	}
	var stores []loaded
	results := make([]eval.Result, 0, len(setups))
	for _, s := range setups {
		var l *loaded
		for i := range stores {
			if sameLoad(stores[i].cfg, s.cfg) {
				l = &stores[i]
			}
		}
		if l == nil {
			st, cleanup, err := app.OpenScratchStore(ctx, s.cfg)
			if err != nil {
				return nil, err
			}
			defer func() { _ = cleanup() }()
			c, _, err := app.NewLLM(s.cfg, nil)
			if err != nil {
				return nil, err
			}
			emb := app.NewEmbedder(s.cfg, c)
			gf, err := os.Open(graph)
			if err != nil {
				return nil, err
			}
			load, err := eval.Load(ctx, st, emb, gf, qs)
			gf.Close()
			if err != nil {
				return nil, err
			}
			stores = append(stores, loaded{cfg: s.cfg, st: st, emb: emb, load: load})
			l = &stores[len(stores)-1]
		}
		r, err := eval.Run(ctx, eval.Setup{Name: s.name, Store: l.st, Embedder: l.emb, Inject: s.cfg.Inject,
			Progress: progressBar(s.name)}, qs)
		if err != nil {
			return nil, err
		}
		r.Load = l.load
		results = append(results, r)
	}
	return results, nil
}

// sameLoad reports whether two configurations load the same store: the
// same backend and embedder.
func sameLoad(a, b config.Config) bool {
	return a.Store == b.Store && a.LLM.Embed == b.LLM.Embed && a.LLM.EmbedDim == b.LLM.EmbedDim && a.LLM.Host == b.LLM.Host
}

// evalInput is one evaluation set: its name (the directory's, or the
// graph file's without extensions) and files.
type evalInput struct{ name, graph, questions string }

// evalInputs resolves DIR... or GRAPH QUESTIONS (two arguments that are
// both files).
func evalInputs(args []string) ([]evalInput, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("%w: engram eval DIR... | GRAPH QUESTIONS (engram eval -h)", errUsage)
	}
	isFile := func(p string) bool { st, err := os.Stat(p); return err == nil && !st.IsDir() }
	if len(args) == 2 && isFile(args[0]) && isFile(args[1]) {
		name := filepath.Base(args[0])
		name = strings.TrimSuffix(strings.TrimSuffix(name, ".gz"), ".jsonl")
		return []evalInput{{name: name, graph: args[0], questions: args[1]}}, nil
	}
	var out []evalInput
	seen := map[string]int{}
	for _, dir := range args {
		in := evalInput{name: filepath.Base(filepath.Clean(dir)), questions: filepath.Join(dir, "questions.jsonl")}
		for _, name := range []string{"graph.jsonl.gz", "graph.jsonl"} {
			if isFile(filepath.Join(dir, name)) {
				in.graph = filepath.Join(dir, name)
				break
			}
		}
		if in.graph == "" {
			return nil, fmt.Errorf("%w: %s holds no graph.jsonl(.gz)", errUsage, dir)
		}
		if !isFile(in.questions) {
			return nil, fmt.Errorf("%w: %s holds no questions.jsonl", errUsage, dir)
		}
		if seen[in.name]++; seen[in.name] > 1 {
			in.name = fmt.Sprintf("%s-%d", in.name, seen[in.name])
		}
		out = append(out, in)
	}
	return out, nil
}

// compareEnv reads -compare's SPEC: an env file, or KEY=VALUE pairs.
func compareEnv(spec string) (map[string]string, error) {
	env := map[string]string{}
	var pairs []string
	if st, err := os.Stat(spec); err == nil && !st.IsDir() {
		f, err := os.Open(spec)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			pairs = append(pairs, strings.TrimPrefix(line, "export "))
		}
		if err := sc.Err(); err != nil {
			return nil, err
		}
	} else {
		pairs = strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == ' ' })
	}
	var errs []error
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || !strings.HasPrefix(k, "ENGRAM_") {
			errs = append(errs, fmt.Errorf("-compare: %q is not ENGRAM_NAME=value", p))
			continue
		}
		env[k] = strings.Trim(v, `"'`)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", errUsage, errors.Join(errs...))
	}
	return env, nil
}

func writeSVG(path string, r eval.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := eval.WriteSVG(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// progressBar draws progress on stderr when it is a terminal.
func progressBar(name string) func(done, total int) {
	if !isatty.IsTerminal(os.Stderr.Fd()) {
		return nil
	}
	return func(done, total int) {
		const width = 30
		n := width * done / total
		fmt.Fprintf(os.Stderr, "\r%s [%s%s] %d/%d", name, strings.Repeat("=", n), strings.Repeat(" ", width-n), done, total)
		if done == total {
			fmt.Fprint(os.Stderr, "\r\033[K")
		}
	}
}
