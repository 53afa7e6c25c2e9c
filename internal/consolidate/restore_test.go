package consolidate_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/consolidate"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

// TestRememberAfterForget: a fact an earlier pass forgot, remembered by a
// later pass, is live again and reported so ("restored", counted as
// restored, not stored); undoing the later pass forgets it again. Before,
// the pass said "1 stored" and the memory stayed archived.
func TestRememberAfterForget(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		for _, byUser := range []bool{false, true} {
			f := newFixture(t, b.Open(t))
			const fact = "The user plays the piano."
			piano := f.seed(memory.Node{Subkind: memory.Pattern, Label: fact})
			f.say("I stopped playing the piano.", "")
			f.srv.Enqueue(callOn(t, consolidate.ToolForget, fact, map[string]any{"reason": "stopped"}), done())
			if res := f.run(); res.Outcome.Forgotten != 1 || f.get(piano.ID).ArchivedAt.IsZero() {
				t.Fatalf("the first pass did not forget it: %+v", res.Outcome)
			}
			f.say("Actually I took the piano up again.", "")
			f.srv.Enqueue(call(consolidate.ToolRemember, map[string]any{"text": fact, "kind": "pattern", "said_by_user": byUser}), done())
			res := f.run()
			if o := res.Outcome; o.Restored != 1 || o.Stored != 0 {
				t.Fatalf("said by user %v: outcome %+v", byUser, o)
			}
			if n := f.get(piano.ID); !n.Live() {
				t.Fatalf("said by user %v: the fact stays forgotten: %+v", byUser, n)
			}
			if s := f.trailing(len(f.srv.ChatRequests()) - 1); !strings.Contains(s, "restored "+short(t, res.Pass, piano.ID)+" "+fact+": it had been forgotten") {
				t.Errorf("said by user %v: not reported as restored:\n%s", byUser, s)
			}
			if texts := f.liveTexts(); len(texts) != 1 || texts[fact] != piano.ID {
				t.Fatalf("said by user %v: live %v (one fact, the same node)", byUser, texts)
			}
			ds := f.pub.done(t)
			if d := ds[len(ds)-1]; d.Restored != 1 || d.Stored != 0 {
				t.Fatalf("consolidation_done %+v", d)
			}
			var out strings.Builder
			consolidate.WriteJournal(&out, res.Pass)
			if !strings.Contains(out.String(), "restore  ["+piano.ID+"]") {
				t.Errorf("journal:\n%s", out.String())
			}
			if _, err := consolidate.Undo(f.ctx, f.st, memory.ProjectRef{Project: project}, res.Pass.ID, time.Now()); err != nil {
				t.Fatal(err)
			}
			if f.get(piano.ID).ArchivedAt.IsZero() {
				t.Fatalf("said by user %v: undo did not forget the restored fact again", byUser)
			}
		}
	})
}

// TestRememberAfterRevise: a fact a revision closed, remembered again, is
// reopened, and its replacement (still live) is listed for review.
func TestRememberAfterRevise(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	lyon := f.seed(memory.Node{Subkind: memory.Observation, Label: "The user lives in Lyon."})
	f.say("I moved to Porto.", "")
	f.srv.Enqueue(callOn(t, consolidate.ToolRevise, lyon.Label, map[string]any{"text": "The user lives in Porto."}), done())
	f.run()
	f.say("I am back in Lyon for good.", "")
	f.srv.Enqueue(remember("The user lives in Lyon.", "observation"), done())
	res := f.run()
	if n := f.get(lyon.ID); res.Outcome.Restored != 1 || !n.Live() {
		t.Fatalf("outcome %+v, Lyon %+v", res.Outcome, f.get(lyon.ID))
	}
	s := f.trailing(len(f.srv.ChatRequests()) - 1)
	if !strings.Contains(s, "it had been closed by a revision") || !strings.Contains(s, "linked to these live memories") ||
		!regexp.MustCompile(`\[f\d+\] The user lives in Porto\..*<- supersedes`).MatchString(s) {
		t.Errorf("the replacement is not listed for review:\n%s", s)
	}
}

// TestNoLinkToAForgottenTopic: a topic made by a pass that was undone is
// archived; a later pass linking a fact to the same topic restores it
// rather than link to a forgotten node.
func TestNoLinkToAForgottenTopic(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		f := newFixture(t, b.Open(t))
		f.say("I love sailing.", "")
		f.srv.Enqueue(call(consolidate.ToolRemember, map[string]any{"text": "The user loves sailing.", "kind": "preference", "topic": "sailing"}), done())
		first := f.run()
		var topic string
		for _, e := range first.Pass.Entries {
			if e.Op == memory.OpRemember && e.After != nil && e.After.Subkind == memory.Topic {
				topic = e.NodeID
			}
		}
		if _, err := consolidate.Undo(f.ctx, f.st, memory.ProjectRef{Project: project}, first.Pass.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		if topic == "" || f.get(topic).ArchivedAt.IsZero() {
			t.Fatalf("the undone pass's topic %q is not archived", topic)
		}
		f.say("Sailing boats are my passion.", "")
		f.srv.Enqueue(call(consolidate.ToolRemember, map[string]any{"text": "The user is passionate about sailing boats.", "kind": "preference", "topic": "Sailing"}), done())
		res := f.run()
		if n := f.get(topic); !n.Live() {
			t.Fatal("the later pass linked to a forgotten topic")
		}
		edges, err := f.st.Edges(f.ctx, topic)
		if err != nil || len(edges) != 1 || edges[0].Relation != memory.InterestedIn {
			t.Fatalf("edges of the topic: %+v %v", edges, err)
		}
		if s := f.trailing(len(f.srv.ChatRequests()) - 1); !strings.Contains(s, `topic "Sailing" (restored: it had been forgotten)`) {
			t.Errorf("the link does not say the topic was restored:\n%s", s)
		}
		if _, err := consolidate.Undo(f.ctx, f.st, memory.ProjectRef{Project: project}, res.Pass.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		if f.get(topic).ArchivedAt.IsZero() {
			t.Error("undo of the later pass left the topic it restored live")
		}
	})
}

var hexID = regexp.MustCompile(`\b[0-9a-f]{24}\b`)

// TestShortIDs: the model sees memories as [f1], [f2], ... and never a
// stored id; it names them so; an id the pass never showed, or a stored
// id, is refused and the model told how memories are named.
func TestShortIDs(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	tea := f.seed(memory.Node{Subkind: memory.Preference, Label: "The user likes green tea."})
	f.seed(memory.Node{Subkind: memory.Observation, Label: "The user lives in Oslo."})
	f.say("I moved to Bergen, and I still like green tea.", "")
	f.srv.Enqueue(
		call(consolidate.ToolForget, map[string]any{"id": "f99"}),
		call(consolidate.ToolForget, map[string]any{"id": tea.ID}),
		callOn(t, consolidate.ToolRevise, "The user lives in Oslo.", map[string]any{"text": "The user lives in Bergen."}),
		call(consolidate.ToolRecall, map[string]any{"query": "tea"}),
		done())
	res := f.run()
	if res.Outcome.Revised != 1 || res.Outcome.Failed != 2 {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	for i, r := range f.srv.ChatRequests() {
		for _, m := range r.Messages {
			if id := hexID.FindString(m.Content); id != "" {
				t.Fatalf("request %d shows the stored id %s:\n%s", i, id, m.Content)
			}
		}
	}
	first := f.trailing(0)
	if !regexp.MustCompile(`(?m)^\[f1\] The user lives in Oslo\.`).MatchString(first) || !regexp.MustCompile(`(?m)^\[f2\] The user likes green tea\.`).MatchString(first) {
		t.Errorf("the memories are not listed by short id:\n%s", first)
	}
	if s := f.trailing(1); !strings.Contains(s, "there is no memory [f99] in this pass: name a memory by the short id shown in square brackets, like [f1]") {
		t.Errorf("an unknown short id:\n%s", s)
	}
	if s := f.trailing(2); !strings.Contains(s, `"`+tea.ID[:7]+`…" is not a memory's name: name a memory by the short id shown in square brackets, like [f1]`) {
		t.Errorf("a stored id:\n%s", s)
	}
	if n := f.get(tea.ID); !n.Live() {
		t.Fatal("a memory named by its stored id was forgotten")
	}
	// The revision is named [f3] from then on, in the journal lines too.
	if s := f.trailing(3); !strings.Contains(s, "revised [f1] into [f3] The user lives in Bergen.") {
		t.Errorf("the revision's short id:\n%s", s)
	}
	if s := f.trailing(4); !strings.Contains(s, "found:\n[f2] The user likes green tea.") {
		t.Errorf("the recall does not name the memory by its short id:\n%s", s)
	}
}
