package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

var _ memory.Erasure = (*Store)(nil)

// eraseTables says, for every table of the schema, how Erase finds the
// rows of a scope. TestEveryTableIsErased compares it with the schema, so
// a table added without its erasure fails the tests.
var eraseTables = map[string]string{
	"nodes":        "tenant, project, the document's session id (EraseScope.HoldsNode)",
	"node_vectors": "the erased nodes' rids",
	"node_paths":   "the erased nodes' rids",
	"edges":        "an end among the erased nodes' ids",
	"turns":        "tenant, project, session",
	"messages":     "tenant, project, session",
	"summaries":    "tenant, project, session",
	"cursors":      "tenant, project, session",
	"injections":   "tenant, project, session; and any of the tenant's that names an erased node",
	"briefs":       "tenant, project, session",
	"leases":       "tenant, project, session",
	"processed":    "tenant, project (tenant and project scopes)",
	"passes":       "tenant, project, session; the tenant's other passes are scrubbed (memory.ScrubPass)",
	// Raw messages with no columns of their own: internal/erase reads each
	// (memory.Letters through its StoreShelf) and drops those whose
	// subject or body names the scope.
	"parked_letters": "not by Erase: internal/erase drops the letters whose original subject or body names the scope",
}

// sessionTables are the per-session tables Erase deletes by the scope's
// columns, in order, with what each row counts as.
var sessionTables = []struct {
	table string
	count func(e *memory.Erased) *int
	text  string // the column whose text Seen gets; "" none
	kind  string // how the text is decoded: message, summary, injection, pass
}{
	{"messages", func(e *memory.Erased) *int { return &e.Messages }, "doc", "message"},
	{"turns", func(e *memory.Erased) *int { return &e.Turns }, "", ""},
	{"summaries", func(e *memory.Erased) *int { return &e.Summaries }, "doc", "summary"},
	{"cursors", func(e *memory.Erased) *int { return &e.Cursors }, "", ""},
	{"injections", func(e *memory.Erased) *int { return &e.Injections }, "ids", "injection"},
	{"briefs", func(e *memory.Erased) *int { return &e.Briefings }, "", ""},
	{"leases", func(e *memory.Erased) *int { return &e.Leases }, "", ""},
	{"passes", func(e *memory.Erased) *int { return &e.Passes }, "doc", "pass"},
}

// where is the condition and arguments of a scope on tables with tenant,
// project and session columns (withSession false: no session column).
func where(sc memory.EraseScope, withSession bool) (string, []any) {
	cond, args := []string{"tenant = ?"}, []any{sc.Tenant}
	if sc.Project != "" {
		cond, args = append(cond, "project = ?"), append(args, sc.Project)
	}
	if sc.Session != "" && withSession {
		cond, args = append(cond, "session = ?"), append(args, sc.Session)
	}
	return strings.Join(cond, " AND "), args
}

// Erase implements memory.Erasure in one transaction; the in-memory
// indexes (heads, lexical postings and dictionary, vector graphs, live
// edges, standing instructions, counters, interned ids) drop the erased
// nodes when it commits.
func (s *Store) Erase(ctx context.Context, sc memory.EraseScope, seen memory.Seen) (memory.Erased, error) {
	if err := sc.Check(); err != nil {
		return memory.Erased{}, err
	}
	if s.closed.Load() {
		return memory.Erased{}, fmt.Errorf("sqlite: erase: %w", ErrClosed)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return memory.Erased{}, fmt.Errorf("sqlite: erase: begin: %w", err)
	}
	er := eraser{ctx: ctx, tx: tx, sc: sc, seen: seen, gone: map[string]bool{}}
	if err := er.run(); err != nil {
		_ = tx.Rollback()
		return memory.Erased{}, fmt.Errorf("sqlite: erase %s: %w", sc, err)
	}
	if err := tx.Commit(); err != nil {
		return memory.Erased{}, fmt.Errorf("sqlite: erase %s: commit: %w", sc, err)
	}
	s.idx.erase(er.rids, er.ids)
	s.texts.drop(er.rids)
	s.briefs.Forget(sc.HoldsSession)
	return er.out, nil
}

// eraser is one erasure's transaction.
type eraser struct {
	ctx  context.Context
	tx   *sql.Tx
	sc   memory.EraseScope
	seen memory.Seen
	out  memory.Erased
	rids []uint32
	ids  []string
	gone map[string]bool // the erased node ids
}

func (er *eraser) text(t string) {
	if er.seen != nil && t != "" {
		er.seen(t)
	}
}

func (er *eraser) run() error {
	if err := er.nodes(); err != nil {
		return err
	}
	for _, t := range sessionTables {
		cond, args := where(er.sc, true)
		n, err := er.deleteRows(t.table, cond, args, t.text, t.kind)
		if err != nil {
			return err
		}
		*t.count(&er.out) += n
	}
	if er.sc.Session == "" {
		cond, args := where(er.sc, false)
		n, err := er.deleteRows("processed", cond, args, "", "")
		if err != nil {
			return err
		}
		er.out.Processed += n
	}
	if len(er.gone) > 0 {
		return er.references()
	}
	return nil
}

// nodes deletes the scope's nodes, their vectors, paths and edges.
func (er *eraser) nodes() error {
	cond, args := where(er.sc, false)
	rows, err := er.tx.QueryContext(er.ctx, `SELECT rid, doc FROM nodes WHERE `+cond, args...)
	if err != nil {
		return err
	}
	var rids []any
	for rows.Next() {
		var rid int64
		var doc []byte
		if err := rows.Scan(&rid, &doc); err != nil {
			rows.Close()
			return err
		}
		var n memory.Node
		if err := json.Unmarshal(doc, &n); err != nil {
			rows.Close()
			return fmt.Errorf("decode node %d: %w", rid, err)
		}
		if !er.sc.HoldsNode(&n) {
			continue
		}
		memory.NodeTexts(&n, er.seen)
		rids = append(rids, rid)
		er.rids = append(er.rids, uint32(rid))
		er.ids = append(er.ids, n.ID)
		er.gone[n.ID] = true
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return err
	}
	ids := anySlice(er.ids)
	for part := range slices.Chunk(ids, chunk) {
		in := placeholders(len(part))
		r, err := er.tx.ExecContext(er.ctx, `DELETE FROM edges WHERE src IN (`+in+`) OR dst IN (`+in+`)`, append(part, part...)...)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil {
			return err
		}
		er.out.Edges += int(n)
	}
	for part := range slices.Chunk(rids, chunk) {
		in := placeholders(len(part))
		for _, q := range []struct {
			stmt  string
			count *int
		}{
			{`DELETE FROM node_vectors WHERE rid IN (` + in + `)`, &er.out.Vectors},
			{`DELETE FROM node_paths WHERE rid IN (` + in + `)`, nil},
			{`DELETE FROM nodes WHERE rid IN (` + in + `)`, &er.out.Memories},
		} {
			r, err := er.tx.ExecContext(er.ctx, q.stmt, part...)
			if err != nil {
				return err
			}
			if q.count != nil {
				n, err := r.RowsAffected()
				if err != nil {
					return err
				}
				*q.count += int(n)
			}
		}
	}
	return nil
}

// deleteRows deletes the rows of table matching cond and returns how many;
// the text column, when named, goes to Seen decoded as kind.
func (er *eraser) deleteRows(table, cond string, args []any, col, kind string) (int, error) {
	if col == "" {
		r, err := er.tx.ExecContext(er.ctx, `DELETE FROM `+table+` WHERE `+cond, args...)
		if err != nil {
			return 0, err
		}
		n, err := r.RowsAffected()
		return int(n), err
	}
	rows, err := er.tx.QueryContext(er.ctx, `DELETE FROM `+table+` WHERE `+cond+` RETURNING `+col, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return 0, err
		}
		n++
		er.docTexts(kind, doc)
	}
	return n, rows.Err()
}

// docTexts passes a deleted document's texts to Seen (undecodable: the
// whole document).
func (er *eraser) docTexts(kind string, doc []byte) {
	if er.seen == nil {
		return
	}
	var err error
	switch kind {
	case "message":
		var m memory.Message
		if err = json.Unmarshal(doc, &m); err == nil {
			memory.MessageTexts(&m, er.seen)
		}
	case "summary":
		var sum memory.Summary
		if err = json.Unmarshal(doc, &sum); err == nil {
			er.text(sum.Content)
		}
	case "injection":
		var in memory.Injection
		if in, err = memory.DecodeInjection(doc); err == nil {
			er.text(in.Text)
		}
	case "pass":
		var p memory.Pass
		if p, err = memory.DecodePass(doc); err == nil {
			memory.PassTexts(&p, er.seen)
		}
	}
	if err != nil {
		er.text(string(doc))
	}
}

// references removes what the tenant's other sessions keep of the erased
// nodes: injection records naming one, journal entries holding one.
func (er *eraser) references() error {
	erased := func(id string) bool { return er.gone[id] }
	type injKey struct{ project, session, turn string }
	var drop []injKey
	rows, err := er.tx.QueryContext(er.ctx, `SELECT project, session, turn_id, ids FROM injections WHERE tenant = ?`, er.sc.Tenant)
	if err != nil {
		return err
	}
	for rows.Next() {
		var k injKey
		var doc []byte
		if err := rows.Scan(&k.project, &k.session, &k.turn, &doc); err != nil {
			rows.Close()
			return err
		}
		in, err := memory.DecodeInjection(doc)
		if err != nil || memory.InjectionNames(in, erased) {
			drop = append(drop, k)
			er.docTexts("injection", doc)
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return err
	}
	for _, k := range drop {
		if _, err := er.tx.ExecContext(er.ctx, `DELETE FROM injections WHERE tenant = ? AND project = ? AND session = ? AND turn_id = ?`,
			er.sc.Tenant, k.project, k.session, k.turn); err != nil {
			return err
		}
		er.out.Injections++
	}

	type passDoc struct {
		project, id string
		doc         []byte
	}
	var scrubbed []passDoc
	rows, err = er.tx.QueryContext(er.ctx, `SELECT project, id, doc FROM passes WHERE tenant = ?`, er.sc.Tenant)
	if err != nil {
		return err
	}
	for rows.Next() {
		var (
			project, id string
			doc         []byte
		)
		if err := rows.Scan(&project, &id, &doc); err != nil {
			rows.Close()
			return err
		}
		b, removed, err := memory.ScrubPassDoc(doc, erased, er.seen)
		if err != nil {
			rows.Close()
			return err
		}
		if removed == 0 {
			continue
		}
		er.out.JournalEntries += removed
		scrubbed = append(scrubbed, passDoc{project, id, b})
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return err
	}
	for _, p := range scrubbed {
		if _, err := er.tx.ExecContext(er.ctx, `UPDATE passes SET doc = ? WHERE tenant = ? AND project = ? AND id = ?`,
			p.doc, er.sc.Tenant, p.project, p.id); err != nil {
			return err
		}
	}
	return nil
}

// erase drops erased nodes from the in-memory side: heads, gates, ids,
// counters, standing instructions, lexical postings (and the dictionary's
// terms no other node holds), vectors (erased from the graphs, not left
// as tombstones) and live edges; the shared strings (project and session
// names among them) no node uses any more go.
// While the load runs, the rows are marked touched so that a chunk read
// before the erasure does not bring them back.
func (x *index) erase(rids []uint32, ids []string) {
	if len(rids) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	gone := make(map[uint32]scopeOf, len(rids))
	defer func() { x.scopes.removeAll(gone) }()
	for _, rid := range rids {
		if x.loading && x.touched != nil {
			x.touched[rid] = struct{}{}
		}
		if int(rid) < len(x.heads) {
			if prev := x.heads[rid]; prev != nil {
				x.count(prev, -1)
				if prev.standing() {
					pp := x.projectOf(prev)
					x.standing[pp] = slices.DeleteFunc(x.standing[pp], func(r uint32) bool { return r == rid })
					if len(x.standing[pp]) == 0 {
						delete(x.standing, pp)
					}
				}
				// Out of its conversation's list while its head still
				// places it (a list must hold live heads only: it is
				// sorted and searched by them).
				if int(rid) < len(x.gates) {
					x.convRemove(x.gates[rid].conv(), rid, prev)
					gone[rid] = x.scopeOfHead(prev, &x.gates[rid])
				}
				x.heads[rid] = nil
			}
		}
		if int(rid) < len(x.gates) {
			x.gates[rid] = gate{}
		}
	}
	x.lex.removeAll(rids)
	for _, id := range ids {
		delete(x.byID, id)
		for _, e := range x.edges[id] {
			other := e.Dst
			if other == id {
				other = e.Src
			}
			if other == id {
				continue
			}
			x.edges[other] = slices.DeleteFunc(x.edges[other], func(o memory.Edge) bool { return o.Src == id || o.Dst == id })
			if len(x.edges[other]) == 0 {
				delete(x.edges, other)
			}
		}
		delete(x.edges, id)
	}
	for _, fl := range x.flat {
		for _, id := range ids {
			fl.erase(id)
		}
	}
	for _, ix := range x.vecs {
		ix.Erase(ids...)
	}
	x.lex.compact()
	x.pruneStrings()
}

// erase removes id's vector like remove and keeps nothing of it: its
// logged vectors are dropped from the replay log and the graph being built
// from the exact-search set erases it (buildVectors) instead of leaving a
// tombstone.
func (f *flatVecs) erase(id string) {
	if i, ok := f.at[id]; ok {
		f.codes[i], f.ids[i] = nil, ""
		delete(f.at, id)
	}
	for i := range f.log {
		if f.log[i].id == id {
			f.log[i].vec = nil
		}
	}
	f.log = append(f.log, vecOp{id: id})
	f.erased = append(f.erased, id)
}

// Purge implements memory.Erasure: the write-ahead log is checkpointed
// into the database and truncated, and the database is rewritten by
// VACUUM, so that neither file keeps deleted rows in free pages or free
// space inside pages (with the log truncated, its old frames are gone
// with it). Writes wait meanwhile; reads go on. Blocks the file system
// freed (the old log, the file's shrunk tail, VACUUM's temporary file) are
// the disk's: use an encrypted disk for those.
func (s *Store) Purge(ctx context.Context) (memory.PurgeReport, error) {
	var rep memory.PurgeReport
	if s.closed.Load() {
		return rep, fmt.Errorf("sqlite: purge: %w", ErrClosed)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.truncateWAL(ctx); err != nil {
		return rep, err
	}
	if _, err := s.db.ExecContext(ctx, `VACUUM`); err != nil {
		return rep, fmt.Errorf("sqlite: purge: vacuum: %w", err)
	}
	if err := s.truncateWAL(ctx); err != nil {
		return rep, err
	}
	rep.Done = append(rep.Done, "sqlite: database rewritten (VACUUM), write-ahead log checkpointed and truncated")
	return rep, nil
}

// truncateWAL checkpoints the whole log and truncates it, retrying while
// readers hold frames (busy).
func (s *Store) truncateWAL(ctx context.Context) error {
	for {
		var busy, logFrames, done int
		if err := s.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &done); err != nil {
			return fmt.Errorf("sqlite: purge: checkpoint: %w", err)
		}
		if busy == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sqlite: purge: checkpoint: readers hold the log: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// SessionIDs implements memory.Erasure.
func (s *Store) SessionIDs(ctx context.Context, p memory.ProjectRef) ([]string, error) {
	var parts []string
	var args []any
	for _, t := range sessionTables {
		parts = append(parts, `SELECT session FROM `+t.table+` WHERE tenant = ? AND project = ?`)
		args = append(args, p.Tenant, p.Project)
	}
	rows, err := s.db.QueryContext(ctx, strings.Join(parts, " UNION ")+` ORDER BY 1`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: session ids: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlite: session ids: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: session ids: %w", err)
	}
	return out, nil
}

// Summaries implements memory.Erasure.
func (s *Store) Summaries(ctx context.Context, ref memory.SessionRef) ([]memory.Summary, error) {
	if err := memory.CheckSession(ref); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT doc FROM summaries WHERE tenant = ? AND project = ? AND session = ? ORDER BY seq`,
		ref.Tenant, ref.Project, ref.Session)
	if err != nil {
		return nil, fmt.Errorf("sqlite: summaries: %w", err)
	}
	defer rows.Close()
	var out []memory.Summary
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, fmt.Errorf("sqlite: summaries: %w", err)
		}
		var sum memory.Summary
		if err := json.Unmarshal(doc, &sum); err != nil {
			return nil, fmt.Errorf("sqlite: decode summary: %w", err)
		}
		out = append(out, sum)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: summaries: %w", err)
	}
	return out, nil
}

// rawPiece and rawOverlap: ScanRaw reads a file in pieces of rawPiece
// bytes that overlap by rawOverlap, so that a text shorter than the
// overlap that spans two pieces is whole in one of them.
const (
	rawPiece   = 4 << 20
	rawOverlap = 4 << 10
)

// ScanRaw calls fn with the bytes of the database file and of its
// write-ahead log as they are on disk, free pages and the free space of
// pages included (a verification of an erasure looks there for what it
// erased), in overlapping pieces; where names the file and the piece's
// offset.
func (s *Store) ScanRaw(ctx context.Context, fn func(where string, data []byte) error) error {
	for _, path := range []string{s.path, s.path + "-wal", s.path + "-journal"} {
		if err := scanFile(ctx, path, fn); err != nil {
			return fmt.Errorf("sqlite: scan %s: %w", path, err)
		}
	}
	return nil
}

func scanFile(ctx context.Context, path string, fn func(where string, data []byte) error) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, rawPiece)
	var off int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := f.ReadAt(buf, off)
		if n > 0 {
			if ferr := fn(fmt.Sprintf("%s at byte %d", filepath.Base(path), off), buf[:n]); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) || n < len(buf) {
			return nil
		}
		if err != nil {
			return err
		}
		off += int64(n - rawOverlap)
	}
}

// HoldsText reports where a live row still holds text (a table name), or
// "" when none does: a verification tells a text that another scope's
// records hold too (the same words in another tenant's memory) from one
// left behind.
func (s *Store) HoldsText(ctx context.Context, text string) (string, error) {
	for _, q := range []struct{ table, col string }{
		{"nodes", "doc"}, {"nodes", "id"}, {"edges", "src"}, {"edges", "dst"}, {"node_paths", "path"},
		{"messages", "doc"}, {"summaries", "doc"}, {"injections", "ids"}, {"passes", "doc"},
	} {
		var one int
		err := s.db.QueryRowContext(ctx, `SELECT 1 FROM `+q.table+` WHERE instr(CAST(`+q.col+` AS TEXT), ?) > 0 LIMIT 1`, text).Scan(&one)
		if err == nil {
			return q.table, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return "", fmt.Errorf("sqlite: holds text: %w", err)
		}
	}
	return "", nil
}
