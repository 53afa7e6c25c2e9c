package chaos_test

import "testing"

// TestJudgedEarlierFollowsTheStoredOrder: the extractor judges a memory
// injected into two turns of a span at the first of them in the stored
// transcript; a turn_ended redelivered after the next turn's was stored
// (an extractor killed as it arrived) puts the turn after its successor
// there, and the successor carries the verdict. The check excuses the
// turn then, and only then: not a turn whose memory no turn stored before
// it carried.
func TestJudgedEarlierFollowsTheStoredOrder(t *testing.T) {
	t3 := &turnRec{project: "p", session: "s", turn: "t3", index: 3, startedID: "e3"}
	t4 := &turnRec{project: "p", session: "s", turn: "t4", index: 4, startedID: "e4"}
	d := &driver{turns: []*turnRec{t3, t4}}
	records := map[string][]string{"e3": {"m1"}, "e4": {"m1"}}
	inOrder := map[string]int{"t3": 0, "t4": 2}
	reordered := map[string]int{"t4": 0, "t3": 2}
	if judgedEarlier(d, t3, records, inOrder) {
		t.Error("t3, stored first, was excused: its memory was judged nowhere before it")
	}
	if !judgedEarlier(d, t3, records, reordered) {
		t.Error("t3, stored after t4 which carried its memory, was not excused")
	}
	if !judgedEarlier(d, t4, records, inOrder) || judgedEarlier(d, t4, records, reordered) {
		t.Error("t4: excused by the wrong order")
	}
	if !judgedEarlier(d, t4, records, nil) {
		t.Error("without a stored transcript the conversation's order counts")
	}
}
