package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/engram-memory/engram/internal/chaos"
	"github.com/engram-memory/engram/pkg/events"
)

// turnRec is what the platform saw of one turn.
type turnRec struct {
	project, session, turn string
	index                  int
	started                time.Time // when the platform published turn_started
	startedID              string    // the turn_started event id
	replied                bool      // the injection arrived before the reply deadline
	repliedAt              time.Time // when
	ids                    []string  // the memories of the block it got
	block                  string
	publishRetries         int // publishes repeated (the bus was down)
}

// driver is the chat platform: sessions of scripted turns through the Go
// client, each turn a turn_started (waiting for the block, like
// events.Client.Inject), then turn_ended and tokens_reported.
type driver struct {
	c             *cluster
	injectTimeout time.Duration
	thinking      time.Duration // between the block and turn_ended: the platform's model

	mu      sync.Mutex
	turns   []*turnRec
	done    atomic.Int64                          // turns finished
	waiting map[string]chan events.InjectionReady // reply subject -> the turn waiting on it
	inbox   map[string]string                     // turn_started id -> its reply subject
	answers map[string][][]string                 // turn_started id -> the ids of every answer received, late ones too
}

// replyPrefix is where the driver's turns get their answers.
const replyPrefix = "_INBOX.chaos."

var idSeq atomic.Int64

func e0ID() string { return fmt.Sprintf("r%d", idSeq.Add(1)) }

// listen subscribes to every reply subject of the driver for the whole run,
// so that an answer sent after its turn's deadline (a slow compose; the
// injector then still records the injection) is counted too.
func (d *driver) listen() error {
	d.waiting, d.inbox, d.answers = map[string]chan events.InjectionReady{}, map[string]string{}, map[string][][]string{}
	_, err := d.c.nc.Subscribe(replyPrefix+">", func(m *nats.Msg) {
		r, err := events.Decode(m.Data)
		if err != nil {
			return
		}
		ir, ok := r.Payload.(events.InjectionReady)
		if !ok {
			return
		}
		d.mu.Lock()
		d.answers[ir.InReplyTo] = append(d.answers[ir.InReplyTo], ir.NodeIDs)
		w := d.waiting[m.Subject]
		mine := d.inbox[ir.InReplyTo] == m.Subject
		d.mu.Unlock()
		if w != nil && mine {
			select {
			case w <- ir:
			default:
			}
		}
	})
	return err
}

func project(i int) string { return fmt.Sprintf("chaos%d", i%4) }
func session(prefix string, i int) string {
	return fmt.Sprintf("%s%04d", prefix, i)
}

// publish sends e until the bus takes it: the same event id every time, so
// a publish that landed but whose ack was lost is dropped by the stream's
// duplicate window.
func (dr *driver) publish(ctx context.Context, e events.Envelope, deadline time.Time) (int, error) {
	for retries := 0; ; retries++ {
		d := time.Now().Add(5 * time.Second)
		if !deadline.IsZero() && deadline.After(time.Now()) {
			d = deadline
		}
		pctx, cancel := context.WithDeadline(ctx, d)
		err := dr.c.client.Publish(pctx, e)
		cancel()
		if err == nil {
			return retries, nil
		}
		if ctx.Err() != nil {
			return retries, ctx.Err()
		}
		if errors.Is(err, events.ErrEventTooLarge) || errors.Is(err, events.ErrInvalidEvent) {
			return retries, err
		}
		deadline = time.Time{}
		select {
		case <-ctx.Done():
			return retries, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// turn plays turn t of session sid in proj.
func (d *driver) turn(ctx context.Context, proj, sid string, t int) (*turnRec, error) {
	ref := events.Ref{ProjectID: proj, SessionID: sid, TurnID: fmt.Sprintf("t%03d", t)}
	rec := &turnRec{project: proj, session: sid, turn: ref.TurnID, index: t}
	d.mu.Lock()
	d.turns = append(d.turns, rec)
	d.mu.Unlock()

	// The reply subject is the turn's own under the driver's reply prefix,
	// where one subscription (listen) collects every answer, late ones too.
	inbox := replyPrefix + e0ID()
	wait := make(chan events.InjectionReady, 1)
	replyBy := time.Now().Add(d.injectTimeout)
	e := events.NewTurnStarted(ref, events.TurnStarted{Text: chaos.UserText(sid, t), ReplyTo: inbox, ReplyBy: replyBy.UTC()})
	rec.startedID, rec.started = e.ID, time.Now()
	d.mu.Lock()
	d.waiting[inbox] = wait
	d.inbox[e.ID] = inbox
	d.mu.Unlock()
	n, err := d.publish(ctx, e, replyBy)
	rec.publishRetries += n
	if err != nil {
		return rec, fmt.Errorf("publish turn_started: %w", err)
	}
	timer := time.NewTimer(time.Until(replyBy))
	select {
	case ir := <-wait:
		rec.replied, rec.ids, rec.block, rec.repliedAt = true, ir.NodeIDs, ir.Block, time.Now()
	case <-timer.C: // no memory for this turn
	case <-ctx.Done():
	}
	timer.Stop()
	d.mu.Lock()
	delete(d.waiting, inbox)
	d.mu.Unlock()
	select {
	case <-ctx.Done():
		return rec, ctx.Err()
	case <-time.After(d.thinking):
	}
	ended := events.New(ref, events.TurnEnded{Messages: []events.Message{
		{Role: events.RoleUser, Content: chaos.UserText(sid, t)},
		{Role: events.RoleAssistant, Content: chaos.AssistantText(sid, t)},
	}, InjectedNodeIDs: rec.ids})
	n, err = d.publish(ctx, ended, time.Time{})
	rec.publishRetries += n
	if err != nil {
		return rec, fmt.Errorf("publish turn_ended: %w", err)
	}
	// Input tokens 0: the compactor estimates the stored transcript.
	tokens := events.New(events.Ref{ProjectID: proj, SessionID: sid}, events.TokensReported{InputTokens: 0})
	n, err = d.publish(ctx, tokens, time.Time{})
	rec.publishRetries += n
	if err != nil {
		return rec, fmt.Errorf("publish tokens_reported: %w", err)
	}
	d.done.Add(1)
	return rec, nil
}

// replay plays sessions (named prefix0000, ...) of turnsPerSession turns,
// `clients` sessions at a time, until `turns` turns are played.
func (d *driver) replay(ctx context.Context, prefix string, turns, turnsPerSession, clients int) error {
	sessions := (turns + turnsPerSession - 1) / turnsPerSession
	next := make(chan int)
	go func() {
		defer close(next)
		for i := range sessions {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				n := min(turnsPerSession, turns-i*turnsPerSession)
				for t := range n {
					if _, err := d.turn(ctx, project(i), session(prefix, i), t); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return errors.Join(collect(errs)...)
}

func collect(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}

// dump writes what the platform saw of every turn, one line each (tab
// separated: session, turn, when turn_started was published, whether the
// block came in time, publishes repeated, answers received), for a look
// at a run (the work dir's turns.tsv).
func (d *driver) dump(path string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var b strings.Builder
	b.WriteString("session\tturn\tstarted\treplied\treplied_at\tpublish_retries\tanswers\n")
	for _, tr := range d.turns {
		at := "-"
		if tr.replied {
			at = tr.repliedAt.Format("15:04:05.000")
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\t%v\t%s\t%d\t%d\n", tr.session, tr.turn, tr.started.Format("15:04:05.000"), tr.replied, at, tr.publishRetries, len(d.answers[tr.startedID]))
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
