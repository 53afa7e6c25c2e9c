package erase

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// WriteText writes the receipt for a person to read.
func (r Receipt) WriteText(w io.Writer) {
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }
	p("erased %s (%s)\n", r.Scope, r.Scope.Kind())
	p("  from %s to %s (%s), %d round(s)\n", r.StartedAt.Format(time.RFC3339), r.FinishedAt.Format(time.RFC3339),
		r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond), r.Rounds)
	s := r.Store
	p("  store: %d memories, %d vectors, %d edges; %d transcript messages in %d turns, %d summaries, %d consolidation cursors;\n",
		s.Memories, s.Vectors, s.Edges, s.Messages, s.Turns, s.Summaries, s.Cursors)
	p("         %d injection records, %d briefing flags, %d leases, %d processed-event records; %d consolidation passes, %d journal entries of other passes\n",
		s.Injections, s.Briefings, s.Leases, s.Processed, s.Passes, s.JournalEntries)
	if len(r.Streams) > 0 {
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(r.Streams)) {
			parts = append(parts, fmt.Sprintf("%s %d", name, r.Streams[name]))
		}
		p("  stream messages of the scope (deleted): %s\n", strings.Join(parts, ", "))
	}
	if r.ParkedLetters > 0 {
		p("  parked dead letters (dropped from the store): %d\n", r.ParkedLetters)
	}
	for _, d := range r.Persistence.Done {
		p("  persistence: %s\n", d)
	}
	for _, d := range r.Persistence.Incomplete {
		p("  NOT DONE: %s\n", d)
	}
	for _, d := range r.Incomplete {
		p("  NOT DONE: %s\n", d)
	}
	if v := r.Verify; v != nil {
		p("  verify: looked for %d texts of the scope (%d too short to look for) in:\n", v.Texts, v.TooShort)
		for _, s := range v.Searched {
			p("    %s\n", s)
		}
		switch {
		case v.FoundCount == 0 && v.KeptCount == 0:
			p("  verify: found nothing of the scope\n")
		case v.FoundCount == 0:
			p("  verify: nothing of the scope left; %d text(s) of it are also another scope's, kept there:\n", v.KeptCount)
		default:
			p("  verify: FOUND %d text(s) of the scope left behind (and %d that another scope keeps too):\n", v.FoundCount, v.KeptCount)
		}
		for _, f := range v.Found {
			if f.KeptBy != "" {
				p("    %s: %s, kept: %s\n", f.Where, f.What, f.KeptBy)
			} else {
				p("    %s: %s\n", f.Where, f.What)
			}
		}
		if n := v.FoundCount + v.KeptCount; n > len(v.Found) {
			p("    ... and %d more\n", n-len(v.Found))
		}
	}
	if r.Complete() {
		p("complete\n")
	} else {
		p("INCOMPLETE: see above\n")
	}
}
