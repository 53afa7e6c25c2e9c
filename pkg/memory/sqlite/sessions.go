package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// AppendTranscript implements memory.Sessions.
func (s *Store) AppendTranscript(ctx context.Context, ref memory.SessionRef, turnID string, msgs []memory.Message) ([]memory.Message, bool, error) {
	if err := memory.CheckSession(ref); err != nil {
		return nil, false, err
	}
	prepared, err := memory.PrepareTranscript(ref.Tenant, turnID, msgs, s.now())
	if err != nil {
		return nil, false, err
	}
	var out []memory.Message
	fresh := false
	err = s.write(ctx, func(w *wtx) error {
		var one int
		err := w.tx.QueryRowContext(ctx, `SELECT 1 FROM turns WHERE tenant = ? AND project = ? AND session = ? AND turn_id = ?`, ref.Tenant, ref.Project, ref.Session, turnID).Scan(&one)
		if err == nil {
			out, err = queryMessages(ctx, w.tx, `SELECT doc FROM messages WHERE tenant = ? AND project = ? AND session = ? AND turn_id = ? ORDER BY id`, ref.Tenant, ref.Project, ref.Session, turnID)
			return err
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: append transcript: %w", err)
		}
		var last int64
		if err := w.tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM messages WHERE tenant = ? AND project = ? AND session = ?`, ref.Tenant, ref.Project, ref.Session).Scan(&last); err != nil {
			return fmt.Errorf("sqlite: append transcript: %w", err)
		}
		for i := range prepared {
			prepared[i].ID = last + int64(i) + 1
			doc, err := json.Marshal(prepared[i])
			if err != nil {
				return fmt.Errorf("sqlite: encode message: %w", err)
			}
			if _, err := w.exec(`INSERT INTO messages(tenant, project, session, id, turn_id, doc) VALUES (?, ?, ?, ?, ?, ?)`,
				ref.Tenant, ref.Project, ref.Session, prepared[i].ID, turnID, doc); err != nil {
				return err
			}
		}
		if _, err := w.exec(`INSERT INTO turns(tenant, project, session, turn_id) VALUES (?, ?, ?, ?)`, ref.Tenant, ref.Project, ref.Session, turnID); err != nil {
			return err
		}
		out, fresh = prepared, true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, fresh, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func queryMessages(ctx context.Context, q querier, query string, args ...any) ([]memory.Message, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: messages: %w", err)
	}
	defer rows.Close()
	var out []memory.Message
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, fmt.Errorf("sqlite: messages: %w", err)
		}
		var m memory.Message
		if err := json.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("sqlite: decode message: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: messages: %w", err)
	}
	return out, nil
}

// Messages implements memory.Sessions.
func (s *Store) Messages(ctx context.Context, ref memory.SessionRef, afterID int64, limit int) ([]memory.Message, error) {
	if err := memory.CheckSession(ref); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = -1
	}
	return queryMessages(ctx, s.db, `SELECT doc FROM messages WHERE tenant = ? AND project = ? AND session = ? AND id > ? ORDER BY id LIMIT ?`,
		ref.Tenant, ref.Project, ref.Session, afterID, limit)
}

// LatestSummary implements memory.Sessions.
func (s *Store) LatestSummary(ctx context.Context, ref memory.SessionRef) (memory.Summary, error) {
	if err := memory.CheckSession(ref); err != nil {
		return memory.Summary{}, err
	}
	var doc []byte
	err := s.db.QueryRowContext(ctx, `SELECT doc FROM summaries WHERE tenant = ? AND project = ? AND session = ? ORDER BY seq DESC LIMIT 1`, ref.Tenant, ref.Project, ref.Session).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return memory.Summary{}, fmt.Errorf("summary of %s: %w", ref, memory.ErrNotFound)
	}
	if err != nil {
		return memory.Summary{}, fmt.Errorf("sqlite: latest summary: %w", err)
	}
	var sum memory.Summary
	if err := json.Unmarshal(doc, &sum); err != nil {
		return memory.Summary{}, fmt.Errorf("sqlite: decode summary: %w", err)
	}
	return sum, nil
}

// SaveSummary implements memory.Sessions.
func (s *Store) SaveSummary(ctx context.Context, ref memory.SessionRef, sum memory.Summary) error {
	if err := memory.CheckSession(ref); err != nil {
		return err
	}
	sum, err := memory.PrepareSummaryOf(ref.Tenant, sum, s.now())
	if err != nil {
		return err
	}
	doc, err := json.Marshal(sum)
	if err != nil {
		return fmt.Errorf("sqlite: encode summary: %w", err)
	}
	return s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`INSERT INTO summaries(tenant, project, session, doc) VALUES (?, ?, ?, ?)`, ref.Tenant, ref.Project, ref.Session, doc)
		return err
	})
}

// Cursor implements memory.Sessions.
func (s *Store) Cursor(ctx context.Context, ref memory.SessionRef) (int64, error) {
	if err := memory.CheckSession(ref); err != nil {
		return 0, err
	}
	var v int64
	err := s.db.QueryRowContext(ctx, `SELECT value FROM cursors WHERE tenant = ? AND project = ? AND session = ?`, ref.Tenant, ref.Project, ref.Session).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: cursor: %w", err)
	}
	return v, nil
}

// AdvanceCursor implements memory.Sessions.
func (s *Store) AdvanceCursor(ctx context.Context, ref memory.SessionRef, to int64) (int64, error) {
	if err := memory.CheckSession(ref); err != nil {
		return 0, err
	}
	var v int64
	err := s.write(ctx, func(w *wtx) error {
		return w.tx.QueryRowContext(ctx, `INSERT INTO cursors(tenant, project, session, value) VALUES (?, ?, ?, max(?, 0))
			ON CONFLICT(tenant, project, session) DO UPDATE SET value = max(value, excluded.value) RETURNING value`,
			ref.Tenant, ref.Project, ref.Session, to).Scan(&v)
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: advance cursor: %w", err)
	}
	return v, nil
}

// SetCursor implements memory.Sessions.
func (s *Store) SetCursor(ctx context.Context, ref memory.SessionRef, to int64) error {
	if err := memory.CheckSession(ref); err != nil {
		return err
	}
	if to < 0 {
		return fmt.Errorf("%w: cursor %d is negative", memory.ErrInvalid, to)
	}
	err := s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`INSERT INTO cursors(tenant, project, session, value) VALUES (?, ?, ?, ?)
			ON CONFLICT(tenant, project, session) DO UPDATE SET value = excluded.value`, ref.Tenant, ref.Project, ref.Session, to)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: set cursor: %w", err)
	}
	return nil
}

// PutInjection implements memory.Sessions. Expired records are deleted
// on the way (an index holds the expiring ones).
func (s *Store) PutInjection(ctx context.Context, ref memory.SessionRef, turnID string, in memory.Injection, ttl time.Duration) error {
	if err := memory.CheckSession(ref); err != nil {
		return err
	}
	if turnID == "" {
		return fmt.Errorf("%w: an injection record needs a turn id", memory.ErrInvalid)
	}
	doc, err := memory.EncodeInjection(in)
	if err != nil {
		return err
	}
	return s.write(ctx, func(w *wtx) error {
		var expires int64
		if ttl > 0 {
			expires = nanos(w.now.Add(ttl))
		}
		if _, err := w.exec(`DELETE FROM injections WHERE expires > 0 AND expires <= ?`, nanos(w.now)); err != nil {
			return err
		}
		_, err := w.exec(`INSERT OR REPLACE INTO injections(tenant, project, session, turn_id, ids, expires) VALUES (?, ?, ?, ?, ?, ?)`,
			ref.Tenant, ref.Project, ref.Session, turnID, doc, expires)
		return err
	})
}

// GetInjection implements memory.Sessions.
func (s *Store) GetInjection(ctx context.Context, ref memory.SessionRef, turnID string) (memory.Injection, error) {
	if err := memory.CheckSession(ref); err != nil {
		return memory.Injection{}, err
	}
	st, err := s.stmt(ctx, `SELECT ids, expires FROM injections WHERE tenant = ? AND project = ? AND session = ? AND turn_id = ?`)
	if err != nil {
		return memory.Injection{}, fmt.Errorf("sqlite: get injection: %w", err)
	}
	var (
		doc     []byte
		expires int64
	)
	err = st.QueryRowContext(ctx, ref.Tenant, ref.Project, ref.Session, turnID).Scan(&doc, &expires)
	if err == nil && expires > 0 && expires <= nanos(s.now()) {
		err = sql.ErrNoRows
	}
	if errors.Is(err, sql.ErrNoRows) {
		return memory.Injection{}, fmt.Errorf("injection record %s turn %s: %w", ref, turnID, memory.ErrNotFound)
	}
	if err != nil {
		return memory.Injection{}, fmt.Errorf("sqlite: get injection: %w", err)
	}
	in, err := memory.DecodeInjection(doc)
	if err != nil {
		return memory.Injection{}, fmt.Errorf("sqlite: decode injection: %w", err)
	}
	return in, nil
}

// TakeInjection implements memory.Sessions.
func (s *Store) TakeInjection(ctx context.Context, ref memory.SessionRef, turnID string) (memory.Injection, error) {
	if err := memory.CheckSession(ref); err != nil {
		return memory.Injection{}, err
	}
	var in memory.Injection
	err := s.write(ctx, func(w *wtx) error {
		var (
			doc     []byte
			expires int64
		)
		err := w.tx.QueryRowContext(ctx, `DELETE FROM injections WHERE tenant = ? AND project = ? AND session = ? AND turn_id = ? RETURNING ids, expires`,
			ref.Tenant, ref.Project, ref.Session, turnID).Scan(&doc, &expires)
		if err == nil && expires > 0 && expires <= nanos(w.now) {
			err = sql.ErrNoRows
		}
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("injection record %s turn %s: %w", ref, turnID, memory.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: take injection: %w", err)
		}
		if in, err = memory.DecodeInjection(doc); err != nil {
			return fmt.Errorf("sqlite: decode injection: %w", err)
		}
		return nil
	})
	return in, err
}

// BriefOnce implements memory.Sessions.
func (s *Store) BriefOnce(ctx context.Context, ref memory.SessionRef, ttl time.Duration) (bool, error) {
	if err := memory.CheckSession(ref); err != nil {
		return false, err
	}
	if err := memory.CheckTTL(ttl); err != nil {
		return false, err
	}
	// Every turn asks and only a session's first turn (or the first after
	// the TTL) takes the flag. A flag that has not expired is never cleared
	// early, and only this process writes the table (the store's lock), so
	// an expiry once seen answers the session's later turns from memory
	// until it passes; a read answers the first turn of a process that
	// finds the flag taken; any other answer takes the write.
	now := nanos(s.now())
	if s.briefs.Taken(ref, now) {
		return false, nil
	}
	st, err := s.stmt(ctx, `SELECT expires FROM briefs WHERE tenant = ? AND project = ? AND session = ?`)
	if err != nil {
		return false, fmt.Errorf("sqlite: brief once: %w", err)
	}
	var expires int64
	switch err := st.QueryRowContext(ctx, ref.Tenant, ref.Project, ref.Session).Scan(&expires); {
	case err == nil && expires > now:
		s.briefs.Remember(ref, expires, now)
		return false, nil
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return false, fmt.Errorf("sqlite: brief once: %w", err)
	}
	took, err := s.affected(ctx, func(w *wtx) (sql.Result, error) {
		expires = nanos(w.now.Add(ttl))
		return w.exec(`INSERT INTO briefs(tenant, project, session, expires) VALUES (?, ?, ?, ?)
			ON CONFLICT(tenant, project, session) DO UPDATE SET expires = excluded.expires WHERE expires <= ?`,
			ref.Tenant, ref.Project, ref.Session, expires, nanos(w.now))
	})
	if took && err == nil {
		s.briefs.Remember(ref, expires, now)
	}
	return took, err
}

// AcquireLease implements memory.Sessions.
func (s *Store) AcquireLease(ctx context.Context, ref memory.SessionRef, name, owner string, ttl time.Duration) (bool, error) {
	if err := checkLease(ref, name, owner, ttl); err != nil {
		return false, err
	}
	return s.affected(ctx, func(w *wtx) (sql.Result, error) {
		return w.exec(`INSERT INTO leases(tenant, project, session, name, owner, expires) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT(tenant, project, session, name) DO UPDATE SET owner = excluded.owner, expires = excluded.expires
			WHERE owner = excluded.owner OR expires <= ?`,
			ref.Tenant, ref.Project, ref.Session, name, owner, nanos(w.now.Add(ttl)), nanos(w.now))
	})
}

// RenewLease implements memory.Sessions.
func (s *Store) RenewLease(ctx context.Context, ref memory.SessionRef, name, owner string, ttl time.Duration) (bool, error) {
	if err := checkLease(ref, name, owner, ttl); err != nil {
		return false, err
	}
	return s.affected(ctx, func(w *wtx) (sql.Result, error) {
		return w.exec(`UPDATE leases SET expires = ? WHERE tenant = ? AND project = ? AND session = ? AND name = ? AND owner = ? AND expires > ?`,
			nanos(w.now.Add(ttl)), ref.Tenant, ref.Project, ref.Session, name, owner, nanos(w.now))
	})
}

// ReleaseLease implements memory.Sessions.
func (s *Store) ReleaseLease(ctx context.Context, ref memory.SessionRef, name, owner string) error {
	if err := memory.CheckSession(ref); err != nil {
		return err
	}
	return s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`DELETE FROM leases WHERE tenant = ? AND project = ? AND session = ? AND name = ? AND owner = ?`, ref.Tenant, ref.Project, ref.Session, name, owner)
		return err
	})
}

func checkLease(ref memory.SessionRef, name, owner string, ttl time.Duration) error {
	if err := memory.CheckSession(ref); err != nil {
		return err
	}
	if name == "" || owner == "" {
		return fmt.Errorf("%w: a lease needs a name and an owner", memory.ErrInvalid)
	}
	if err := memory.CheckLeaseName(name); err != nil {
		return err
	}
	return memory.CheckTTL(ttl)
}

// EventProcessed implements memory.Sessions.
func (s *Store) EventProcessed(ctx context.Context, p memory.ProjectRef, consumer, eventID string) (bool, error) {
	var expires int64
	st, err := s.stmt(ctx, `SELECT expires FROM processed WHERE tenant = ? AND project = ? AND consumer = ? AND event = ?`)
	if err != nil {
		return false, fmt.Errorf("sqlite: event processed: %w", err)
	}
	err = st.QueryRowContext(ctx, p.Tenant, p.Project, consumer, eventID).Scan(&expires)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sqlite: event processed: %w", err)
	}
	return expires == 0 || expires > nanos(s.now()), nil
}

// MarkEventProcessed implements memory.Sessions. Expired records are
// deleted on the way.
func (s *Store) MarkEventProcessed(ctx context.Context, p memory.ProjectRef, consumer, eventID string, ttl time.Duration) error {
	if consumer == "" || eventID == "" {
		return fmt.Errorf("%w: a processed-event record needs a consumer and an event id", memory.ErrInvalid)
	}
	return s.write(ctx, func(w *wtx) error {
		var expires int64
		if ttl > 0 {
			expires = nanos(w.now.Add(ttl))
		}
		if _, err := w.exec(`DELETE FROM processed WHERE expires > 0 AND expires <= ?`, nanos(w.now)); err != nil {
			return err
		}
		_, err := w.exec(`INSERT OR REPLACE INTO processed(tenant, project, consumer, event, expires) VALUES (?, ?, ?, ?, ?)`, p.Tenant, p.Project, consumer, eventID, expires)
		return err
	})
}

// affected runs one statement in a write transaction and reports whether it
// changed a row (the set-if-absent and compare-and-set records above).
func (s *Store) affected(ctx context.Context, stmt func(w *wtx) (sql.Result, error)) (bool, error) {
	changed := false
	err := s.write(ctx, func(w *wtx) error {
		r, err := stmt(w)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil {
			return fmt.Errorf("sqlite: rows affected: %w", err)
		}
		changed = n > 0
		return nil
	})
	return changed, err
}
