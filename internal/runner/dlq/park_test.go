package dlq_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/runner/dlq"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// brokenShelf is a store that cannot park (disk full, Redis down).
type brokenShelf struct{ dlq.Shelf }

func (brokenShelf) ParkLetter(context.Context, string, []byte) error {
	return memory.ErrUnavailable
}

func fullDLQ(t *testing.T) (jetstream.JetStream, events.Topology) {
	t.Helper()
	_, js, topo := setup(t, func(topo *events.Topology) { topo.DLQ.MaxBytes = 2 << 10 })
	for i := 0; ; i++ {
		m := nats.NewMsg(topo.Subjects().DLQ("filler"))
		m.Data = make([]byte, 400)
		if _, err := js.PublishMsg(context.Background(), m); err != nil {
			return js, topo
		}
		if i > 100 {
			t.Fatal("the DLQ never filled")
		}
	}
}

func openShelf(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "engram.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// A letter the DLQ refuses is parked whole; while letters wait the next
// goes to the shelf without asking the DLQ; Move keeps them until the DLQ
// takes them, then stores them (headers and body as the runner wrote them)
// and empties the shelf.
func TestParkingParksAndMoves(t *testing.T) {
	ctx := context.Background()
	js, topo := fullDLQ(t)
	st := openShelf(t)
	p := dlq.NewParking(dlq.NewWriter(js, topo.Subjects()), st, dlq.ParkingOptions{})
	for seq := uint64(1); seq <= 3; seq++ {
		parked, err := p.Put(ctx, letter(seq))
		if err != nil || !parked {
			t.Fatalf("put %d: parked %v, %v", seq, parked, err)
		}
	}
	s := p.Status()
	if s.Waiting != 3 || s.Refused == nil || !strings.Contains(s.Refused.Error(), "maximum bytes exceeded") || s.Parked != 3 {
		t.Fatalf("status %+v", s)
	}
	if moved, err := p.Move(ctx); moved != 0 || err == nil {
		t.Fatalf("move with a full DLQ: %d, %v", moved, err)
	}
	if n, _ := st.CountParkedLetters(ctx); n != 3 {
		t.Fatalf("%d parked after a refused move", n)
	}
	dst, err := js.Stream(ctx, events.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Purge(ctx, jetstream.WithPurgeSubject(topo.Subjects().DLQ("filler"))); err != nil {
		t.Fatal(err)
	}
	for {
		moved, err := p.Move(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if moved == 0 {
			break
		}
	}
	ls, err := dlq.NewStore(js, events.StreamDLQ).List(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 3 {
		t.Fatalf("%d letters in the DLQ", len(ls))
	}
	for i, l := range ls {
		want := letter(uint64(i + 1))
		if l.Sequence != want.Sequence || l.Reason != "bad thing" || string(l.Data) != string(want.Data) ||
			l.MsgID != "ev-1" || l.Header.Get(events.HeaderType) != "turn_ended" || l.Deliveries != 3 {
			t.Fatalf("letter %d: %+v", i, l)
		}
	}
	if s := p.Status(); s.Waiting != 0 || s.Refused != nil || s.Moved != 3 {
		t.Fatalf("status after the move %+v", s)
	}
	if msg, failed := p.Status().Problem(); msg != "" || failed {
		t.Fatalf("problem %q", msg)
	}
	// The DLQ takes letters again: the next goes there directly.
	if parked, err := p.Put(ctx, letter(9)); err != nil || parked {
		t.Fatalf("put with room: parked %v, %v", parked, err)
	}
}

// With the DLQ full and the store failing, Put says the letter is stored
// nowhere (the runner keeps the event) and the status is a failure.
func TestParkingStoredNowhere(t *testing.T) {
	js, topo := fullDLQ(t)
	p := dlq.NewParking(dlq.NewWriter(js, topo.Subjects()), brokenShelf{openShelf(t)}, dlq.ParkingOptions{})
	parked, err := p.Put(context.Background(), letter(1))
	if err == nil || parked || !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("put: parked %v, %v", parked, err)
	}
	msg, failed := p.Status().Problem()
	if !failed || !strings.Contains(msg, "stored nowhere") {
		t.Fatalf("problem %q failed %v", msg, failed)
	}
}
