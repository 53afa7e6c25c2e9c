package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/pkg/events"
)

func init() {
	register("status", "show streams, consumer lag and the workers' readiness", status)
}

func status(ctx context.Context, stdout io.Writer, args []string) error {
	cfg, _, err := loadConfig("status", args, config.Conn, nil)
	if err != nil {
		return err
	}
	nc, js, err := connect(cfg)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()

	topo := events.DefaultTopology()
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	out(tw, "STREAM\tSUBJECTS\tMESSAGES\tBYTES\tFIRST\tLAST\n")
	var consumers []*jetstream.ConsumerInfo
	var errs []error
	for _, name := range []string{topo.In.Name, topo.Out.Name, topo.DLQ.Name} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			out(tw, "%s\t-\tmissing (run engram setup)\t\t\t\n", name)
			errs = append(errs, fmt.Errorf("stream %s: %w", name, err))
			continue
		}
		si, err := s.Info(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("stream %s: %w", name, err))
			continue
		}
		st := si.State
		out(tw, "%s\t%v\t%d\t%d\t%s\t%s\n", name, si.Config.Subjects, st.Msgs, st.Bytes, ago(st.FirstTime), ago(st.LastTime))
		l := s.ListConsumers(ctx)
		for ci := range l.Info() {
			consumers = append(consumers, ci)
		}
		if err := l.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
			errs = append(errs, fmt.Errorf("consumers of %s: %w", name, err))
		}
	}
	_ = tw.Flush()
	out(stdout, "\n")
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	out(tw, "CONSUMER\tSTREAM\tPENDING\tACK PENDING\tREDELIVERED\tWAITING\tLAST DELIVERY\n")
	for _, ci := range consumers {
		var last time.Time
		if ci.Delivered.Last != nil {
			last = *ci.Delivered.Last
		}
		out(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", ci.Name, ci.Stream, ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting, ago(last))
	}
	_ = tw.Flush()

	out(stdout, "\n")
	rep, err := readyz(ctx, cfg.HTTPURL())
	if err != nil {
		out(stdout, "readiness: %s unreachable: %v\n", cfg.HTTPURL(), err)
	} else {
		out(stdout, "readiness (%s/readyz): %s\n", cfg.HTTPURL(), rep.Status)
		tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		out(tw, "CHECK\tSTATUS\tDETAIL\n")
		for _, c := range rep.Checks {
			out(tw, "%s\t%s\t%s\n", c.Name, c.Status, c.Error)
		}
		_ = tw.Flush()
	}
	return errors.Join(errs...)
}

// readyz fetches and decodes a /readyz report (a 503 carries one too).
func readyz(ctx context.Context, base string) (health.Report, error) {
	var rep health.Report
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
	if err != nil {
		return rep, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return rep, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return rep, fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	return rep, nil
}

// ago renders a time as "12s ago" (rounded), "-" when zero.
func ago(t time.Time) string {
	if t.IsZero() || t.Unix() <= 0 {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return d.Round(time.Second).String() + " ago"
	case d < 48*time.Hour:
		return d.Round(time.Minute).String() + " ago"
	}
	return t.UTC().Format(time.RFC3339)
}
