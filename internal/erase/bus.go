package erase

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/engram-memory/engram/pkg/events"
)

// Subject is the admin request subject of an erasure under a subject
// prefix: <prefix>.admin.erase. Only the admin role may publish or
// subscribe to it (natsauth grants it to no other role).
func Subject(prefix string) string {
	if prefix == "" {
		prefix = events.DefaultPrefix
	}
	return prefix + ".admin.erase"
}

// Request is an erasure asked for on the bus.
type Request struct {
	Scope  Scope `json:"scope"`
	Verify bool  `json:"verify,omitempty"`
}

// Reply answers a Request: the receipt (also when a step failed: what it
// counts was erased), and the error, if any.
type Reply struct {
	Receipt *Receipt `json:"receipt,omitempty"`
	Error   string   `json:"error,omitempty"`
	Invalid bool     `json:"invalid,omitempty"` // the request can never succeed (ErrInvalid)
}

// ErrNoResponder: no process answers erasure requests on the bus (no
// `engram serve` runs there).
var ErrNoResponder = errors.New("erase: no process answers erasure requests on the bus")

// Timeout bounds one erasure asked for on the bus.
const Timeout = 30 * time.Minute

// Responder answers erasure requests on the bus with an Eraser.
type Responder struct {
	sub    *nats.Subscription
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex // held by the erasure in progress: one at a time, and Stop waits for it
}

// Serve answers the erasure requests of subject with e, one at a time,
// until Stop. onErr gets the errors of the erasures, without the scope's
// ids (Anonymous), and of replies that could not be sent; it must not
// block.
func Serve(nc *nats.Conn, subject string, e *Eraser, onErr func(error)) (*Responder, error) {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Responder{ctx: ctx, cancel: cancel}
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if ctx.Err() != nil {
			return // stopped
		}
		var rep Reply
		req, err := DecodeRequest(m.Data)
		if err != nil {
			rep = Reply{Error: err.Error(), Invalid: true}
		} else {
			rctx, rcancel := context.WithTimeout(ctx, Timeout)
			receipt, err := e.Erase(rctx, req.Scope, Options{Verify: req.Verify})
			rcancel()
			if receipt.Scope == req.Scope {
				rep.Receipt = &receipt
			}
			if err != nil {
				rep.Error, rep.Invalid = err.Error(), errors.Is(err, ErrInvalid)
				if !rep.Invalid { // the requester's mistake is the requester's to read
					onErr(Anonymous(err, req.Scope))
				}
			}
		}
		b, err := json.Marshal(rep)
		if err == nil {
			err = m.Respond(b)
		}
		if err != nil {
			onErr(fmt.Errorf("erase: reply: %w", err))
		}
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("erase: subscribe %s: %w", subject, err)
	}
	r.sub = sub
	return r, nil
}

// DecodeRequest reads a request strictly: one JSON object whose keys are
// the request's and its scope's, nothing after it. A key it does not know
// is an error (wrapping ErrInvalid), not dropped: a scope of
// {"tenant":"acme","project_id":"user-42"} (the events' name of the field,
// or a typo) would otherwise be the whole tenant, and a typo must never
// widen an erasure.
func DecodeRequest(data []byte) (Request, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var req Request
	if err := dec.Decode(&req); err != nil {
		return Request{}, fmt.Errorf("%w: erase: undecodable request (want {\"scope\":{\"tenant\":...,\"project\":...,\"session\":...},\"verify\":...}): %v", ErrInvalid, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Request{}, fmt.Errorf("%w: erase: undecodable request: data after the request's object", ErrInvalid)
	}
	return req, nil
}

// Anonymous is err with the scope's ids taken out, for a log: an erased
// person's ids should not stay in the log of their erasure.
func Anonymous(err error, sc Scope) error {
	msg := strings.ReplaceAll(err.Error(), sc.String(), "the "+sc.Kind())
	for _, id := range [][2]string{{sc.Session, "<session id>"}, {sc.Project, "<project id>"}, {sc.Tenant, "<tenant id>"}} {
		if len(id[0]) >= 4 {
			msg = strings.ReplaceAll(msg, id[0], id[1])
		}
	}
	return errors.New(msg)
}

// Stop stops answering, cancels an erasure in progress and waits for it.
func (r *Responder) Stop() error {
	err := r.sub.Unsubscribe()
	r.cancel()
	r.mu.Lock() // the erasure in progress has returned
	r.mu.Unlock()
	return err
}

// Ask sends an erasure request on subject and waits for the reply (ctx
// bounds the wait). ErrNoResponder when nobody answers; the reply's error
// otherwise (wrapping ErrInvalid for an invalid request), with the
// receipt.
func Ask(ctx context.Context, nc *nats.Conn, subject string, req Request) (Receipt, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return Receipt{}, err
	}
	m, err := nc.RequestWithContext(ctx, subject, b)
	if errors.Is(err, nats.ErrNoResponders) {
		return Receipt{}, ErrNoResponder
	}
	if err != nil {
		return Receipt{}, fmt.Errorf("erase: request: %w", err)
	}
	var rep Reply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return Receipt{}, fmt.Errorf("erase: undecodable reply: %w", err)
	}
	var receipt Receipt
	if rep.Receipt != nil {
		receipt = *rep.Receipt
	}
	switch {
	case rep.Error != "" && rep.Invalid:
		return receipt, fmt.Errorf("%w: %s", ErrInvalid, rep.Error)
	case rep.Error != "":
		return receipt, errors.New(rep.Error)
	}
	return receipt, nil
}
