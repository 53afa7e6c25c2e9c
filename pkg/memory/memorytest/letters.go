package memorytest

import (
	"bytes"
	"time"
)

var letterTests = []subtest{
	{"Letters/ParkListDrop", testLetters},
}

// testLetters: letters come back oldest first, whole (binary bodies of any
// size the stream allows), a letter parked again under its key keeps its
// place, a dropped one is gone and dropping twice is not an error.
func testLetters(e *env) {
	n, err := e.s.CountParkedLetters(e.ctx)
	e.ok(err, "CountParkedLetters")
	if n != 0 {
		e.t.Fatalf("a new store has %d parked letters", n)
	}
	big := bytes.Repeat([]byte{0, 0xff, 'x', '\n'}, 300<<10/4) // 300 KiB, not UTF-8
	bodies := map[string][]byte{"dlq:ENGRAM_IN:injector:1": []byte("not json"), "dlq:ENGRAM_IN:injector:2": big,
		"dlq:ENGRAM_IN:extractor:3": {}}
	for _, k := range []string{"dlq:ENGRAM_IN:injector:1", "dlq:ENGRAM_IN:injector:2", "dlq:ENGRAM_IN:extractor:3"} {
		e.ok(e.s.ParkLetter(e.ctx, k, bodies[k]), "ParkLetter "+k)
		e.c.Advance(time.Second)
	}
	// The same message parked again (a second replica): one letter, first time kept.
	e.ok(e.s.ParkLetter(e.ctx, "dlq:ENGRAM_IN:injector:1", []byte("not json")), "ParkLetter again")
	got, err := e.s.ParkedLetters(e.ctx, 0)
	e.ok(err, "ParkedLetters")
	if len(got) != 3 {
		e.t.Fatalf("%d letters, want 3", len(got))
	}
	for i, want := range []string{"dlq:ENGRAM_IN:injector:1", "dlq:ENGRAM_IN:injector:2", "dlq:ENGRAM_IN:extractor:3"} {
		if got[i].Key != want || !bytes.Equal(got[i].Data, bodies[want]) || !timeEq(got[i].Parked, Epoch.Add(time.Duration(i)*time.Second)) {
			e.t.Fatalf("letter %d: key %q, %d bytes, parked %v; want %q, %d bytes", i, got[i].Key, len(got[i].Data), got[i].Parked, want, len(bodies[want]))
		}
	}
	first, err := e.s.ParkedLetters(e.ctx, 1)
	e.ok(err, "ParkedLetters limit")
	if len(first) != 1 || first[0].Key != "dlq:ENGRAM_IN:injector:1" {
		e.t.Fatalf("limit 1: %d letters", len(first))
	}
	e.ok(e.s.DropParkedLetter(e.ctx, "dlq:ENGRAM_IN:injector:1"), "DropParkedLetter")
	e.ok(e.s.DropParkedLetter(e.ctx, "dlq:ENGRAM_IN:injector:1"), "DropParkedLetter twice")
	e.ok(e.s.DropParkedLetter(e.ctx, "never parked"), "DropParkedLetter unknown")
	n, err = e.s.CountParkedLetters(e.ctx)
	e.ok(err, "CountParkedLetters")
	got, err = e.s.ParkedLetters(e.ctx, 10)
	e.ok(err, "ParkedLetters")
	if n != 2 || len(got) != 2 || got[0].Key != "dlq:ENGRAM_IN:injector:2" {
		e.t.Fatalf("after a drop: count %d, %d letters", n, len(got))
	}
	if err := e.s.ParkLetter(e.ctx, "", []byte("x")); err == nil {
		e.t.Fatal("a letter without a key was parked")
	}
}
