package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/runner/dlq"
	"github.com/engram-memory/engram/pkg/events"
)

func init() {
	register("dlq", "dead letters: dlq list | dlq show <seq> | dlq replay <seq>... | dlq replay -all | dlq drop <seq>...", dlqCmd)
}

var dlqCommands = []subcommand{
	{"list [-limit N] [-from SEQ]", "list dead letters: sequence, consumer, subject, deliveries, age, reason"},
	{"show SEQ", "print one letter with its headers and body"},
	{"replay SEQ... | replay -all", "republish letters to their original subjects (fix the cause first) and remove them"},
	{"drop SEQ...", "delete letters for good (events you decided not to process)"},
}

func dlqCmd(ctx context.Context, stdout io.Writer, args []string) error {
	if err := groupHelp("dlq", dlqCommands, args); err != nil {
		return err
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "list", "show", "replay", "drop":
	default:
		return fmt.Errorf("%w: unknown dlq command %q (list, show, replay, drop; engram dlq -h)", errUsage, sub)
	}
	var (
		limit int
		from  uint64
		all   bool
	)
	cfg, fs, err := loadConfig("dlq "+sub, rest, config.Conn, func(fs *flag.FlagSet) {
		switch sub {
		case "list":
			fs.IntVar(&limit, "limit", 100, "list at most this many dead letters")
			fs.Uint64Var(&from, "from", 0, "start at this DLQ sequence")
		case "replay":
			fs.BoolVar(&all, "all", false, "replay every dead letter")
		}
	})
	if err != nil {
		return err
	}
	nc, js, err := connect(cfg)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	store := dlq.NewStore(js, events.DefaultTopology().DLQ.Name)

	seqs := func() ([]uint64, error) {
		var out []uint64
		for _, a := range fs.Args() {
			n, err := strconv.ParseUint(a, 10, 64)
			if err != nil || n == 0 {
				return nil, fmt.Errorf("%w: %q is not a DLQ sequence number", errUsage, a)
			}
			out = append(out, n)
		}
		return out, nil
	}
	switch sub {
	case "list":
		letters, err := store.List(ctx, from, limit)
		if err != nil {
			return err
		}
		if len(letters) == 0 {
			out(stdout, "the DLQ is empty\n")
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		out(tw, "SEQ\tCONSUMER\tSUBJECT\tDELIVERIES\tWHEN\tREASON\n")
		for _, l := range letters {
			out(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", l.DLQSequence, l.Consumer, l.Subject, l.Deliveries, ago(l.Time), oneLine(l.Reason, 100))
		}
		return tw.Flush()
	case "show":
		ns, err := seqs()
		if err != nil {
			return err
		}
		if len(ns) != 1 {
			return fmt.Errorf("%w: dlq show <seq>", errUsage)
		}
		l, err := store.Get(ctx, ns[0])
		if err != nil {
			return err
		}
		showLetter(stdout, l)
		return nil
	case "replay":
		ns, err := seqs()
		if err != nil {
			return err
		}
		if all {
			if len(ns) > 0 {
				return fmt.Errorf("%w: give sequence numbers or -all, not both", errUsage)
			}
			letters, err := store.List(ctx, 0, 0)
			if err != nil {
				return err
			}
			for _, l := range letters {
				ns = append(ns, l.DLQSequence)
			}
		}
		if len(ns) == 0 {
			return fmt.Errorf("%w: dlq replay <seq>... or dlq replay -all", errUsage)
		}
		var errs []error
		for _, n := range ns {
			if err := store.Replay(ctx, n); err != nil {
				errs = append(errs, err)
				continue
			}
			out(stdout, "replayed %d\n", n)
		}
		return errors.Join(errs...)
	case "drop":
		ns, err := seqs()
		if err != nil {
			return err
		}
		if len(ns) == 0 {
			return fmt.Errorf("%w: dlq drop <seq>...", errUsage)
		}
		var errs []error
		for _, n := range ns {
			if err := store.Delete(ctx, n); err != nil {
				errs = append(errs, fmt.Errorf("drop %d: %w", n, err))
				continue
			}
			out(stdout, "dropped %d\n", n)
		}
		return errors.Join(errs...)
	}
	return fmt.Errorf("%w: unknown dlq command %q", errUsage, sub)
}

func showLetter(w io.Writer, l dlq.Letter) {
	out(w, "sequence:    %d\nconsumer:    %s\nreason:      %s\nsubject:     %s\nstream:      %s (sequence %d)\ndeliveries:  %d\nevent id:    %s\ndead since:  %s\n",
		l.DLQSequence, l.Consumer, l.Reason, l.Subject, l.Stream, l.Sequence, l.Deliveries, l.MsgID, l.Time.UTC().Format(time.RFC3339))
	if l.Truncated > 0 {
		out(w, "truncated:   body cut to %d of %d bytes to fit the maximum payload (cannot be replayed)\n", len(l.Data), l.Truncated)
	}
	if len(l.Header) > 0 {
		keys := make([]string, 0, len(l.Header))
		for k := range l.Header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out(w, "headers:\n")
		for _, k := range keys {
			out(w, "  %s: %s\n", k, strings.Join(l.Header[k], ", "))
		}
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, l.Data, "", "  ") == nil {
		out(w, "body:\n%s\n", pretty.String())
	} else {
		out(w, "body (%d bytes, not JSON):\n%q\n", len(l.Data), l.Data)
	}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
