package consolidate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
)

// TestConfirmSimilarNeedsAHold: confirm_similar answers a hold; set on a
// first call it does not skip the review, the call is held and told why,
// and only the repeat after that hold stores the fact.
func TestConfirmSimilarNeedsAHold(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	old := f.seed(memory.Node{Subkind: memory.Preference, Label: "The user prefers green tea in the morning."})
	f.say("I prefer green tea each morning.", "")
	confirm := call(consolidate.ToolRemember, map[string]any{"text": "The user prefers green tea each morning.", "kind": "preference", "confirm_similar": true})
	f.srv.Enqueue(confirm, confirm, done())
	res := f.run()
	if o := res.Outcome; o.Held != 1 || o.Stored != 1 {
		t.Fatalf("outcome %+v", o)
	}
	s := f.trailing(1)
	for _, want := range []string{"held for review: close to " + short(t, res.Pass, old.ID), "confirm_similar applies only to a fact held earlier in this pass",
		"confirm_similar applies only to a fact held for review earlier in this pass; this one had not been held."} {
		if !strings.Contains(s, want) {
			t.Errorf("first call: no %q:\n%s", want, s)
		}
	}
	if s := f.trailing(2); !strings.Contains(s, "stored [") {
		t.Errorf("the confirmed repeat was not stored:\n%s", s)
	}
	if texts := f.liveTexts(); len(texts) != 2 || texts["The user prefers green tea each morning."] == "" {
		t.Fatalf("live %v", texts)
	}
}

// tableEmbedder gives chosen texts chosen vectors (the rest a vector of
// their own, orthogonal to the chosen ones), so that a test decides the
// cosine the near-duplicate rule sees.
type tableEmbedder struct {
	vecs []wordVec // the first whose word the text contains
}

type wordVec struct {
	word string
	vec  []float32
}

func (e *tableEmbedder) Model() string { return "table-embed" }

func (e *tableEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = []float32{0, 0, 0, 0, 0, 0, 0, 1} // the rest: orthogonal to the table
		for _, wv := range e.vecs {
			if strings.Contains(t, wv.word) {
				out[i] = wv.vec
				break
			}
		}
	}
	return out, nil
}

// TestNearDuplicateByCosineOnly: the words of the two facts barely
// overlap (below 0.5), their vectors are close (cosine 0.90): held, and the
// hold names the cosine.
func TestNearDuplicateByCosineOnly(t *testing.T) {
	emb := &tableEmbedder{vecs: []wordVec{
		{"green tea", []float32{1, 0, 0, 0, 0, 0, 0, 0}},
		{"hot drink", []float32{0.9, 0.43588989, 0, 0, 0, 0, 0, 0}}, // cosine 0.90 with the above
	}}
	f := newFixture(t, sqliteStore(t), consolidate.WithEmbedder(emb))
	f.emb = emb
	const seeded, similar = "The user prefers green tea in the morning.", "The user enjoys a hot drink after waking."
	if o := consolidate.Overlap(seeded, similar); o >= 0.5 {
		t.Fatalf("overlap %v: the case needs the words apart", o)
	}
	old := f.seed(memory.Node{Subkind: memory.Preference, Label: seeded})
	f.say("I enjoy a hot drink after waking.", "")
	f.srv.Enqueue(remember(similar, "preference"), done())
	res := f.run()
	if res.Outcome.Held != 1 || res.Outcome.Stored != 0 {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	if s, id := f.trailing(1), short(t, res.Pass, old.ID); !strings.Contains(s, "held for review: close to "+id+" (cosine 0.90)") ||
		!strings.Contains(s, `Not stored: "`+similar+`" is close to `+id+" "+seeded) {
		t.Errorf("hold wording:\n%s", s)
	}
}

// TestNearDuplicateByWordsOnly: without an embedder only the words count;
// and with orthogonal vectors a word overlap of 0.75 (the stored fact's
// words, and two more) still holds.
func TestNearDuplicateByWordsOnly(t *testing.T) {
	const seeded, similar = "The user swims every Tuesday morning.", "The user swims every Tuesday morning at the lake."
	for _, c := range []struct {
		name string
		emb  consolidate.Embedder
	}{{"no embedder", nil}, {"orthogonal vectors", &tableEmbedder{vecs: []wordVec{
		{"lake", []float32{1, 0, 0, 0, 0, 0, 0, 0}}, {"swims", []float32{0, 1, 0, 0, 0, 0, 0, 0}}}}}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, sqliteStore(t), consolidate.WithEmbedder(c.emb))
			if c.emb != nil {
				f.emb = c.emb
			}
			old := f.seed(memory.Node{Subkind: memory.Pattern, Label: seeded})
			f.say("I swim every Tuesday morning at the lake.", "")
			f.srv.Enqueue(remember(similar, "pattern"), done())
			res := f.run()
			if res.Outcome.Held != 1 || res.Outcome.Stored != 0 {
				t.Fatalf("outcome %+v", res.Outcome)
			}
			if s := f.trailing(1); !strings.Contains(s, "held for review: close to "+short(t, res.Pass, old.ID)+" (word overlap 0.75)") {
				t.Errorf("hold wording:\n%s", s)
			}
		})
	}
}

// TestNearDuplicateWordsAmongTheRecentFacts: the word rule compares the 32
// most recent facts of the project: a similar fact 32 facts back is found,
// one 33 back is not (and the new fact is stored).
func TestNearDuplicateWordsAmongTheRecentFacts(t *testing.T) {
	clock := memorytest.NewClock()
	st := storetest.OpenSQLite(t, storetest.WithClock(clock.Now))
	f := newFixture(t, st, consolidate.WithEmbedder(nil), consolidate.WithClock(clock.Now))
	const seeded, similar = "The user swims every Tuesday morning.", "The user swims every Tuesday morning at the lake."
	old := f.seed(memory.Node{Subkind: memory.Pattern, Label: seeded})
	for i := range 31 { // the seeded fact is the 32nd most recent
		clock.Advance(time.Minute)
		f.seed(memory.Node{Subkind: memory.Observation, Label: fmt.Sprintf("The user has visited city number %d.", i)})
	}
	clock.Advance(time.Hour)
	f.say("I swim every Tuesday morning at the lake. And I have been to Rome.", "")
	f.srv.Enqueue(
		remember(similar, "pattern"),                          // held: the seeded fact is among the 32
		remember("The user has been to Rome.", "observation"), // now it is the 33rd
		remember(similar, "pattern"),                          // stored: out of reach
		done())
	res := f.run()
	if res.Outcome.Held != 1 || res.Outcome.Stored != 2 {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	if s := f.trailing(1); !strings.Contains(s, "held for review: close to "+short(t, res.Pass, old.ID)+" (word overlap 0.75)") {
		t.Errorf("first call:\n%s", s)
	}
	if s := f.trailing(3); !strings.Contains(s, "stored [") {
		t.Errorf("third call:\n%s", s)
	}
	if texts := f.liveTexts(); texts[similar] == "" || texts[seeded] != old.ID {
		t.Fatalf("live %v", texts)
	}
}
