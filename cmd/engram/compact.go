package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/pkg/events"
)

func init() {
	register("compact", "force a compaction of a conversation: engram compact [-tenant T] -project P -session S [-wait 5m] (with -wait: the result, or why it was refused)", compactCmd)
}

func compactCmd(ctx context.Context, stdout io.Writer, args []string) error {
	var (
		tenant, project, session string
		wait                     time.Duration
	)
	cfg, _, err := loadConfig("compact", args, config.Conn, func(fs *flag.FlagSet) {
		fs.StringVar(&tenant, "tenant", "", "tenant id (default: the default tenant)")
		fs.StringVar(&project, "project", "", "project id (required)")
		fs.StringVar(&session, "session", "", "session id (required)")
		fs.DurationVar(&wait, "wait", 0, "wait this long for compaction_done and print it, or why the compaction was refused (0: only request it)")
	})
	if err != nil {
		return err
	}
	if err := needSession(project, session); err != nil {
		return err
	}
	nc, js, err := connect(cfg)
	if err != nil {
		return err
	}
	defer nc.Close()
	cl, err := events.NewClient(nc, events.WithPrefix(cfg.Events.SubjectPrefix), events.WithMaxEventBytes(int(cfg.Events.MaxEventBytes)))
	if err != nil {
		return err
	}
	ref := events.Ref{TenantID: tenant, ProjectID: project, SessionID: session}
	var done chan events.CompactionDone
	var letters chan *nats.Msg
	if wait > 0 {
		// A refused compaction ends in the DLQ with the reason: watch for
		// this request's letter too.
		letters = make(chan *nats.Msg, 64)
		dsub, err := nc.ChanSubscribe(cl.Subjects().DLQ(events.ConsumerCompactor), letters)
		if err != nil {
			return fmt.Errorf("subscribe to the compactor's dead letters: %w", err)
		}
		defer func() { _ = dsub.Unsubscribe() }()
		// Subscribe before publishing so the answer cannot be missed.
		done = make(chan events.CompactionDone, 1)
		sub, err := nc.Subscribe(cl.Subjects().Out(events.TypeCompactionDone, tenant, project, session), func(m *nats.Msg) {
			if e, err := events.Decode(m.Data); err == nil && e.TenantID == tenant {
				if cd, ok := e.Payload.(events.CompactionDone); ok {
					select {
					case done <- cd:
					default:
					}
				}
			}
		})
		if err != nil {
			return fmt.Errorf("subscribe to compaction_done: %w", err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	if wait > 0 {
		// Turns published a moment ago may not be stored yet (the extractor
		// stores turn_ended): a compaction now would judge a short
		// transcript. Within the wait, let the extractor catch up first.
		if err := waitTranscript(ctx, js, cfg, tenant, project, session, wait); err != nil {
			return err
		}
	}
	ev, err := cl.PublishTokensReported(ctx, ref, events.TokensReported{Force: true})
	if err != nil {
		return err
	}
	out(stdout, "requested compaction of %s/%s (event %s)\n", project, session, ev.ID)
	if wait <= 0 {
		return nil
	}
	timeout := time.After(wait)
	for {
		select {
		case cd := <-done:
			out(stdout, "compacted up to message %d: %d -> %d tokens\n", cd.UpTo, cd.TokensBefore, cd.TokensAfter)
			return nil
		case m := <-letters:
			if m.Header.Get(events.HeaderDLQMsgID) != ev.ID {
				continue
			}
			out(stdout, "compaction refused: %s\n", m.Header.Get(events.HeaderDLQReason))
			return fmt.Errorf("the compaction was not done (dead-lettered after %s deliveries; the previous summary and the context stay as they were; engram dlq list shows the request)",
				m.Header.Get(events.HeaderDLQDeliveries))
		case <-timeout:
			return fmt.Errorf("no compaction_done within %v: the conversation may have too few messages to split, or the compactor waits for its model (engram status), or it refused the model's summaries and retries them (after 1, 5 and 15 minutes by default, ENGRAM_COMPACT_BACKOFF; the compactor logs each refusal with its reason, and the last one dead-letters the request with it)", wait)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitTranscript waits, at most wait, until the transcript consumer has
// acknowledged the session's latest turn_ended (its messages are in the
// transcript; the compactor waits for the same, not for the extraction).
func waitTranscript(ctx context.Context, js jetstream.JetStream, cfg config.Config, tenant, project, session string, wait time.Duration) error {
	lag := events.NewTranscriptLag(js, cfg.Topology())
	deadline := time.Now().Add(wait)
	said := false
	for {
		pending, err := lag.TurnEndedPending(ctx, tenant, project, session)
		if err != nil || !pending {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the session's latest turn was not stored within %v (engram status: is an extractor running? it runs the transcript consumer)", wait)
		}
		if !said {
			fmt.Fprintln(os.Stderr, "waiting for the session's latest turns to be stored...")
			said = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func needSession(project, session string) error {
	var problems []string
	if project == "" {
		problems = append(problems, "-project is required")
	}
	if session == "" {
		problems = append(problems, "-session is required")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", errUsage, strings.Join(problems, "; "))
	}
	return nil
}
