package erase

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// ParkedLetter is a dead letter parked in the store while the dead-letter
// stream refused it (the runner's parking, memory.Letters): its key and
// the letter as the runner encoded it (the JSON of internal/runner/dlq's
// Letter: the original subject, headers and body).
type ParkedLetter struct {
	Key  string
	Data []byte
}

// Shelf lists and drops parked letters. The store's memory.Letters does,
// through an adapter (ShelfFuncs), where the process parks letters.
type Shelf interface {
	ParkedLetters(ctx context.Context) ([]ParkedLetter, error)
	DropParkedLetter(ctx context.Context, key string) error
}

// ShelfFuncs adapts two functions to a Shelf.
type ShelfFuncs struct {
	List func(ctx context.Context) ([]ParkedLetter, error)
	Drop func(ctx context.Context, key string) error
}

// ParkedLetters implements Shelf.
func (f ShelfFuncs) ParkedLetters(ctx context.Context) ([]ParkedLetter, error) { return f.List(ctx) }

// DropParkedLetter implements Shelf.
func (f ShelfFuncs) DropParkedLetter(ctx context.Context, key string) error { return f.Drop(ctx, key) }

// StoreShelf is the Shelf of a store's parked letters (memory.Letters).
func StoreShelf(l memory.Letters) Shelf {
	return ShelfFuncs{
		List: func(ctx context.Context) ([]ParkedLetter, error) {
			ls, err := l.ParkedLetters(ctx, 0)
			out := make([]ParkedLetter, len(ls))
			for i, pl := range ls {
				out[i] = ParkedLetter{Key: pl.Key, Data: pl.Data}
			}
			return out, err
		},
		Drop: l.DropParkedLetter,
	}
}

// WithShelf erases the scope's parked letters too (see Shelf).
func WithShelf(s Shelf) Option { return func(e *Eraser) { e.shelf = s } }

// parkedLetter is what a parked letter's JSON says of where it came from.
type parkedLetter struct {
	Subject string `json:"Subject"` // the original subject
	Data    []byte `json:"Data"`    // the original body
}

// eraseLetters drops the parked letters of the scope: those whose original
// subject or body names it. It returns how many.
func (e *Eraser) eraseLetters(ctx context.Context, sc Scope, seen memory.Seen) (int, error) {
	letters, err := e.shelf.ParkedLetters(ctx)
	if err != nil {
		return 0, fmt.Errorf("parked letters: %w", err)
	}
	n := 0
	for _, l := range letters {
		if !e.letterHolds(sc, l.Data) {
			continue
		}
		var pl parkedLetter
		if json.Unmarshal(l.Data, &pl) == nil {
			bodyTexts(pl.Data, seen)
		} else if seen != nil {
			seen(string(l.Data))
		}
		if err := e.shelf.DropParkedLetter(ctx, l.Key); err != nil {
			return n, fmt.Errorf("parked letters: drop: %w", err)
		}
		n++
	}
	return n, nil
}

// letterHolds reports whether a parked letter is the scope's.
func (e *Eraser) letterHolds(sc Scope, data []byte) bool {
	var pl parkedLetter
	if json.Unmarshal(data, &pl) != nil {
		return false // not a letter this version can read: a verification finds its texts
	}
	subjects := events.Subjects{}
	if e.bus != nil {
		subjects = e.bus.Subjects
	}
	b := &Bus{Subjects: subjects}
	in := func(ref memory.SessionRef) bool {
		if ref.Session == "" {
			return sc.HoldsProject(ref.ProjectRef())
		}
		return sc.HoldsSession(ref)
	}
	if ref, ok := b.subjectRef(pl.Subject); ok && in(ref) {
		return true
	}
	var body struct {
		Tenant  string `json:"tenant_id"`
		Project string `json:"project_id"`
		Session string `json:"session_id"`
	}
	return json.Unmarshal(pl.Data, &body) == nil && body.Project != "" &&
		in(memory.SessionRef{Tenant: body.Tenant, Project: body.Project, Session: body.Session})
}
