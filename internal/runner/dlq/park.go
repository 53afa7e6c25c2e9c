package dlq

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// Shelf is where letters the DLQ refused wait: memory.Store implements it
// (memory.Letters).
type Shelf interface {
	ParkLetter(ctx context.Context, key string, data []byte) error
	ParkedLetters(ctx context.Context, limit int) ([]memory.ParkedLetter, error)
	CountParkedLetters(ctx context.Context) (int, error)
	DropParkedLetter(ctx context.Context, key string) error
}

var _ Shelf = memory.Letters(nil)

// Parking stores dead letters in the DLQ, or, while the DLQ refuses them
// (full: "maximum bytes exceeded"; unreachable), on a Shelf (the memory
// store), and moves the parked ones to the DLQ once it takes them again.
// Put returns only once the letter is stored in one place or the other, so
// the runner can terminate the event at once: a poison event never holds
// its consumer's ack-pending slots while the DLQ refuses letters, and no
// letter is dropped. One Parking serves every runner of a process.
//
// While letters are parked (the DLQ refused one and the shelf is not empty
// yet) Put parks new letters directly, without asking the DLQ: it keeps
// their order and spares each a publish timeout when the DLQ is
// unreachable. The mover (Start) asks the DLQ again every interval with
// the oldest parked letter; a letter moved is stored in the DLQ (its
// Nats-Msg-Id is MsgID, so two processes moving the same letter store it
// once within the DLQ's duplicate window) before it is dropped from the
// shelf.
type Parking struct {
	w          *Writer
	shelf      Shelf
	interval   time.Duration
	putTimeout time.Duration
	batch      int

	mu       sync.Mutex
	refused  error     // the DLQ's last refusal, while letters wait
	since    time.Time // when the DLQ started refusing
	waiting  int       // letters on the shelf, as last counted (plus those parked since)
	shelfErr error     // the shelf's last failure, until it works again
	parked   uint64
	moved    uint64

	stop context.CancelFunc
	done chan struct{}
}

// ParkingOptions tune a Parking; zero values take the defaults.
type ParkingOptions struct {
	// Interval is how often the mover tries the DLQ again and counts the
	// shelf; default 5s.
	Interval time.Duration
	// PutTimeout bounds one publish to the DLQ; default 5s.
	PutTimeout time.Duration
	// Batch is how many letters one round moves at most; default 100.
	Batch int
}

// NewParking returns a Parking writing with w and parking on shelf. Start
// runs its mover.
func NewParking(w *Writer, shelf Shelf, o ParkingOptions) *Parking {
	if o.Interval <= 0 {
		o.Interval = 5 * time.Second
	}
	if o.PutTimeout <= 0 {
		o.PutTimeout = 5 * time.Second
	}
	if o.Batch <= 0 {
		o.Batch = 100
	}
	return &Parking{w: w, shelf: shelf, interval: o.Interval, putTimeout: o.PutTimeout, batch: o.Batch}
}

// Writer is the DLQ writer the parking publishes with.
func (p *Parking) Writer() *Writer { return p.w }

// Put stores l in the DLQ, or parks it on the shelf when the DLQ refuses it
// (or refused the letters still waiting). parked says where it went. An
// error means it is stored nowhere: the caller must keep the event.
func (p *Parking) Put(ctx context.Context, l Letter) (parked bool, err error) {
	if l.Time.IsZero() {
		l.Time = time.Now()
	}
	p.mu.Lock()
	refusing := p.refused != nil
	p.mu.Unlock()
	if !refusing {
		pctx, cancel := context.WithTimeout(ctx, p.putTimeout)
		err := p.w.Put(pctx, l)
		cancel()
		if err == nil {
			return false, nil
		}
		p.refusedBy(err)
	}
	data, err := json.Marshal(l)
	if err != nil {
		return false, fmt.Errorf("dlq: encode letter: %w", err)
	}
	if err := p.shelf.ParkLetter(ctx, MsgID(l.Stream, l.Consumer, l.Sequence), data); err != nil {
		p.mu.Lock()
		p.shelfErr = err
		refusal := p.refused
		p.mu.Unlock()
		return false, fmt.Errorf("dlq: the DLQ refused the letter (%v) and the store could not park it: %w", refusal, err)
	}
	p.mu.Lock()
	p.shelfErr = nil
	p.waiting++
	p.parked++
	p.mu.Unlock()
	return true, nil
}

func (p *Parking) refusedBy(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refused == nil {
		p.since = time.Now()
	}
	p.refused = err
}

// Move moves up to one batch of parked letters to the DLQ, oldest first,
// stopping at the first the DLQ refuses, then counts what is left. It
// returns how many it moved. A letter is dropped from the shelf only after
// the DLQ stored it.
func (p *Parking) Move(ctx context.Context) (int, error) {
	ls, err := p.shelf.ParkedLetters(ctx, p.batch)
	if err != nil {
		p.setShelfErr(err)
		return 0, fmt.Errorf("dlq: read parked letters: %w", err)
	}
	moved := 0
	var putErr error
	for _, pl := range ls {
		var l Letter
		if err := json.Unmarshal(pl.Data, &l); err != nil {
			// Not written by this package: kept where it is, reported.
			putErr = fmt.Errorf("dlq: parked letter %s is not a letter: %w", pl.Key, err)
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, p.putTimeout)
		err := p.w.Put(pctx, l)
		cancel()
		if err != nil {
			p.refusedBy(err)
			putErr = err
			break
		}
		if err := p.shelf.DropParkedLetter(ctx, pl.Key); err != nil {
			p.setShelfErr(err)
			return moved, fmt.Errorf("dlq: drop moved letter %s: %w", pl.Key, err)
		}
		moved++
	}
	n, err := p.shelf.CountParkedLetters(ctx)
	if err != nil {
		p.setShelfErr(err)
		return moved, fmt.Errorf("dlq: count parked letters: %w", err)
	}
	p.mu.Lock()
	p.waiting, p.shelfErr = n, nil
	p.moved += uint64(moved)
	if n == 0 && putErr == nil {
		p.refused, p.since = nil, time.Time{}
	}
	p.mu.Unlock()
	return moved, putErr
}

func (p *Parking) setShelfErr(err error) {
	p.mu.Lock()
	p.shelfErr = err
	p.mu.Unlock()
}

// Start runs the mover until Stop: a round (Move) at once and every
// interval; each round's error goes to onErr (may be nil).
func (p *Parking) Start(onErr func(error)) {
	ctx, cancel := context.WithCancel(context.Background())
	p.stop, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			for {
				moved, err := p.Move(ctx)
				if err != nil && onErr != nil && ctx.Err() == nil {
					onErr(err)
				}
				// A full batch moved: more may wait, go on at once.
				if err != nil || moved < p.batch || ctx.Err() != nil {
					break
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends the mover and waits for it. Letters still parked stay on the
// shelf for the next process.
func (p *Parking) Stop() {
	if p.stop == nil {
		return
	}
	p.stop()
	<-p.done
}

// ParkingStatus is a snapshot of a Parking (for readiness, status and
// metrics).
type ParkingStatus struct {
	// Waiting is how many letters are parked (last count, plus those
	// parked since).
	Waiting int
	// Refused is the DLQ's last refusal while letters wait (nil: the DLQ
	// takes letters), since Since.
	Refused error
	Since   time.Time
	// ShelfErr is the shelf's last failure (nil once it works again):
	// with Refused set, a dead letter can be stored nowhere and its event
	// stays in its stream, holding its consumer's slot.
	ShelfErr error
	// Parked and Moved count the letters this process parked and moved.
	Parked, Moved uint64
}

// Status returns the parking's state.
func (p *Parking) Status() ParkingStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return ParkingStatus{Waiting: p.waiting, Refused: p.refused, Since: p.since, ShelfErr: p.shelfErr,
		Parked: p.parked, Moved: p.moved}
}

// Problem describes the status for a readiness check: "" when letters go
// to the DLQ; degraded when letters wait on the shelf (events keep
// flowing); failed (degraded false) when a letter could be stored nowhere.
func (s ParkingStatus) Problem() (msg string, failed bool) {
	switch {
	case s.Refused != nil && s.ShelfErr != nil:
		return fmt.Sprintf("dead letters can be stored nowhere: ENGRAM_DLQ refuses them (%v) and the store cannot park them (%v); "+
			"their events stay in their stream, holding their consumers' slots", s.Refused, s.ShelfErr), true
	case s.Waiting > 0 && s.Refused != nil:
		return fmt.Sprintf("%d dead letters parked in the store since %s: ENGRAM_DLQ refuses them (%v); "+
			"they move there once it has room (events keep flowing)", s.Waiting, s.Since.UTC().Format(time.RFC3339), s.Refused), false
	case s.Waiting > 0:
		return fmt.Sprintf("%d dead letters parked in the store, moving to ENGRAM_DLQ", s.Waiting), false
	case s.ShelfErr != nil:
		return fmt.Sprintf("parked dead letters cannot be read: %v", s.ShelfErr), false
	}
	return "", false
}
