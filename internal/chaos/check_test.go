package chaos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/chaos"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// report is the suite's figures (docs/benchmarks.md, "Reliability under chaos").
type report struct {
	Clustered     bool           `json:"clustered"`
	NATSNodes     int            `json:"nats_nodes"`
	RedisNodes    int            `json:"redis_nodes"`
	Turns         int            `json:"turns"`
	Sessions      int            `json:"sessions"`
	Kills         int            `json:"kills"`
	KillsByRole   map[string]int `json:"kills_by_role"`
	NATSRestarts  int            `json:"nats_restarts"`
	RedisRestarts int            `json:"redis_restarts"`
	NATSDown      string         `json:"nats_down"`
	RedisDown     string         `json:"redis_down"`
	ModelOutage   string         `json:"model_outage"`
	// The NATS and Redis kills, each with the turns late in its window,
	// and the late turns outside every such window.
	Infra         []*infraKill `json:"infra_kills"`
	LateElsewhere int          `json:"late_outside_infra_kills"`
	// Worker starts that failed because Redis or NATS was down (the worker
	// exits with the reason; the suite restarts it, like a restart policy).
	StartFailures    int `json:"start_failures"`
	KillsDuringDrain int `json:"kills_after_replay"`

	// Injection: every turn_started answered (injection_ready on
	// ENGRAM_OUT) or skipped with the injector's logged reason.
	Replied  int `json:"replied_in_time"` // the platform got its block before the reply deadline
	Answered int `json:"answered"`        // injection_ready on ENGRAM_OUT
	Skipped  int `json:"skipped_late"`    // "arrived after its reply deadline; skipped" logged, no answer
	Lost     int `json:"lost"`            // neither

	// Extraction.
	TranscriptsWrong     int `json:"transcripts_wrong"`     // sessions whose stored transcript is not exactly their turns, once each
	TranscriptsReordered int `json:"transcripts_reordered"` // sessions with a turn stored after a later one (not a failure)
	TurnsNotExtracted    int `json:"turns_not_extracted"`   // turns without the extractor's done record
	MemoriesExpected     int `json:"memories_expected"`
	MemoriesMissing      int `json:"memories_missing"`
	Duplicated           int `json:"duplicated"` // extra live nodes of one expected text
	Unexpected           int `json:"unexpected"` // live nodes of no expected text

	// Feedback.
	InjectedPairs   int `json:"injected_pairs"`      // (turn, memory) pairs in the recorded blocks
	FeedbackApplied int `json:"feedback_applied"`    // useful + unhelpful over all memories
	DoubleFeedback  int `json:"double_feedback"`     // memories judged more often than the turns whose recorded block carried them
	Recorded        int `json:"turns_recorded"`      // turns with an injection record (the store, after the drain)
	RecordsMismatch int `json:"records_mismatch"`    // records unlike the turn's injection_ready or a block the platform got
	AnswerNoRecord  int `json:"answered_unrecorded"` // injection_ready on ENGRAM_OUT for a turn without a record
	TurnsUnseen     int `json:"turns_unseen"`        // turns with no answer seen by the platform nor on ENGRAM_OUT (none has a record)
	// Answered turns whose record write failed (the injector logged it, in
	// the Redis kill): no record and a late redelivery (not judged), or a
	// redelivery in time that composed the recorded block anew.
	RepliedUnrecorded int `json:"replied_unrecorded"`
	// Of them, turns answered by an injector killed -9 before it wrote the
	// record (it answers first), whose redelivery was skipped as late.
	KilledBeforeRecord int `json:"killed_between_reply_and_record"`
	// Turns the extractor judged without their injection record after
	// waiting for it (the platform named the block's memories in
	// turn_ended): at most the answered turns left without a record.
	Unjudged int `json:"unjudged"`
	// Redeliveries of an answered and recorded turn_started answered with
	// the recorded block (the injector's log), and those of them after the
	// reply deadline (skipped, leaving the record unmatched, before the fix).
	AnsweredFromRecord     int `json:"answered_from_record"`
	AnsweredFromRecordLate int `json:"answered_from_record_late"`
	RecomposedAfterFailure int `json:"recomposed_after_record_failure"`
	FeedbackTurnsBad       int `json:"feedback_turns_bad"` // turns with a block of memories but no feedback record

	// Consolidation and compaction.
	Consolidated    int `json:"sessions_consolidated"` // sessions with their review fact and a cursor past their first message
	ReviewsMissing  int `json:"reviews_missing"`
	Compacted       int `json:"sessions_compacted"`
	SummariesWrong  int `json:"summaries_wrong"` // missing, of another session, or nested
	ConsolidateDone int `json:"consolidation_done_events"`
	CompactionDone  int `json:"compaction_done_events"`

	DeadLettered uint64 `json:"dead_lettered"`

	// NATS authentication: the server ran with the role users of
	// `engram nats-config`, every process connected as its role; the
	// server's log holds no permission or authorization violation.
	NATSAuth             bool `json:"nats_auth"`
	PermissionViolations int  `json:"permission_violations"`

	Wall   string         `json:"wall"`
	Replay string         `json:"replay"`
	Seed   uint64         `json:"seed"`
	Model  map[string]int `json:"model_calls"`
}

const (
	skipMsg        = "turn_started arrived after its reply deadline; skipped"
	notRecordedMsg = "answered block not recorded" // the record write failed (the Redis kill): a redelivery composes anew
	againMsg       = "turn_started already answered; its recorded block sent again"
	unjudgedMsg    = "turns that carried memories were extracted without their injection record"
)

// check verifies what the deployment did against the script and returns
// the figures; every violation is also a test error.
func check(ctx context.Context, t *recT, c *cluster, d *driver, warm []*turnRec, injectorKills []time.Time) report {
	t.Helper()
	var r report
	st := c.store()

	// What ENGRAM_OUT holds.
	answered := map[string][]string{} // turn_started id -> injected ids
	blocks := map[string]string{}     // turn_started id -> the block of its injection_ready
	consolidated, compacted := map[string]int{}, map[string]int{}
	outMsgs := readStream(ctx, t, c, events.StreamOut)
	for _, m := range outMsgs {
		e, err := events.Decode(m)
		if err != nil {
			t.Errorf("ENGRAM_OUT: undecodable event: %v", err)
			continue
		}
		switch p := e.Payload.(type) {
		case events.InjectionReady:
			if _, dup := answered[p.InReplyTo]; dup {
				t.Errorf("two injection_ready for turn_started %s", p.InReplyTo)
			}
			answered[p.InReplyTo] = p.NodeIDs
			blocks[p.InReplyTo] = p.Block
		case events.ConsolidationDone:
			consolidated[e.ProjectID+"/"+e.SessionID]++
			r.ConsolidateDone++
		case events.CompactionDone:
			compacted[e.ProjectID+"/"+e.SessionID]++
			r.CompactionDone++
		}
	}
	skipped := map[string]bool{}
	unrecorded := map[string]bool{} // turn_started ids whose answered block the injector could not record
	for _, w := range c.workers {
		if !strings.HasPrefix(w.name, "injector") {
			continue
		}
		if err := w.grep(func(line string) {
			if strings.Contains(line, againMsg) {
				r.AnsweredFromRecord++
				if strings.Contains(line, `"late":true`) {
					r.AnsweredFromRecordLate++
				}
			}
			skip, norec := strings.Contains(line, skipMsg), strings.Contains(line, notRecordedMsg)
			if !skip && !norec {
				return
			}
			var l struct {
				EventID string `json:"event_id"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.EventID != "" {
				if skip {
					skipped[l.EventID] = true
				} else {
					unrecorded[l.EventID] = true
				}
			}
		}); err != nil {
			t.Error(err)
		}
	}

	// Turns.
	sessions := map[memory.SessionRef][]*turnRec{}
	var order []memory.SessionRef
	for _, tr := range d.turns {
		ref := memory.SessionRef{Project: tr.project, Session: tr.session}
		if _, ok := sessions[ref]; !ok {
			order = append(order, ref)
		}
		sessions[ref] = append(sessions[ref], tr)
		if tr.replied {
			r.Replied++
		}
		_, ok := answered[tr.startedID]
		switch {
		case ok:
			r.Answered++
		case skipped[tr.startedID]:
			r.Skipped++
		default:
			r.Lost++
			if r.Lost <= 10 {
				t.Errorf("turn %s/%s/%s (turn_started %s): neither answered nor skipped", tr.project, tr.session, tr.turn, tr.startedID)
			}
		}
	}
	r.Sessions = len(order)

	// Transcripts and extraction records.
	storedAt := map[memory.SessionRef]map[string]int{} // a session's turns by their place in the stored transcript
	for _, ref := range order {
		turns := sessions[ref]
		msgs, err := st.Messages(ctx, ref, 0, 0)
		if err != nil {
			t.Fatalf("messages of %v: %v", ref, err)
		}
		storedAt[ref] = map[string]int{}
		for i, m := range msgs {
			if _, ok := storedAt[ref][m.TurnID]; !ok {
				storedAt[ref][m.TurnID] = i
			}
		}
		problem, reordered := transcriptProblem(ref.Session, turns, msgs)
		if reordered {
			r.TranscriptsReordered++
		}
		if problem != "" {
			r.TranscriptsWrong++
			if r.TranscriptsWrong <= 10 {
				t.Errorf("transcript of %v: %s", ref, problem)
			}
		}
		for _, tr := range turns {
			key := strconv.Itoa(len(tr.session)) + ":" + tr.session + ":" + tr.turn
			ok, err := st.EventProcessed(ctx, memory.ProjectRef{Project: tr.project}, "extractor.turn", key)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				r.TurnsNotExtracted++
				if r.TurnsNotExtracted <= 10 {
					t.Errorf("turn %v/%s has no extractor.turn record", ref, tr.turn)
				}
			}
		}
	}

	// Memories: one live node per expected text, nothing else.
	type expect struct {
		project string
		review  bool
		session string
	}
	want := map[string]expect{}
	for _, ref := range order {
		for f := range chaos.FactsPerSession {
			if len(sessions[ref]) > f {
				want[chaos.FactLabel(ref.Session, f)] = expect{project: ref.Project, session: ref.Session}
			}
		}
		want[chaos.ReviewLabel(ref.Session)] = expect{project: ref.Project, review: true, session: ref.Session}
	}
	live := map[string][]memory.Node{}
	byID := map[string]memory.Node{}
	err := st.Scan(ctx, func(n memory.Node) error {
		byID[n.ID] = n
		if n.ArchivedAt.IsZero() && n.SupersededBy == "" && n.ValidTo.IsZero() {
			live[n.Label] = append(live[n.Label], n)
		}
		return nil
	}, func(memory.Edge) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	for label, e := range want {
		if !e.review {
			r.MemoriesExpected++
		}
		ns := live[label]
		switch {
		case len(ns) == 0 && e.review:
			r.ReviewsMissing++
			if r.ReviewsMissing <= 10 {
				t.Errorf("session %s: no review memory %q", e.session, label)
			}
		case len(ns) == 0:
			r.MemoriesMissing++
			if r.MemoriesMissing <= 10 {
				t.Errorf("session %s: memory %q missing", e.session, label)
			}
		case len(ns) > 1:
			r.Duplicated += len(ns) - 1
			t.Errorf("memory %q stored %d times: %v", label, len(ns), nodeIDs(ns))
		}
		for _, n := range ns {
			if n.ProjectID != e.project {
				t.Errorf("memory %q in project %q, want %q", label, n.ProjectID, e.project)
			}
		}
	}
	for label, ns := range live {
		if _, ok := want[label]; !ok {
			r.Unexpected += len(ns)
			t.Errorf("unexpected live memory %q (%d)", label, len(ns))
		}
	}

	// Feedback, exactly: a memory is judged at most once per turn whose
	// injection record carries it (the extractor judges a turn's record,
	// an id once per span; the scripted model says "used" for every
	// injected memory). The records are read back from the store: the
	// extractor keeps them an hour after finishing a turn
	// (extract.KeepInjection). Each record must be the turn's one block:
	// what its injection_ready on ENGRAM_OUT says (the injector publishes
	// it after the record, and answers a redelivery with the record) and
	// every answer the platform received for it (in time or late).
	carried := map[string]int{}
	recorded := map[string][]string{} // turn_started id -> recorded ids
	var noFeedback []*turnRec         // turns whose record carries memories and that have no feedback record
	for _, tr := range d.turns {
		rec, err := st.GetInjection(ctx, memory.SessionRef{Project: tr.project, Session: tr.session}, tr.turn)
		d.mu.Lock()
		seen := d.answers[tr.startedID]
		d.mu.Unlock()
		ids, out := answered[tr.startedID]
		switch {
		case memory.IsNotFound(err):
			if out {
				r.AnswerNoRecord++
				t.Errorf("turn %s/%s/%s: injection_ready %v on ENGRAM_OUT, no injection record", tr.project, tr.session, tr.turn, ids)
			}
			if len(seen) > 0 || tr.replied {
				// Answered, but the record write failed and the
				// redelivery came after the deadline: not judged.
				r.RepliedUnrecorded++
				switch {
				case unrecorded[tr.startedID]:
				case skipped[tr.startedID] && injectorKilledDuring(injectorKills, tr.started, tr.started.Add(d.injectTimeout)):
					// The injector answers before it records (for the
					// reply's latency): killed -9 in between, it could
					// log nothing, and its redelivery came after the
					// deadline (skipped).
					r.KilledBeforeRecord++
				default:
					r.AnswerNoRecord++
					t.Errorf("turn %s/%s/%s: the platform got %v, no injection record, no record failure logged", tr.project, tr.session, tr.turn, seen)
				}
			}
			if !out && len(seen) == 0 && !tr.replied {
				r.TurnsUnseen++
			}
			continue
		case err != nil:
			t.Fatalf("injection record of %s/%s/%s: %v", tr.project, tr.session, tr.turn, err)
		}
		r.Recorded++
		recorded[tr.startedID] = rec.IDs
		mismatch := func(what string, got []string, block string) {
			r.RecordsMismatch++
			if r.RecordsMismatch <= 10 {
				t.Errorf("turn %s/%s/%s: %s %v %q, its record %v %q", tr.project, tr.session, tr.turn, what, got, block, rec.IDs, rec.Text)
			}
		}
		if !out {
			mismatch("no injection_ready on ENGRAM_OUT", nil, "")
		} else if !slices.Equal(ids, rec.IDs) || blocks[tr.startedID] != rec.Text {
			mismatch("injection_ready", ids, blocks[tr.startedID])
		}
		// An answer of a delivery whose record write failed (logged) may
		// differ: the redelivery composed the recorded block anew.
		platformDiffers := false
		for _, a := range seen {
			platformDiffers = platformDiffers || !slices.Equal(a, rec.IDs)
		}
		platformDiffers = platformDiffers || tr.replied && (!slices.Equal(tr.ids, rec.IDs) || tr.block != rec.Text)
		switch {
		case platformDiffers && unrecorded[tr.startedID]:
			r.RecomposedAfterFailure++
		case platformDiffers:
			mismatch("the platform got", tr.ids, tr.block)
		}
		for _, id := range rec.IDs {
			carried[id]++
		}
		r.InjectedPairs += len(rec.IDs)
		if len(rec.IDs) > 0 {
			// The turn was extracted: its verdicts were applied, unless
			// every memory it carried was judged in an earlier turn of the
			// same span.
			key := strconv.Itoa(len(tr.session)) + ":" + tr.session + ":" + tr.turn
			ok, err := st.EventProcessed(ctx, memory.ProjectRef{Project: tr.project}, "extractor.feedback", key)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				noFeedback = append(noFeedback, tr) // judged earlier? once every record is read
			}
		}
	}
	for _, tr := range noFeedback {
		if !judgedEarlier(d, tr, recorded, storedAt[memory.SessionRef{Project: tr.project, Session: tr.session}]) {
			r.FeedbackTurnsBad++
			if r.FeedbackTurnsBad <= 10 {
				t.Logf("turn %s/%s/%s (turn_started %s at %s, answered %v at %s): its record carries %d memories, no feedback record",
					tr.project, tr.session, tr.turn, tr.startedID, tr.started.Format("15:04:05.000"), tr.replied, tr.repliedAt.Format("15:04:05.000"), len(recorded[tr.startedID]))
			}
		}
	}
	for id, n := range byID {
		judged := n.Useful + n.Unhelpful
		r.FeedbackApplied += judged
		if judged > carried[id] {
			r.DoubleFeedback++
			t.Errorf("memory %s %q judged %d times, carried by the records of %d turns", id, n.Label, judged, carried[id])
		}
	}
	if r.InjectedPairs > 0 && r.FeedbackApplied == 0 {
		t.Errorf("no feedback applied for %d injected memories", r.InjectedPairs)
	}

	// Consolidation and compaction.
	for _, ref := range order {
		key := ref.Project + "/" + ref.Session
		if len(live[chaos.ReviewLabel(ref.Session)]) > 0 {
			if cur, err := st.Cursor(ctx, ref); err == nil && cur > 0 && consolidated[key] > 0 {
				r.Consolidated++
			} else {
				t.Errorf("session %v: review stored but cursor %d (%v), %d consolidation_done", ref, cur, err, consolidated[key])
			}
		}
		msgs, _ := st.Messages(ctx, ref, 0, 0)
		chars := 0
		for _, m := range msgs {
			chars += len(m.Content)
		}
		sum, err := st.LatestSummary(ctx, ref)
		switch {
		case errors.Is(err, memory.ErrNotFound):
			if chars/4 >= 2*compactThreshold {
				r.SummariesWrong++
				t.Errorf("session %v: %d tokens of transcript, no summary", ref, chars/4)
			}
		case err != nil:
			t.Fatal(err)
		default:
			if n := strings.Count(sum.Content, "chaos summary of "); n != 1 || !strings.Contains(sum.Content, chaos.SummaryMarker(ref.Session)) || sum.UpTo <= 0 || compacted[key] == 0 {
				r.SummariesWrong++
				t.Errorf("session %v: summary up to %d, %d compaction_done, markers %d:\n%s", ref, sum.UpTo, compacted[key], n, sum.Content)
			} else {
				r.Compacted++
			}
		}
	}

	// Nothing dead-lettered.
	if s, err := c.js.Stream(ctx, events.StreamDLQ); err != nil {
		t.Errorf("DLQ: %v", err)
	} else if info, err := s.Info(ctx); err != nil {
		t.Errorf("DLQ: %v", err)
	} else {
		r.DeadLettered = info.State.Msgs
		if info.State.Msgs > 0 {
			for _, m := range readStream(ctx, t, c, events.StreamDLQ)[:min(5, int(info.State.Msgs))] {
				t.Errorf("dead letter: %.300s", m)
			}
		}
	}
	// Least privilege held: nothing any process did was refused.
	r.NATSAuth = true
	for _, n := range c.natsNodes {
		if err := n.p.grep(func(line string) {
			// "Publish Violation", "Subscription Violation", "Authorization
			// Violation" (nats-server's log of a refused client operation).
			if strings.Contains(line, " Violation") {
				r.PermissionViolations++
				if r.PermissionViolations <= 10 {
					t.Errorf("%s: %.400s", n.p.name, line)
				}
			}
		}); err != nil {
			t.Error(err)
		}
	}
	for _, w := range c.workers {
		if !strings.HasPrefix(w.name, "extractor") {
			continue
		}
		if err := w.grep(func(line string) {
			var l struct {
				Turns int `json:"turns"`
			}
			if strings.Contains(line, unjudgedMsg) && json.Unmarshal([]byte(line), &l) == nil {
				r.Unjudged += l.Turns
			}
		}); err != nil {
			t.Error(err)
		}
	}
	if r.Unjudged > r.RepliedUnrecorded {
		t.Errorf("%d turns judged without their injection record, %d answered turns left without one: a record was lost", r.Unjudged, r.RepliedUnrecorded)
	}
	if r.RecordsMismatch > 0 || r.AnswerNoRecord > 0 {
		t.Errorf("%d injection records unlike the turn's answers, %d answers without a record", r.RecordsMismatch, r.AnswerNoRecord)
	}
	if r.Lost > 0 || r.TranscriptsWrong > 0 || r.TurnsNotExtracted > 0 || r.MemoriesMissing > 0 || r.FeedbackTurnsBad > 0 {
		t.Errorf("lost work: %d turns unanswered, %d transcripts wrong, %d turns not extracted, %d memories missing, %d turns without feedback",
			r.Lost, r.TranscriptsWrong, r.TurnsNotExtracted, r.MemoriesMissing, r.FeedbackTurnsBad)
	}
	_ = warm
	return r
}

// injectorKilledDuring reports whether an injector was killed -9 in
// [from, to].
func injectorKilledDuring(kills []time.Time, from, to time.Time) bool {
	for _, k := range kills {
		if !k.Before(from) && !k.After(to) {
			return true
		}
	}
	return false
}

// judgedEarlier reports whether every memory of tr's recorded block was
// also in the recorded block of an earlier turn of its session (the
// extractor judges an id once per span, against the first turn carrying
// it). answered holds the session's records. Earlier is the
// session's stored order (storedAt: a turn's place in its stored
// transcript), which a span follows: a turn_ended redelivered after a
// later one was stored comes after it there, and the later turn, first in
// the span, is the one judged (the conversation's order, where the turns
// are not stored, as before).
func judgedEarlier(d *driver, tr *turnRec, answered map[string][]string, storedAt map[string]int) bool {
	before := func(o *turnRec) bool {
		a, okA := storedAt[o.turn]
		b, okB := storedAt[tr.turn]
		if okA && okB {
			return a < b
		}
		return o.index < tr.index
	}
	earlier := map[string]bool{}
	for _, o := range d.turns {
		if o.session == tr.session && o.project == tr.project && before(o) {
			for _, id := range answered[o.startedID] {
				earlier[id] = true
			}
		}
	}
	for _, id := range answered[tr.startedID] {
		if !earlier[id] {
			return false
		}
	}
	return true
}

// transcriptProblem compares a session's stored messages with its turns:
// exactly the user and assistant message of each turn, next to each other,
// once, with increasing ids. reordered reports turns stored out of the
// conversation's order (a turn_ended redelivered after a later one was
// stored: the store appends in arrival order).
func transcriptProblem(sid string, turns []*turnRec, msgs []memory.Message) (problem string, reordered bool) {
	if len(msgs) != 2*len(turns) {
		return fmt.Sprintf("%d messages, want %d", len(msgs), 2*len(turns)), false
	}
	index := map[string]int{}
	for _, tr := range turns {
		index[tr.turn] = tr.index
	}
	seen := map[string]bool{}
	last := -1
	for i := 0; i < len(msgs); i += 2 {
		u, a := msgs[i], msgs[i+1]
		t, ok := index[u.TurnID]
		switch {
		case !ok || seen[u.TurnID]:
			return fmt.Sprintf("message %d: turn %q unknown or stored twice", i, u.TurnID), false
		case a.TurnID != u.TurnID || u.Content != chaos.UserText(sid, t) || a.Content != chaos.AssistantText(sid, t):
			return fmt.Sprintf("messages %d-%d: turn %q/%q %q is not the turn's user and assistant message", i, i+1, u.TurnID, a.TurnID, u.Content), false
		case i > 0 && u.ID <= msgs[i-1].ID, a.ID <= u.ID:
			return fmt.Sprintf("message ids not increasing at %d", i), false
		}
		seen[u.TurnID] = true
		if t < last {
			reordered = true
		}
		last = max(last, t)
	}
	return "", reordered
}

func nodeIDs(ns []memory.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.ID)
	}
	return out
}

// readStream returns the bodies of every message of a stream.
func readStream(ctx context.Context, t *recT, c *cluster, stream string) [][]byte {
	t.Helper()
	out, err := readStreamOnce(ctx, c, stream)
	// In a cluster, a request may find no responder for a moment: the
	// ordered consumer just created is not yet known on the server the
	// checks are connected to (interest crosses the routes
	// asynchronously). Read again.
	for try := 1; errors.Is(err, nats.ErrNoResponders) && try < 50; try++ {
		time.Sleep(200 * time.Millisecond)
		out, err = readStreamOnce(ctx, c, stream)
	}
	if err != nil {
		t.Fatalf("%s: %v", stream, err)
	}
	return out
}

func readStreamOnce(ctx context.Context, c *cluster, stream string) ([][]byte, error) {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	if info.State.Msgs == 0 {
		return nil, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for uint64(len(out)) < info.State.Msgs {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			out = append(out, m.Data())
			n++
			if md, err := m.Metadata(); err == nil && md.Sequence.Stream >= info.State.LastSeq {
				return out, nil
			}
		}
		if n == 0 {
			if err := batch.Error(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("read %d of %d messages", len(out), info.State.Msgs)
		}
	}
	return out, nil
}
