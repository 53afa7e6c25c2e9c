package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

var _ memory.Letters = (*Store)(nil)

// ParkLetter implements memory.Letters.
func (s *Store) ParkLetter(ctx context.Context, key string, data []byte) error {
	if key == "" {
		return fmt.Errorf("%w: a parked letter needs a key", memory.ErrInvalid)
	}
	if data == nil {
		data = []byte{}
	}
	return s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`INSERT INTO parked_letters(key, parked, data) VALUES (?, ?, ?)
			ON CONFLICT(key) DO UPDATE SET data = excluded.data`, key, nanos(w.now), data)
		return err
	})
}

// ParkedLetters implements memory.Letters.
func (s *Store) ParkedLetters(ctx context.Context, limit int) ([]memory.ParkedLetter, error) {
	if limit <= 0 {
		limit = -1
	}
	st, err := s.stmt(ctx, `SELECT key, parked, data FROM parked_letters ORDER BY seq LIMIT ?`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: parked letters: %w", err)
	}
	rows, err := st.QueryContext(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: parked letters: %w", err)
	}
	defer rows.Close()
	var out []memory.ParkedLetter
	for rows.Next() {
		var l memory.ParkedLetter
		var at int64
		if err := rows.Scan(&l.Key, &at, &l.Data); err != nil {
			return nil, fmt.Errorf("sqlite: parked letters: %w", err)
		}
		l.Parked = time.Unix(0, at).UTC()
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: parked letters: %w", err)
	}
	return out, nil
}

// CountParkedLetters implements memory.Letters.
func (s *Store) CountParkedLetters(ctx context.Context) (int, error) {
	st, err := s.stmt(ctx, `SELECT COUNT(*) FROM parked_letters`)
	if err != nil {
		return 0, fmt.Errorf("sqlite: count parked letters: %w", err)
	}
	var n int
	if err := st.QueryRowContext(ctx).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count parked letters: %w", err)
	}
	return n, nil
}

// DropParkedLetter implements memory.Letters.
func (s *Store) DropParkedLetter(ctx context.Context, key string) error {
	return s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`DELETE FROM parked_letters WHERE key = ?`, key)
		return err
	})
}
