package erase

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/engram-memory/engram/internal/runner/dlq"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
)

// TestParkedLetters: the parked letters of the scope (by original subject,
// or by body) are dropped and counted, the others kept; a verification
// reads the shelf. The letters are encoded as the runner parks them
// (dlq.Letter as JSON); the shelf is a map here (the store's
// memory.Letters, where a version has it, is adapted with ShelfFuncs).
func TestParkedLetters(t *testing.T) {
	ctx := context.Background()
	subj := events.Subjects{}
	var mu sync.Mutex
	shelf := map[string][]byte{}
	park := func(key string, l dlq.Letter) {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		shelf[key] = b
	}
	park("by-subject", dlq.Letter{Consumer: "extractor", Subject: subj.In(events.TypeTurnEnded, "acme", "user-1", "s"),
		Data: []byte(`{"not json at all: cut short, the secret plan of user one`)})
	park("by-body", dlq.Letter{Consumer: "extractor", Subject: "engram.in.turn_ended",
		Data: []byte(`{"tenant_id":"acme","project_id":"user-1","session_id":"s2","text":"what user one told us"}`)})
	park("other", dlq.Letter{Consumer: "extractor", Subject: subj.In(events.TypeTurnEnded, "acme", "user-2", "s"),
		Data: []byte(`{"tenant_id":"acme","project_id":"user-2","session_id":"s","text":"what user two told us"}`)})
	shelf["unreadable"] = []byte("garbage that names nobody")
	funcs := ShelfFuncs{
		List: func(context.Context) ([]ParkedLetter, error) {
			mu.Lock()
			defer mu.Unlock()
			var out []ParkedLetter
			for _, k := range slices.Sorted(maps.Keys(shelf)) {
				out = append(out, ParkedLetter{Key: k, Data: shelf[k]})
			}
			return out, nil
		},
		Drop: func(_ context.Context, key string) error {
			mu.Lock()
			defer mu.Unlock()
			delete(shelf, key)
			return nil
		},
	}
	e := New(storetest.OpenSQLite(t), WithShelf(funcs))
	r, err := e.Erase(ctx, Scope{Tenant: "acme", Project: "user-1"}, Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.ParkedLetters != 2 || r.Verify.FoundCount != 0 {
		t.Fatalf("receipt %+v %+v", r, r.Verify)
	}
	if got := slices.Sorted(maps.Keys(shelf)); !slices.Equal(got, []string{"other", "unreadable"}) {
		t.Fatalf("left on the shelf: %v", got)
	}
}

// TestParkedLettersInTheStore: the store's own parked letters (SQLite's
// parked_letters, through StoreShelf), parked by the runner's dlq.Parking
// encoding, go with their scope.
func TestParkedLettersInTheStore(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenSQLite(t)
	subj := events.Subjects{}
	for key, l := range map[string]dlq.Letter{
		"mine":  {Consumer: "extractor", Subject: subj.In(events.TypeTurnEnded, "acme", "user-1", "s"), Data: []byte(`{"cut short`)},
		"other": {Consumer: "extractor", Subject: subj.In(events.TypeTurnEnded, "acme", "user-2", "s"), Data: []byte(`{"cut short`)},
	} {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.ParkLetter(ctx, key, b); err != nil {
			t.Fatal(err)
		}
	}
	r, err := New(st, WithShelf(StoreShelf(st))).Erase(ctx, Scope{Tenant: "acme", Project: "user-1"}, Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	left, err := st.ParkedLetters(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.ParkedLetters != 1 || len(left) != 1 || left[0].Key != "other" {
		t.Fatalf("receipt %+v, left %v", r, left)
	}
}
