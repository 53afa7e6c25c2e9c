// Package memio reads and writes a memory graph as JSON lines, for
// `engram memory import` and `engram memory export`: seeding a graph,
// inspecting it, moving it between stores.
//
// Each line is one object with "type": "node" or "type": "edge" and the
// fields of memory.Node or memory.Edge in snake_case. A node needs at least a
// subkind and a label or body; every other field takes its default (id
// generated, scope from the project, source agent, confidence 0.5, ...).
// updated_at and the other timestamps are RFC 3339. An edge needs src, dst and
// relation. Vectors are not exported: an imported node without a vector is
// embedded by the configured embedder (the readiness backlog).
//
// Validation is all or nothing: every line is checked first, and an invalid
// line is reported with its line number before anything is written. The
// writing goes in chunks (WriteChunk nodes, then the edges): on Redis one
// PutBatch is one transaction that holds the server while it runs, and a
// 100,000-node file in one transaction would block every other client for
// minutes and outrun the client's read timeout. Should the store fail part
// way, the chunks written stay; importing the same file again completes the
// import without duplicating anything (writes replace by id).
package memio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// Store is what import and export need of a store.
type Store interface {
	GetMany(ctx context.Context, ids []string) ([]memory.Node, error)
	PutBatch(ctx context.Context, nodes []memory.Node, edges []memory.Edge) error
	Scan(ctx context.Context, node func(memory.Node) error, edge func(memory.Edge) error) error
}

// ErrInvalidLine wraps every problem of an import file.
var ErrInvalidLine = errors.New("memio: invalid line")

// MaxLine is the longest line accepted (bytes).
const MaxLine = 1 << 20

// idPattern keeps ids printable and inert in a prompt (they are shown to models).
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$`)

type line struct {
	Type string `json:"type"`
}

type nodeLine struct {
	Type string `json:"type"`
	memory.Node
}

// exportNode is a node line as Export writes it: the fields the format
// names are written even when empty (memory.Node leaves an empty session id
// and no paths out), so that a reader sees every node line with the same
// keys.
type exportNode struct {
	Type string `json:"type"`
	memory.Node
	SessionID string   `json:"session_id"`
	Paths     []string `json:"paths"`
}

type edgeLine struct {
	Type string `json:"type"`
	memory.Edge
}

// Stats says what an import wrote.
type Stats struct {
	Nodes int `json:"nodes"`
	Edges int `json:"edges"`
}

// WriteChunk is how many nodes (and four times as many edges) one PutBatch
// of an import writes.
const WriteChunk = 500

// Import reads JSON lines from r, validates all of them, then writes them in
// chunks of WriteChunk. It returns how many nodes and edges it wrote.
func Import(ctx context.Context, st Store, r io.Reader, now time.Time) (Stats, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), MaxLine)
	var (
		nodes []memory.Node
		edges []memory.Edge
		errs  []error
		ids   = map[string]bool{}
		no    int
	)
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w %d: %s", ErrInvalidLine, no, fmt.Sprintf(format, a...)))
	}
	for sc.Scan() {
		no++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var l line
		if err := json.Unmarshal(raw, &l); err != nil {
			bad("not a JSON object: %v", err)
			continue
		}
		switch l.Type {
		case "node":
			var nl nodeLine
			if err := strictDecode(raw, &nl); err != nil {
				bad("node: %v", err)
				continue
			}
			if nl.ID != "" && !idPattern.MatchString(nl.ID) {
				bad("node: id %q may hold only letters, digits and _ . : - (at most 128)", nl.ID)
				continue
			}
			n, err := memory.PrepareNew(nl.Node, now)
			if err != nil {
				bad("%v", err)
				continue
			}
			if ids[n.ID] {
				bad("node: id %q appears twice", n.ID)
				continue
			}
			ids[n.ID] = true
			nodes = append(nodes, n)
		case "edge":
			var el edgeLine
			if err := strictDecode(raw, &el); err != nil {
				bad("edge: %v", err)
				continue
			}
			e, err := memory.PrepareEdge(el.Edge, now)
			if err != nil {
				bad("%v", err)
				continue
			}
			edges = append(edges, e)
		default:
			bad("type must be \"node\" or \"edge\", got %q", l.Type)
		}
	}
	if err := sc.Err(); err != nil {
		return Stats{}, fmt.Errorf("memio: read line %d: %w", no+1, err)
	}
	// Edges must join nodes of this file or of the store.
	var missing []string
	for _, e := range edges {
		for _, id := range []string{e.Src, e.Dst} {
			if !ids[id] {
				missing = append(missing, id)
			}
		}
	}
	if len(missing) > 0 {
		found, err := st.GetMany(ctx, missing)
		if err != nil {
			return Stats{}, fmt.Errorf("memio: check edge ends: %w", err)
		}
		for _, n := range found {
			ids[n.ID] = true
		}
		for _, id := range missing {
			if !ids[id] {
				errs = append(errs, fmt.Errorf("%w: an edge names node %q, which is neither in the file nor in the store", ErrInvalidLine, id))
				ids[id] = true // report once
			}
		}
	}
	if len(errs) > 0 {
		return Stats{}, errors.Join(errs...)
	}
	if len(nodes) == 0 && len(edges) == 0 {
		return Stats{}, nil
	}
	var done Stats
	for i := 0; i < len(nodes); i += WriteChunk {
		chunk := nodes[i:min(i+WriteChunk, len(nodes))]
		if err := st.PutBatch(ctx, chunk, nil); err != nil {
			return done, fmt.Errorf("memio: write nodes %d-%d of %d (those before are written; import the file again to finish): %w",
				i+1, i+len(chunk), len(nodes), err)
		}
		done.Nodes += len(chunk)
	}
	for i := 0; i < len(edges); i += 4 * WriteChunk {
		chunk := edges[i:min(i+4*WriteChunk, len(edges))]
		if err := st.PutBatch(ctx, nil, chunk); err != nil {
			return done, fmt.Errorf("memio: write edges %d-%d of %d (the nodes and the edges before are written; import the file again to finish): %w",
				i+1, i+len(chunk), len(edges), err)
		}
		done.Edges += len(chunk)
	}
	return done, nil
}

// strictDecode decodes one line, rejecting fields the model does not have so
// that a typo does not silently lose data.
func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Export writes every node and edge of the store as JSON lines, nodes first
// within the order the store scans them.
func Export(ctx context.Context, st Store, w io.Writer) (Stats, error) {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	var s Stats
	err := st.Scan(ctx, func(n memory.Node) error {
		s.Nodes++
		line := exportNode{Type: "node", Node: n, SessionID: n.SessionID, Paths: n.Paths}
		if line.Paths == nil {
			line.Paths = []string{}
		}
		return enc.Encode(line)
	}, func(e memory.Edge) error {
		s.Edges++
		return enc.Encode(edgeLine{Type: "edge", Edge: e})
	})
	if err != nil {
		return s, fmt.Errorf("memio: export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return s, fmt.Errorf("memio: export: %w", err)
	}
	return s, nil
}
