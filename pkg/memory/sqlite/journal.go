package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/engram-memory/engram/pkg/memory"
)

var _ memory.Journal = (*Store)(nil)

// PutPass implements memory.Journal.
func (s *Store) PutPass(ctx context.Context, p memory.Pass) error {
	if err := memory.CheckPass(p); err != nil {
		return err
	}
	doc, err := memory.EncodePass(p)
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	err = s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`INSERT OR REPLACE INTO passes(tenant, project, id, session, status, started, doc) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			p.Tenant, p.Project, p.ID, p.Session, string(p.Status), p.StartedAt.UnixNano(), doc)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: put pass: %w", err)
	}
	return nil
}

// GetPass implements memory.Journal.
func (s *Store) GetPass(ctx context.Context, in memory.ProjectRef, id string) (memory.Pass, error) {
	q, args := `SELECT doc FROM passes WHERE id = ? AND tenant = ?`, []any{id, in.Tenant}
	if in.Project != "" {
		q, args = q+` AND project = ?`, append(args, in.Project)
	}
	var doc []byte
	err := s.db.QueryRowContext(ctx, q+` LIMIT 1`, args...).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return memory.Pass{}, fmt.Errorf("pass %s: %w", id, memory.ErrNotFound)
	}
	if err != nil {
		return memory.Pass{}, fmt.Errorf("sqlite: get pass: %w", err)
	}
	p, err := memory.DecodePass(doc)
	if err != nil {
		return memory.Pass{}, fmt.Errorf("sqlite: %w", err)
	}
	return p, nil
}

// Passes implements memory.Journal.
func (s *Store) Passes(ctx context.Context, q memory.PassQuery) ([]memory.Pass, error) {
	where, args := []string{"tenant = ?"}, []any{q.Tenant}
	if q.Project != "" {
		where, args = append(where, "project = ?"), append(args, q.Project)
	}
	if q.Session != "" {
		where, args = append(where, "session = ?"), append(args, q.Session)
	}
	if q.Status != "" {
		where, args = append(where, "status = ?"), append(args, string(q.Status))
	}
	stmt := `SELECT doc FROM passes`
	if len(where) > 0 {
		stmt += ` WHERE ` + strings.Join(where, " AND ")
	}
	stmt += ` ORDER BY started DESC, id ASC LIMIT ?`
	args = append(args, memory.Limit(q.Limit))
	rows, err := s.db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list passes: %w", err)
	}
	defer rows.Close()
	var out []memory.Pass
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, fmt.Errorf("sqlite: list passes: %w", err)
		}
		p, err := memory.DecodePass(doc)
		if err != nil {
			return nil, fmt.Errorf("sqlite: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list passes: %w", err)
	}
	return out, nil
}
