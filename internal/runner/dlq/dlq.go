package dlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/pkg/events"
)

// ErrNotFound: no dead letter at that sequence.
var ErrNotFound = errors.New("dlq: no such dead letter")

// Letter is a dead letter: the original message and why it was given up.
type Letter struct {
	Consumer   string
	Reason     string
	Subject    string // original subject
	Stream     string // original stream
	Sequence   uint64 // original stream sequence
	Deliveries uint64
	MsgID      string // original Nats-Msg-Id (the event id)
	Time       time.Time
	Header     nats.Header // the original headers, without the Nats-* ones
	Data       []byte      // the original body (its first bytes when Truncated)
	// Truncated is the original body's size when the letter keeps only its
	// first bytes (the whole letter did not fit the server's maximum
	// payload); 0 when the body is whole.
	Truncated int

	DLQSequence uint64 // set when read back from ENGRAM_DLQ
}

// MsgID is the Nats-Msg-Id of the dead letter of (stream, consumer,
// sequence): the same message dead-lettered twice (by the runner and by the
// max-deliveries watcher, or by two replicas) is stored once within
// ENGRAM_DLQ's duplicate window.
func MsgID(stream, consumer string, seq uint64) string {
	return "dlq:" + stream + ":" + consumer + ":" + strconv.FormatUint(seq, 10)
}

// Writer puts dead letters into ENGRAM_DLQ on <prefix>.dlq.<consumer>. It
// remembers the last letters it wrote, so that a capture of a message it
// already dead-lettered is skipped even after the stream's duplicate window.
type Writer struct {
	js       jetstream.JetStream
	subjects events.Subjects

	mu     sync.Mutex
	recent map[string]struct{}
	order  []string
}

// recentCap bounds the writer's memory of what it wrote.
const recentCap = 4096

// NewWriter returns a writer publishing through js under subjects' prefix.
func NewWriter(js jetstream.JetStream, subjects events.Subjects) *Writer {
	return &Writer{js: js, subjects: subjects, recent: map[string]struct{}{}}
}

func (w *Writer) wrote(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.recent[id]
	return ok
}

func (w *Writer) remember(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.recent[id]; ok {
		return
	}
	w.recent[id] = struct{}{}
	w.order = append(w.order, id)
	if len(w.order) > recentCap {
		delete(w.recent, w.order[0])
		w.order = w.order[1:]
	}
}

// maxReason bounds the reason header.
const maxReason = 1024

// Put stores l in the DLQ and waits for the stream's ack. A letter for the
// same (stream, consumer, sequence) that this writer already stored, or that
// the stream already holds within its duplicate window, is not stored again.
func (w *Writer) Put(ctx context.Context, l Letter) error {
	id := MsgID(l.Stream, l.Consumer, l.Sequence)
	if w.wrote(id) {
		return nil
	}
	m := nats.NewMsg(w.subjects.DLQ(l.Consumer))
	m.Data = l.Data
	for k, vs := range l.Header {
		if strings.HasPrefix(strings.ToLower(k), "nats-") || strings.HasPrefix(k, "Engram-Dlq-") {
			continue
		}
		for _, v := range vs {
			m.Header.Add(k, v)
		}
	}
	if l.Time.IsZero() {
		l.Time = time.Now()
	}
	m.Header.Set(jetstream.MsgIDHeader, id)
	m.Header.Set(events.HeaderDLQReason, clip(oneLine(l.Reason), maxReason))
	m.Header.Set(events.HeaderDLQConsumer, l.Consumer)
	m.Header.Set(events.HeaderDLQSubject, l.Subject)
	m.Header.Set(events.HeaderDLQStream, l.Stream)
	m.Header.Set(events.HeaderDLQSequence, strconv.FormatUint(l.Sequence, 10))
	m.Header.Set(events.HeaderDLQDeliveries, strconv.FormatUint(l.Deliveries, 10))
	if l.MsgID != "" {
		m.Header.Set(events.HeaderDLQMsgID, l.MsgID)
	}
	m.Header.Set(events.HeaderDLQTime, l.Time.UTC().Format(time.RFC3339Nano))
	fit(m, w.js.Conn().MaxPayload())
	if _, err := w.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("dlq: put %s seq %d: %w", l.Consumer, l.Sequence, err)
	}
	w.remember(id)
	return nil
}

// headerSlack covers what headerSize does not count exactly (the
// truncation header itself, the server's own additions to the size check).
const headerSlack = 256

// headerSize is the wire size of m's header block (NATS/1.0 line, one
// "Key: value" line per value, the blank line).
func headerSize(h nats.Header) int {
	n := len("NATS/1.0\r\n") + 2
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}

// fit makes m fit maxPayload (headers + body): a letter that does not fit
// keeps the first bytes of its body and says so in HeaderDLQTruncated (the
// original's stream and sequence are already in its headers). When even the
// headers do not fit, the original's copied headers are dropped first.
func fit(m *nats.Msg, maxPayload int64) {
	if maxPayload <= 0 || int64(headerSize(m.Header)+len(m.Data)) <= maxPayload {
		return
	}
	orig := len(m.Data)
	m.Header.Set(events.HeaderDLQTruncated, strconv.Itoa(orig))
	if int64(headerSize(m.Header)+headerSlack) > maxPayload {
		for k := range m.Header {
			if !strings.HasPrefix(strings.ToLower(k), "nats-") && !strings.HasPrefix(k, "Engram-Dlq-") {
				delete(m.Header, k)
			}
		}
	}
	room := int(maxPayload) - headerSize(m.Header) - headerSlack
	m.Data = m.Data[:max(0, min(room, orig))]
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}

// FromRaw reads a dead letter stored in ENGRAM_DLQ.
func FromRaw(m *jetstream.RawStreamMsg) Letter {
	h := m.Header
	num := func(k string) uint64 { v, _ := strconv.ParseUint(h.Get(k), 10, 64); return v }
	t, _ := time.Parse(time.RFC3339Nano, h.Get(events.HeaderDLQTime))
	trunc, _ := strconv.Atoi(h.Get(events.HeaderDLQTruncated))
	orig := nats.Header{}
	for k, vs := range h {
		if strings.HasPrefix(strings.ToLower(k), "nats-") || strings.HasPrefix(k, "Engram-Dlq-") {
			continue
		}
		orig[k] = append([]string(nil), vs...)
	}
	return Letter{
		Consumer:    h.Get(events.HeaderDLQConsumer),
		Reason:      h.Get(events.HeaderDLQReason),
		Subject:     h.Get(events.HeaderDLQSubject),
		Stream:      h.Get(events.HeaderDLQStream),
		Sequence:    num(events.HeaderDLQSequence),
		Deliveries:  num(events.HeaderDLQDeliveries),
		MsgID:       h.Get(events.HeaderDLQMsgID),
		Time:        t,
		Header:      orig,
		Data:        m.Data,
		Truncated:   trunc,
		DLQSequence: m.Sequence,
	}
}

// Store reads and replays the dead letters of one DLQ stream (for `engram
// dlq list|show|replay`).
type Store struct {
	js     jetstream.JetStream
	stream string
}

// NewStore returns a reader of the DLQ stream named stream (events.StreamDLQ
// by default topology).
func NewStore(js jetstream.JetStream, stream string) *Store {
	return &Store{js: js, stream: stream}
}

// List returns up to limit dead letters, oldest first, starting at sequence
// from (0: the first).
func (s *Store) List(ctx context.Context, from uint64, limit int) ([]Letter, error) {
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return nil, fmt.Errorf("dlq: stream %s: %w", s.stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("dlq: stream %s info: %w", s.stream, err)
	}
	if info.State.Msgs == 0 {
		return nil, nil
	}
	seq := max(from, info.State.FirstSeq, 1)
	var out []Letter
	for ; seq <= info.State.LastSeq && (limit <= 0 || len(out) < limit); seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("dlq: get %d: %w", seq, err)
		}
		out = append(out, FromRaw(m))
	}
	return out, nil
}

// Get returns the dead letter at DLQ sequence seq.
func (s *Store) Get(ctx context.Context, seq uint64) (Letter, error) {
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return Letter{}, fmt.Errorf("dlq: stream %s: %w", s.stream, err)
	}
	m, err := st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Letter{}, fmt.Errorf("%w: %d", ErrNotFound, seq)
	}
	if err != nil {
		return Letter{}, fmt.Errorf("dlq: get %d: %w", seq, err)
	}
	return FromRaw(m), nil
}

// Replay publishes the letter at seq again on its original subject (same
// body and headers, a new Nats-Msg-Id so the duplicate window does not drop
// it) and then deletes it from the DLQ. The event id in the body is
// unchanged; since the event was never processed, workers handle it.
func (s *Store) Replay(ctx context.Context, seq uint64) error {
	l, err := s.Get(ctx, seq)
	if err != nil {
		return err
	}
	if l.Subject == "" {
		return fmt.Errorf("dlq: letter %d has no original subject", seq)
	}
	if l.Truncated > 0 {
		return fmt.Errorf("dlq: letter %d keeps %d of the original's %d bytes and cannot be replayed: "+
			"republish the event (stream %s, sequence %d) from its source", seq, len(l.Data), l.Truncated, l.Stream, l.Sequence)
	}
	// A letter of an event stored before the subjects named the tenant is
	// replayed on its current subject (ENGRAM_IN no longer takes the
	// older form).
	m := nats.NewMsg(events.CurrentSubject(l.Subject))
	m.Data = l.Data
	for k, vs := range l.Header {
		for _, v := range vs {
			m.Header.Add(k, v)
		}
	}
	id := l.MsgID
	if id == "" {
		id = MsgID(l.Stream, l.Consumer, l.Sequence)
	}
	m.Header.Set(jetstream.MsgIDHeader, id+":replay:"+strconv.FormatUint(seq, 10))
	if _, err := s.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("dlq: replay %d to %s: %w", seq, l.Subject, err)
	}
	return s.Delete(ctx, seq)
}

// Delete removes the letter at seq.
func (s *Store) Delete(ctx context.Context, seq uint64) error {
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return fmt.Errorf("dlq: stream %s: %w", s.stream, err)
	}
	if err := st.DeleteMsg(ctx, seq); err != nil {
		// The server answers "sequence not found" (10043) without a typed
		// error: look the message up to tell a missing letter from a failure.
		if _, gerr := st.GetMsg(ctx, seq); errors.Is(gerr, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("%w: %d", ErrNotFound, seq)
		}
		return fmt.Errorf("dlq: delete %d: %w", seq, err)
	}
	return nil
}
