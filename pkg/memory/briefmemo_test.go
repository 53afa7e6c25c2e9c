package memory

import (
	"fmt"
	"testing"
)

// TestBriefMemo: the memo answers until the expiry it was given (a later
// expiry is kept over an earlier one), and a growing memo sweeps the
// expired entries instead of keeping every session.
func TestBriefMemo(t *testing.T) {
	var m BriefMemo
	ref := func(i int) SessionRef { return SessionRef{Project: "p", Session: fmt.Sprint("s", i)} }
	m.Remember(ref(0), 100, 0)
	if !m.Taken(ref(0), 99) || m.Taken(ref(0), 100) || m.Taken(ref(1), 0) {
		t.Fatal("the memo does not answer by the expiry it was given")
	}
	m.Remember(ref(0), 50, 0)
	if !m.Taken(ref(0), 99) {
		t.Fatal("an earlier expiry replaced a later one")
	}
	for i := range 5000 {
		m.Remember(ref(i), int64(1000+i), int64(1000+i-1)) // each expires just after it is remembered
	}
	if len(m.until) > 2048 {
		t.Fatalf("the memo kept %d sessions, most of them expired", len(m.until))
	}
	if !m.Taken(ref(4999), 5998) {
		t.Fatal("a sweep dropped a session whose flag has not expired")
	}
}
