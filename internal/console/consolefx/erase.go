package consolefx

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/engram-memory/engram/internal/console"
	"github.com/engram-memory/engram/internal/erase"
	"github.com/engram-memory/engram/pkg/memory"
)

// eraser is the console's erase page over the erase package: the erasure
// of engram memory erase, verified (the store's files and every stream
// read for any text of the scope), its receipt shown whole.
type eraser struct{ e *erase.Eraser }

func (a eraser) Erase(ctx context.Context, s console.EraseScope) (console.Receipt, error) {
	rc, err := a.e.Erase(ctx, memory.EraseScope{Tenant: s.Tenant, Project: s.Project, Session: s.Session}, erase.Options{Verify: true})
	out := console.Receipt{Scope: s, At: rc.FinishedAt, Complete: err == nil && rc.Complete()}
	if b, jerr := json.Marshal(rc.Store); jerr == nil {
		var counts map[string]int
		if json.Unmarshal(b, &counts) == nil {
			for _, k := range slices.Sorted(maps.Keys(counts)) {
				out.Counts = append(out.Counts, console.Count{Kind: strings.ReplaceAll(k, "_", " "), N: int64(counts[k])})
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rc.Streams)) {
		out.Counts = append(out.Counts, console.Count{Kind: "messages of " + name, N: int64(rc.Streams[name])})
	}
	var text strings.Builder
	rc.WriteText(&text)
	out.Text = text.String()
	return out, err
}
