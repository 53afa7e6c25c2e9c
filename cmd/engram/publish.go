package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/pkg/events"
)

func init() {
	register("publish", "publish input events from JSON (stdin, or -f file); id, version and occurred_at are filled in when missing", publish)
}

func publish(ctx context.Context, stdout io.Writer, args []string) error {
	var file string
	cfg, _, err := loadConfig("publish", args, config.Conn, func(fs *flag.FlagSet) {
		fs.StringVar(&file, "f", "-", "file of JSON events (one object, several concatenated, or an array); - is stdin")
	})
	if err != nil {
		return err
	}
	var r io.Reader = os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	evs, err := readEvents(r)
	if err != nil {
		return err
	}
	if err := checkSizes(evs, int(cfg.Events.MaxEventBytes)); err != nil {
		return err
	}
	if err := checkReplyTo(evs, cfg.Events.ReplyPrefixes); err != nil {
		return err
	}
	nc, _, err := connect(cfg)
	if err != nil {
		return err
	}
	defer nc.Close()
	cl, err := events.NewClient(nc, events.WithPrefix(cfg.Events.SubjectPrefix), events.WithMaxEventBytes(int(cfg.Events.MaxEventBytes)))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// The server reports a publish its permissions deny (another tenant's
	// subject) asynchronously, and JetStream then never acknowledges it:
	// stop at the report instead of waiting out the timeout.
	ctx, deny := context.WithCancelCause(ctx)
	defer deny(nil)
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			deny(err)
		}
	})
	for _, e := range evs {
		if err := cl.Publish(ctx, e); err != nil {
			if cause := context.Cause(ctx); cause != nil && errors.Is(cause, nats.ErrPermissionViolation) {
				return fmt.Errorf("publish %s %s: refused by the server (these credentials may not publish for tenant %q): %w", e.Type, e.ID, e.TenantID, cause)
			}
			return err
		}
		subj, _ := cl.Subjects().For(e)
		out(stdout, "published %s %s on %s\n", e.Type, e.ID, subj)
	}
	return nil
}

// readEvents decodes every event of r (objects, concatenated or in an
// array), filling a missing id, version and occurred_at, and validating
// each (every invalid event is reported, nothing is published then).
func readEvents(r io.Reader) ([]events.Envelope, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	data = bytes.TrimSpace(data)
	var raws []json.RawMessage
	if len(data) > 0 && data[0] == '[' {
		if err := json.Unmarshal(data, &raws); err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(data))
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("input: event %d: %w", len(raws)+1, err)
			}
			raws = append(raws, raw)
		}
	}
	if len(raws) == 0 {
		return nil, fmt.Errorf("%w: no event in the input", errUsage)
	}
	var evs []events.Envelope
	var errs []error
	for i, raw := range raws {
		e, err := completeEvent(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("event %d: %w", i+1, err))
			continue
		}
		evs = append(evs, e)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return evs, nil
}

// checkSizes reports every event whose body is over max bytes (the
// documented maximum event size, ENGRAM_MAX_EVENT_BYTES), before anything
// is sent.
func checkSizes(evs []events.Envelope, max int) error {
	var errs []error
	for i, e := range evs {
		data, err := events.Encode(e)
		if err != nil {
			errs = append(errs, fmt.Errorf("event %d: %w", i+1, err))
			continue
		}
		if max > 0 && len(data) > max {
			errs = append(errs, fmt.Errorf("event %d (%s): %w: %d bytes, the maximum is %d (ENGRAM_MAX_EVENT_BYTES)",
				i+1, e.Type, events.ErrEventTooLarge, len(data), max))
		}
	}
	return errors.Join(errs...)
}

// checkReplyTo refuses, before anything is sent, a turn_started whose
// reply_to the injector would refuse (not under ENGRAM_REPLY_PREFIXES): it
// would only be dead-lettered.
func checkReplyTo(evs []events.Envelope, prefixes []string) error {
	var errs []error
	for i, e := range evs {
		if e.Type != events.TypeTurnStarted {
			continue
		}
		p, err := events.PayloadAs[events.TurnStarted](e)
		if err != nil {
			errs = append(errs, fmt.Errorf("event %d: %w", i+1, err))
			continue
		}
		if p.ReplyTo == "" {
			continue
		}
		if err := events.CheckReplySubject(p.ReplyTo, prefixes); err != nil {
			errs = append(errs, fmt.Errorf("event %d (turn_started): %w; the injector would dead-letter it (a platform with another inbox prefix adds it to ENGRAM_REPLY_PREFIXES)", i+1, err))
		}
	}
	return errors.Join(errs...)
}

func completeEvent(raw json.RawMessage) (events.Envelope, error) {
	// Before the map below would keep only the last of a duplicate key.
	if err := events.CheckKeys(raw); err != nil {
		return events.Envelope{}, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return events.Envelope{}, fmt.Errorf("not a JSON object: %w", err)
	}
	set := func(k string, v any) {
		if _, ok := m[k]; !ok {
			b, _ := json.Marshal(v)
			m[k] = b
		}
	}
	set("id", events.NewID())
	set("version", events.SchemaVersion)
	set("occurred_at", time.Now().UTC())
	full, _ := json.Marshal(m)
	e, err := events.Decode(full)
	if err != nil {
		return e, err
	}
	if !e.Type.IsInput() {
		return e, fmt.Errorf("%s is an output event; publish sends input events (%v)", e.Type, events.InputTypes)
	}
	return e, nil
}
