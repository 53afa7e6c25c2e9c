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
// Portability: ExportSelection writes one project's memories, or one
// session's (`engram memory export -project P [-session S]`), and with
// Transcripts the sessions' messages ("type": "message": project_id,
// session_id and the fields of memory.Message) and summaries ("type":
// "summary": project_id, session_id and memory.Summary), oldest first: a
// person's data, whole, in a file another Engram imports. Import appends
// the messages turn by turn (a turn already stored is left as it is:
// memory.Sessions.AppendTranscript is once per turn id; message ids are
// the importing store's) and saves the summaries it does not hold yet.
//
// Tenants: an import and an export are of one tenant ("" the default
// tenant, as everything was before tenants). Export writes that tenant's
// nodes (tenant_id on each line, left out for the default tenant) and the
// edges between them, nothing of another tenant. Import writes every node
// into its tenant: a line naming another tenant_id is invalid, an edge may
// name only nodes of the file or of the tenant's stored graph, and an id
// another tenant holds is refused by the store (an id never moves between
// tenants). Repeated texts merge only within the tenant.
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
	"compress/gzip"
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
	DigestOwners(ctx context.Context, p memory.ProjectRef, digests []string) (map[string]memory.Node, error)
	Scan(ctx context.Context, node func(memory.Node) error, edge func(memory.Edge) error) error
	// Transcripts (message and summary lines).
	AppendTranscript(ctx context.Context, s memory.SessionRef, turnID string, msgs []memory.Message) ([]memory.Message, bool, error)
	SaveSummary(ctx context.Context, s memory.SessionRef, sum memory.Summary) error
	Summaries(ctx context.Context, s memory.SessionRef) ([]memory.Summary, error)
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

// nodeLinePrefix starts a node line as Export writes it.
var nodeLinePrefix = []byte(`{"type":"node",`)

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
	// Merged counts node lines whose text repeats an earlier node of the
	// same project (the same digest, in the file or in the store): each was
	// merged into that node (memory.Reinforce) instead of written, and edges
	// naming it were moved to that node.
	Merged int `json:"merged"`
	// Messages and Summaries are the transcript lines written (an import:
	// of turns and summaries not stored before).
	Messages  int `json:"messages,omitempty"`
	Summaries int `json:"summaries,omitempty"`
}

// MaxReported is how many invalid lines an import reports one by one; the
// rest are counted.
const MaxReported = 20

// Progress is how far an import is, for a progress display.
type Progress struct {
	// Lines read and validated so far (Reading), or every line (Writing).
	Lines int
	// Written nodes and edges so far, of Total (0 while reading).
	Written, Total int
}

// Option configures Import.
type Option func(*options)

type options struct {
	progress func(Progress)
	every    int
	written  func([]memory.Node)
}

// WithWritten calls fn with every chunk of nodes once it is written (to
// announce them: engram memory import publishes memory_changed).
func WithWritten(fn func(nodes []memory.Node)) Option {
	return func(o *options) { o.written = fn }
}

// WithProgress calls fn every every lines while reading and after every
// chunk written (and once at the end of each phase).
func WithProgress(every int, fn func(Progress)) Option {
	return func(o *options) { o.progress, o.every = fn, max(every, 1) }
}

// Decompress returns r's content, gunzipped when r starts with gzip's magic
// bytes: an import file may be plain or gzip.
func Decompress(r io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 64*1024)
	head, err := br.Peek(2)
	if err == nil && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("memio: gzip: %w", err)
		}
		return zr, nil
	}
	return br, nil
}

// WriteChunk is how many nodes (and four times as many edges) one PutBatch
// of an import writes.
const WriteChunk = 500

// Import reads JSON lines from r, validates all of them, then writes them
// into tenant's graph in chunks of WriteChunk. It returns how many nodes and
// edges it wrote.
//
// Invalid lines are reported by number, the first MaxReported one by one
// and the others counted; nothing is written then.
func Import(ctx context.Context, st Store, r io.Reader, tenant string, now time.Time, opts ...Option) (Stats, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	report := func(p Progress) {
		if o.progress != nil {
			o.progress(p)
		}
	}
	if err := memory.CheckTenant(tenant); err != nil {
		return Stats{}, fmt.Errorf("memio: %w: %v", memory.ErrInvalid, err)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), MaxLine)
	var (
		nodes []memory.Node
		edges []memory.Edge
		errs  []error
		ids   = map[string]bool{}
		// first node of each project and digest, by index in nodes
		byDigest = map[[2]string]int{}
		alias    = map[string]string{} // merged id -> the id it was merged into
		merged   int
		no       int
		tr       transcriptImport
	)
	unreported := 0
	bad := func(format string, a ...any) {
		if len(errs) >= MaxReported {
			unreported++
			return
		}
		errs = append(errs, fmt.Errorf("%w %d: %s", ErrInvalidLine, no, fmt.Sprintf(format, a...)))
	}
	for sc.Scan() {
		no++
		if o.progress != nil && no%o.every == 0 {
			report(Progress{Lines: no})
		}
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var l line
		if bytes.HasPrefix(raw, nodeLinePrefix) {
			// What Export writes: the node's strict decoding below is the
			// only one (decoding the type first as well cost a tenth of
			// an import's time).
			l.Type = "node"
		} else if err := json.Unmarshal(raw, &l); err != nil {
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
			if nl.Type != "node" {
				bad("node: \"type\" given twice")
				continue
			}
			if nl.ID != "" && !idPattern.MatchString(nl.ID) {
				bad("node: id %q may hold only letters, digits and _ . : - (at most 128)", nl.ID)
				continue
			}
			if nl.TenantID != "" && nl.TenantID != tenant {
				bad("node: of tenant %q, in an import for tenant %q (import it for its tenant, or drop tenant_id to take the import's)",
					memory.Neutralise(nl.TenantID), memory.Neutralise(tenant))
				continue
			}
			nl.TenantID = tenant
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
			key := [2]string{n.ProjectID, n.Digest}
			if j, dup := byDigest[key]; dup {
				nodes[j] = mergeInto(nodes[j], n, now)
				alias[n.ID] = nodes[j].ID
				merged++
				continue
			}
			byDigest[key] = len(nodes)
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
		case "message", "summary":
			tr.add(l.Type, raw, tenant, now, bad)
		default:
			bad("type must be \"node\", \"edge\", \"message\" or \"summary\", got %q", l.Type)
		}
	}
	if err := sc.Err(); err != nil {
		return Stats{}, fmt.Errorf("memio: read line %d: %w", no+1, err)
	}
	report(Progress{Lines: no})
	// An edge naming a merged node names the node it was merged into; one
	// that then joins a node to itself is dropped.
	kept := edges[:0]
	for _, e := range edges {
		if to, ok := alias[e.Src]; ok {
			e.Src = to
		}
		if to, ok := alias[e.Dst]; ok {
			e.Dst = to
		}
		if e.Src != e.Dst {
			kept = append(kept, e)
		}
	}
	edges = kept
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
			if n.TenantID == tenant {
				ids[n.ID] = true // another tenant's node is as absent as one that never was
			}
		}
		for _, id := range missing {
			if !ids[id] {
				if len(errs) < MaxReported {
					errs = append(errs, fmt.Errorf("%w: an edge names node %q, which is neither in the file nor in the store", ErrInvalidLine, id))
				} else {
					unreported++
				}
				ids[id] = true // report once
			}
		}
	}
	if unreported > 0 {
		errs = append(errs, fmt.Errorf("%w: %d more problems not listed (the first %d are)", ErrInvalidLine, unreported, MaxReported))
	}
	if len(errs) > 0 {
		return Stats{}, errors.Join(errs...)
	}
	// A node whose text another stored node of its project holds would be
	// refused by the write: merge it into that node instead.
	nodes, edges, n, err := mergeStored(ctx, st, tenant, nodes, edges, now)
	if err != nil {
		return Stats{}, err
	}
	merged += n
	done := Stats{Merged: merged}
	for i := 0; i < len(nodes); i += WriteChunk {
		chunk := nodes[i:min(i+WriteChunk, len(nodes))]
		if err := st.PutBatch(ctx, chunk, nil); err != nil {
			return done, fmt.Errorf("memio: write nodes %d-%d of %d (those before are written; import the file again to finish): %w",
				i+1, i+len(chunk), len(nodes), err)
		}
		done.Nodes += len(chunk)
		if o.written != nil {
			o.written(chunk)
		}
		report(Progress{Lines: no, Written: done.Nodes, Total: len(nodes) + len(edges)})
	}
	for i := 0; i < len(edges); i += 4 * WriteChunk {
		chunk := edges[i:min(i+4*WriteChunk, len(edges))]
		if err := st.PutBatch(ctx, nil, chunk); err != nil {
			return done, fmt.Errorf("memio: write edges %d-%d of %d (the nodes and the edges before are written; import the file again to finish): %w",
				i+1, i+len(chunk), len(edges), err)
		}
		done.Edges += len(chunk)
		report(Progress{Lines: no, Written: done.Nodes + done.Edges, Total: len(nodes) + len(edges)})
	}
	if err := tr.write(ctx, st, &done); err != nil {
		return done, err
	}
	return done, nil
}

// mergeInto merges a repeated node into the first one of its text: the
// first is reinforced, and keeps the later of the two update times (an
// import replays history; it is not a new assertion now).
func mergeInto(first, again memory.Node, now time.Time) memory.Node {
	n := memory.Reinforce(first, again, now)
	n.UpdatedAt = first.UpdatedAt
	if again.UpdatedAt.After(n.UpdatedAt) {
		n.UpdatedAt = again.UpdatedAt
	}
	return n
}

// mergeStored merges every node whose digest a stored node of another id
// holds into that node (reinforcing it) and moves edges naming it there.
func mergeStored(ctx context.Context, st Store, tenant string, nodes []memory.Node, edges []memory.Edge, now time.Time) ([]memory.Node, []memory.Edge, int, error) {
	if len(nodes) == 0 {
		return nodes, edges, 0, nil
	}
	byProject := map[string][]string{}
	for _, n := range nodes {
		byProject[n.ProjectID] = append(byProject[n.ProjectID], n.Digest)
	}
	owners := map[[2]string]memory.Node{}
	for p, ds := range byProject {
		found, err := st.DigestOwners(ctx, memory.ProjectRef{Tenant: tenant, Project: p}, ds)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("memio: check stored texts: %w", err)
		}
		for d, n := range found {
			owners[[2]string{p, d}] = n
		}
	}
	if len(owners) == 0 {
		return nodes, edges, 0, nil
	}
	alias := map[string]string{}
	used := map[[2]string]bool{}
	out := nodes[:0]
	for _, n := range nodes {
		key := [2]string{n.ProjectID, n.Digest}
		if o, ok := owners[key]; ok && o.ID != n.ID {
			owners[key] = mergeInto(o, n, now)
			used[key] = true
			alias[n.ID] = o.ID
			continue
		}
		out = append(out, n)
	}
	for key := range used {
		out = append(out, owners[key]) // the reinforced stored node, rewritten by id
	}
	keptEdges := edges[:0]
	for _, e := range edges {
		if to, ok := alias[e.Src]; ok {
			e.Src = to
		}
		if to, ok := alias[e.Dst]; ok {
			e.Dst = to
		}
		if e.Src != e.Dst {
			keptEdges = append(keptEdges, e)
		}
	}
	return out, keptEdges, len(alias), nil
}

// strictDecode decodes one line, rejecting fields the model does not have so
// that a typo does not silently lose data.
func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Export writes every node of tenant and every edge between them as JSON
// lines, in the order the store scans them (an edge after its ends).
// Nothing of another tenant is written. ExportSelection writes a project,
// a session and transcripts.
func Export(ctx context.Context, st Store, w io.Writer, tenant string) (Stats, error) {
	return ExportSelection(ctx, st, w, Selection{Tenant: tenant})
}
