package memorytest

import (
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

var sessionTests = []subtest{
	{"Sessions/Transcript", testTranscript},
	{"Sessions/Summaries", testSummaries},
	{"Sessions/Cursor", testCursor},
	{"Sessions/Injection", testInjection},
	{"Sessions/BriefOnce", testBriefOnce},
	{"Sessions/Lease", testLease},
	{"Sessions/LeaseConcurrent", testLeaseConcurrent},
	{"Sessions/ProcessedEvents", testProcessed},
}

var s1 = memory.SessionRef{Project: "p", Session: "s1"}

func testTranscript(e *env) {
	turn1 := []memory.Message{
		{Role: memory.RoleUser, Content: "hello", TokensIn: 3},
		{Role: memory.RoleAssistant, Content: "calling", ToolCalls: []memory.ToolCall{{ID: "c1", Name: "grep", Arguments: `{"q":"x"}`}}},
		{Role: memory.RoleTool, ToolName: "grep", ToolCallID: "c1", ToolStatus: memory.ToolFailed, Content: "no match"},
	}
	got, fresh, err := e.s.AppendTranscript(e.ctx, s1, "t1", turn1)
	e.ok(err, "AppendTranscript")
	if !fresh || len(got) != 3 {
		e.t.Fatalf("first append: fresh %v, %d messages", fresh, len(got))
	}
	for i, m := range got {
		if m.TurnID != "t1" || m.ID <= 0 || (i > 0 && m.ID <= got[i-1].ID) || !timeEq(m.CreatedAt, Epoch) {
			e.t.Fatalf("message %d: %+v", i, m)
		}
	}
	again, fresh, err := e.s.AppendTranscript(e.ctx, s1, "t1", []memory.Message{{Role: memory.RoleUser, Content: "redelivered, different"}})
	e.ok(err, "AppendTranscript again")
	if fresh || len(again) != 3 || again[0].ID != got[0].ID || again[0].Content != "hello" {
		e.t.Fatalf("repeated turn: fresh %v %+v", fresh, again)
	}
	e.c.Advance(time.Second)
	got2, fresh, err := e.s.AppendTranscript(e.ctx, s1, "t2", []memory.Message{{Role: memory.RoleUser, Content: "next"}, {Role: memory.RoleAssistant, Content: "ok"}})
	e.ok(err, "AppendTranscript t2")
	if !fresh || got2[0].ID <= got[2].ID || got2[1].ID <= got2[0].ID {
		e.t.Fatalf("ids do not increase: %d then %d", got[2].ID, got2[0].ID)
	}
	all, err := e.s.Messages(e.ctx, s1, 0, 0)
	e.ok(err, "Messages")
	if len(all) != 5 {
		e.t.Fatalf("all: %d", len(all))
	}
	m := all[1]
	if m.Role != memory.RoleAssistant || len(m.ToolCalls) != 1 || m.ToolCalls[0] != (memory.ToolCall{ID: "c1", Name: "grep", Arguments: `{"q":"x"}`}) {
		e.t.Fatalf("tool call round trip: %+v", m)
	}
	if t := all[2]; t.ToolName != "grep" || t.ToolCallID != "c1" || t.ToolStatus != memory.ToolFailed || t.Content != "no match" {
		e.t.Fatalf("tool message round trip: %+v", t)
	}
	if all[0].TokensIn != 3 {
		e.t.Fatalf("tokens: %+v", all[0])
	}
	since, err := e.s.Messages(e.ctx, s1, got[2].ID, 0)
	e.ok(err, "Messages since")
	if len(since) != 2 || since[0].ID != got2[0].ID || since[0].Content != "next" {
		e.t.Fatalf("since: %+v", since)
	}
	lim, err := e.s.Messages(e.ctx, s1, 0, 2)
	e.ok(err, "Messages limit")
	if len(lim) != 2 || lim[0].ID != got[0].ID {
		e.t.Fatalf("limit: %+v", lim)
	}
	other, err := e.s.Messages(e.ctx, memory.SessionRef{Project: "p", Session: "s2"}, 0, 0)
	e.ok(err, "Messages other session")
	if len(other) != 0 {
		e.t.Fatalf("sessions share a transcript: %d", len(other))
	}
	_, _, err = e.s.AppendTranscript(e.ctx, s1, "t3", []memory.Message{{Role: "robot", Content: "x"}})
	e.is(err, memory.ErrInvalid, "bad role")
	_, _, err = e.s.AppendTranscript(e.ctx, s1, "", []memory.Message{{Role: memory.RoleUser, Content: "x"}})
	e.is(err, memory.ErrInvalid, "no turn id")
	if all, _ := e.s.Messages(e.ctx, s1, 0, 0); len(all) != 5 {
		e.t.Fatalf("an invalid append stored messages: %d", len(all))
	}
	// the invalid turn id can still be used later
	_, fresh, err = e.s.AppendTranscript(e.ctx, s1, "t3", []memory.Message{{Role: memory.RoleUser, Content: "fine"}})
	e.ok(err, "AppendTranscript t3")
	if !fresh {
		e.t.Fatal("a rejected append reserved its turn id")
	}
}

func testSummaries(e *env) {
	_, err := e.s.LatestSummary(e.ctx, s1)
	e.is(err, memory.ErrNotFound, "no summary")
	e.ok(e.s.SaveSummary(e.ctx, s1, memory.Summary{Content: "first", UpTo: 10}), "SaveSummary")
	e.c.Advance(time.Minute)
	e.ok(e.s.SaveSummary(e.ctx, s1, memory.Summary{Content: "second", UpTo: 20, TokensBefore: 70000, TokensAfter: 9000}), "SaveSummary")
	got, err := e.s.LatestSummary(e.ctx, s1)
	e.ok(err, "LatestSummary")
	if got.Content != "second" || got.UpTo != 20 || !timeEq(got.CreatedAt, e.c.Now()) ||
		got.TokensBefore != 70000 || got.TokensAfter != 9000 {
		e.t.Fatalf("latest: %+v", got)
	}
	e.is(e.s.SaveSummary(e.ctx, s1, memory.Summary{}), memory.ErrInvalid, "empty summary")
	_, err = e.s.LatestSummary(e.ctx, memory.SessionRef{Project: "p", Session: "s2"})
	e.is(err, memory.ErrNotFound, "other session")
}

func testCursor(e *env) {
	c, err := e.s.Cursor(e.ctx, s1)
	e.ok(err, "Cursor")
	if c != 0 {
		e.t.Fatalf("initial cursor %d", c)
	}
	for _, step := range []struct{ to, want int64 }{{5, 5}, {3, 5}, {5, 5}, {9, 9}, {0, 9}} {
		got, err := e.s.AdvanceCursor(e.ctx, s1, step.to)
		e.ok(err, "AdvanceCursor")
		if got != step.want {
			e.t.Fatalf("advance to %d: cursor %d, want %d", step.to, got, step.want)
		}
	}
	if c, _ := e.s.Cursor(e.ctx, s1); c != 9 {
		e.t.Fatalf("cursor %d", c)
	}
	if c, _ := e.s.Cursor(e.ctx, memory.SessionRef{Project: "p", Session: "s2"}); c != 0 {
		e.t.Fatalf("other session's cursor %d", c)
	}
	// SetCursor moves it back (an operator's re-read), and forward; the
	// other session's stays; AdvanceCursor goes on from where it was set.
	e.ok(e.s.SetCursor(e.ctx, s1, 4), "SetCursor back")
	if c, _ := e.s.Cursor(e.ctx, s1); c != 4 {
		e.t.Fatalf("cursor after SetCursor(4): %d", c)
	}
	if got, err := e.s.AdvanceCursor(e.ctx, s1, 6); err != nil || got != 6 {
		e.t.Fatalf("advance after a set: %d %v", got, err)
	}
	e.ok(e.s.SetCursor(e.ctx, s1, 12), "SetCursor forward")
	e.ok(e.s.SetCursor(e.ctx, memory.SessionRef{Project: "p", Session: "s3"}, 7), "SetCursor of a new session")
	if c, _ := e.s.Cursor(e.ctx, s1); c != 12 {
		e.t.Fatalf("cursor after SetCursor(12): %d", c)
	}
	if c, _ := e.s.Cursor(e.ctx, memory.SessionRef{Project: "p", Session: "s3"}); c != 7 {
		e.t.Fatalf("new session's cursor after SetCursor(7): %d", c)
	}
	if c, _ := e.s.Cursor(e.ctx, memory.SessionRef{Project: "p", Session: "s2"}); c != 0 {
		e.t.Fatalf("other session's cursor %d after a set", c)
	}
	e.is(e.s.SetCursor(e.ctx, s1, -1), memory.ErrInvalid, "negative cursor")
	e.is(e.s.SetCursor(e.ctx, memory.SessionRef{Project: "p"}, 1), memory.ErrInvalid, "no session")
}

func testInjection(e *env) {
	ids := func(v ...string) memory.Injection { return memory.Injection{IDs: v} }
	e.ok(e.s.PutInjection(e.ctx, s1, "t1", ids("a", "b"), 0), "PutInjection")
	e.ok(e.s.PutInjection(e.ctx, s1, "t2", ids("c"), time.Hour), "PutInjection")
	got, err := e.s.TakeInjection(e.ctx, s1, "t1")
	e.ok(err, "TakeInjection")
	e.sameList("taken", got.IDs, []string{"a", "b"})
	_, err = e.s.TakeInjection(e.ctx, s1, "t1")
	e.is(err, memory.ErrNotFound, "second take")
	_, err = e.s.GetInjection(e.ctx, s1, "t1")
	e.is(err, memory.ErrNotFound, "get after take")
	_, err = e.s.TakeInjection(e.ctx, memory.SessionRef{Project: "p", Session: "s2"}, "t2")
	e.is(err, memory.ErrNotFound, "other session")
	_, err = e.s.GetInjection(e.ctx, memory.SessionRef{Project: "p", Session: "s2"}, "t2")
	e.is(err, memory.ErrNotFound, "get of another session")
	e.ok(e.s.PutInjection(e.ctx, s1, "t2", ids("d", "e"), time.Hour), "PutInjection replace")
	got, err = e.s.TakeInjection(e.ctx, s1, "t2")
	e.ok(err, "TakeInjection")
	e.sameList("replaced", got.IDs, []string{"d", "e"})

	// The whole block: text, ids, scores and the briefing flag; a get does
	// not consume it.
	// With it, why each line is there (memory.BlockWhy), kept whole.
	block := memory.Injection{IDs: []string{"s1", "r1"}, Scores: []float64{0, 0.75}, Text: "<memory>\n- [s1] x\n- [r1] y\n</memory>\n", Briefing: true,
		Why: &memory.BlockWhy{Best: 0.75, Floor: 0.3, RelativeFloor: 0.4, MaxRecalled: 10, PlateauKeep: 6,
			Lines: []memory.LineWhy{{ID: "s1", Rule: "standing"}, {ID: "r1", Rule: "best", Why: &memory.Why{Rank: 1, Score: 0.75, Fused: 0.8,
				Channels: []memory.ChannelWhy{{Channel: memory.ChannelLexical, Rank: 1, Score: 7.25, Weight: 1, Share: 0.8}},
				Prior:    memory.PriorWhy{Value: 0.9375, Raw: 0.8, Reinforcement: 1, Recency: 1, Staleness: 1, Confidence: 0.8, Strength: 0.3}}}},
			Cut: []memory.CutWhy{{ID: "c1", Rank: 2, Score: 0.125, Rule: "under-floor"}}}}
	e.ok(e.s.PutInjection(e.ctx, s1, "tb", block, time.Hour), "PutInjection block")
	for range 2 {
		got, err = e.s.GetInjection(e.ctx, s1, "tb")
		e.ok(err, "GetInjection")
		if got.Text != block.Text || !got.Briefing || fmt.Sprint(got.IDs) != fmt.Sprint(block.IDs) || fmt.Sprint(got.Scores) != fmt.Sprint(block.Scores) ||
			!reflect.DeepEqual(got.Why, block.Why) {
			e.t.Fatalf("GetInjection = %+v, want %+v", got, block)
		}
	}
	// A turn answered without a block has an empty record, found.
	e.ok(e.s.PutInjection(e.ctx, s1, "te", memory.Injection{}, time.Hour), "PutInjection empty")
	got, err = e.s.GetInjection(e.ctx, s1, "te")
	e.ok(err, "GetInjection empty")
	if len(got.IDs) != 0 || got.Text != "" {
		e.t.Fatalf("empty record read back as %+v", got)
	}
	// Scores must match the ids; a record needs a turn id.
	e.is(e.s.PutInjection(e.ctx, s1, "tx", memory.Injection{IDs: []string{"a"}, Scores: []float64{1, 2}}, time.Hour), memory.ErrInvalid, "scores of other ids")
	e.is(e.s.PutInjection(e.ctx, s1, "", ids("a"), time.Hour), memory.ErrInvalid, "no turn id")

	// Records expire on the store's clock; a put renews (or shortens) the
	// life; ttl <= 0 never expires.
	e.ok(e.s.PutInjection(e.ctx, s1, "tshort", ids("k"), time.Hour), "PutInjection")
	e.ok(e.s.PutInjection(e.ctx, s1, "tb", block, 10*time.Minute), "PutInjection shorter")
	e.ok(e.s.PutInjection(e.ctx, s1, "tforever", ids("f"), 0), "PutInjection forever")
	e.c.Advance(30 * time.Minute)
	_, err = e.s.GetInjection(e.ctx, s1, "tb")
	e.is(err, memory.ErrNotFound, "expired record")
	_, err = e.s.TakeInjection(e.ctx, s1, "tb")
	e.is(err, memory.ErrNotFound, "take of an expired record")
	if got, err := e.s.GetInjection(e.ctx, s1, "tshort"); err != nil || fmt.Sprint(got.IDs) != "[k]" {
		e.t.Fatalf("unexpired record: %+v %v", got, err)
	}
	e.c.Advance(31 * time.Minute)
	_, err = e.s.GetInjection(e.ctx, s1, "tshort")
	e.is(err, memory.ErrNotFound, "expired after its hour")
	if _, err := e.s.GetInjection(e.ctx, s1, "tforever"); err != nil {
		e.t.Fatalf("a record without ttl expired: %v", err)
	}

	// concurrent takers: exactly one gets the record
	e.ok(e.s.PutInjection(e.ctx, s1, "t3", ids("x"), time.Hour), "PutInjection")
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.s.TakeInjection(e.ctx, s1, "t3"); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		e.t.Fatalf("%d concurrent takes succeeded", wins)
	}
}

func testBriefOnce(e *env) {
	brief := func(s memory.SessionRef) bool {
		e.t.Helper()
		ok, err := e.s.BriefOnce(e.ctx, s, time.Hour)
		e.ok(err, "BriefOnce")
		return ok
	}
	if !brief(s1) {
		e.t.Fatal("first briefing refused")
	}
	if brief(s1) {
		e.t.Fatal("briefed twice")
	}
	if !brief(memory.SessionRef{Project: "p", Session: "s2"}) {
		e.t.Fatal("sessions share the flag")
	}
	e.c.Advance(59 * time.Minute)
	if brief(s1) {
		e.t.Fatal("flag expired early")
	}
	e.c.Advance(2 * time.Minute)
	if !brief(s1) {
		e.t.Fatal("flag did not expire")
	}
	_, err := e.s.BriefOnce(e.ctx, s1, 0)
	e.is(err, memory.ErrInvalid, "zero ttl")
}

func testLease(e *env) {
	acq := func(owner string, ttl time.Duration) bool {
		e.t.Helper()
		ok, err := e.s.AcquireLease(e.ctx, s1, "extract", owner, ttl)
		e.ok(err, "AcquireLease")
		return ok
	}
	renew := func(owner string) bool {
		e.t.Helper()
		ok, err := e.s.RenewLease(e.ctx, s1, "extract", owner, time.Minute)
		e.ok(err, "RenewLease")
		return ok
	}
	if !acq("a", time.Minute) || acq("b", time.Minute) {
		e.t.Fatal("exclusive acquire")
	}
	if !acq("a", time.Minute) {
		e.t.Fatal("the holder could not re-acquire")
	}
	ok, err := e.s.AcquireLease(e.ctx, s1, "compact", "b", time.Minute)
	e.ok(err, "AcquireLease")
	if !ok {
		e.t.Fatal("lease names are not independent")
	}
	e.c.Advance(50 * time.Second)
	if !renew("a") || renew("b") {
		e.t.Fatal("renew")
	}
	e.c.Advance(50 * time.Second) // 100 s after acquire, 50 s after renewal
	if acq("b", time.Minute) {
		e.t.Fatal("renewal did not extend the lease")
	}
	e.ok(e.s.ReleaseLease(e.ctx, s1, "extract", "b"), "ReleaseLease by the wrong owner")
	if acq("b", time.Minute) {
		e.t.Fatal("release by the wrong owner released the lease")
	}
	e.ok(e.s.ReleaseLease(e.ctx, s1, "extract", "a"), "ReleaseLease")
	if !acq("b", time.Minute) {
		e.t.Fatal("release did not free the lease")
	}
	e.c.Advance(61 * time.Second)
	if renew("b") {
		e.t.Fatal("an expired lease was renewed")
	}
	if !acq("c", time.Minute) {
		e.t.Fatal("an expired lease was not free")
	}
	_, err = e.s.AcquireLease(e.ctx, s1, "extract", "c", 0)
	e.is(err, memory.ErrInvalid, "zero ttl")
}

func testLeaseConcurrent(e *env) {
	for round := range 3 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winners []string
		start := make(chan struct{})
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				owner := fmt.Sprintf("w%d", i)
				ok, err := e.s.AcquireLease(e.ctx, s1, "consolidate", owner, time.Minute)
				if err != nil {
					e.t.Errorf("AcquireLease: %v", err)
					return
				}
				if ok {
					mu.Lock()
					winners = append(winners, owner)
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			e.t.Fatalf("round %d: %d winners %v, want exactly 1", round, len(winners), winners)
		}
		e.c.Advance(2 * time.Minute) // the lease expires; the next round competes again
	}
}

func testProcessed(e *env) {
	done := func(consumer, id string) bool {
		e.t.Helper()
		ok, err := e.s.EventProcessed(e.ctx, memory.ProjectRef{Project: "p"}, consumer, id)
		e.ok(err, "EventProcessed")
		return ok
	}
	if done("extractor", "e1") {
		e.t.Fatal("unseen event processed")
	}
	e.ok(e.s.MarkEventProcessed(e.ctx, memory.ProjectRef{Project: "p"}, "extractor", "e1", time.Hour), "MarkEventProcessed")
	e.ok(e.s.MarkEventProcessed(e.ctx, memory.ProjectRef{Project: "p"}, "injector", "e2", 0), "MarkEventProcessed forever")
	if !done("extractor", "e1") || done("injector", "e1") || done("extractor", "e2") {
		e.t.Fatal("records are per consumer and event")
	}
	ok, err := e.s.EventProcessed(e.ctx, memory.ProjectRef{Project: "q"}, "extractor", "e1")
	e.ok(err, "EventProcessed")
	if ok {
		e.t.Fatal("records are per project")
	}
	e.c.Advance(61 * time.Minute)
	if done("extractor", "e1") {
		e.t.Fatal("record did not expire")
	}
	if !done("injector", "e2") {
		e.t.Fatal("a record without ttl expired")
	}
}
