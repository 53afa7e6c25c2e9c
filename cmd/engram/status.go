package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/credurl"
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

	// The worker roles' consumers are expected; others found on ENGRAM_IN
	// (the idle detector's, an operator's) are listed too.
	topo := events.DefaultTopology()
	topo.Prefix = cfg.Events.SubjectPrefix
	state, err := health.Inspect(ctx, js, topo, 0)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	out(tw, "STREAM\tSUBJECTS\tRETENTION\tMESSAGES\tBYTES\tFILL\tPER SUBJECT\tFIRST\tLAST\n")
	for _, st := range state.Streams {
		if st.Missing {
			out(tw, "%s\t-\tmissing (run engram setup)\t\t\t\t\t\t\n", st.Name)
			continue
		}
		fill, per := "-", "-"
		if st.MaxBytes > 0 {
			fill = fmt.Sprintf("%.1f%% of %s", 100*st.Fill(), humanBytes(st.MaxBytes))
		}
		if st.MaxMsgsPerSubject > 0 {
			per = fmt.Sprintf("max %d", st.MaxMsgsPerSubject)
		}
		out(tw, "%s\t%v\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", st.Name, st.Subjects, strings.ToLower(st.Retention.String()),
			st.Msgs, st.Bytes, fill, per, ago(st.FirstTime), ago(st.LastTime))
	}
	_ = tw.Flush()
	out(stdout, "\n")
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	out(tw, "CONSUMER\tSTREAM\tPENDING\tACK PENDING\tREDELIVERED\tWAITING\tLAST DELIVERY\tWORKER\n")
	for _, c := range state.Consumers {
		if c.Missing {
			out(tw, "%s\t%s\tmissing (run engram setup)\t\t\t\t\t\n", c.Name, c.Stream)
			continue
		}
		worker := "-"
		switch {
		case c.NoWorker:
			worker = "NONE RUNNING: events wait"
		case c.Waiting > 0:
			worker = "pulling"
		case c.AckPending > 0:
			worker = "working"
		}
		out(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", c.Name, c.Stream, c.Pending, c.AckPending, c.Redelivered, c.Waiting,
			ago(c.LastDelivery), worker)
	}
	_ = tw.Flush()
	var errs []error
	failed, degraded := state.Problems()
	// The process's own view (/readyz): what the server cannot show, such
	// as dead letters parked because ENGRAM_DLQ refuses them, or an
	// embedded NATS store that refuses writes after a full disk.
	rep, rerr := readyz(ctx, cfg.HTTPURL())
	if rerr == nil {
		for _, c := range rep.Checks {
			switch c.Status {
			case health.StatusFailed:
				failed = append(failed, c.Name+": "+credurl.Redact(c.Error))
			case health.StatusDegraded:
				degraded = append(degraded, c.Name+": "+credurl.Redact(c.Error))
			}
		}
	}
	if len(failed)+len(degraded) > 0 {
		out(stdout, "\nproblems:\n")
		for _, p := range failed {
			out(stdout, "  FAILED   %s\n", p)
			errs = append(errs, errors.New(p))
		}
		for _, p := range degraded {
			out(stdout, "  DEGRADED %s\n", p)
		}
	}

	out(stdout, "\n")
	if rerr != nil {
		out(stdout, "readiness: %s unreachable: %v\n", credurl.Redact(cfg.HTTPURL()), credurl.Error(rerr))
	} else {
		out(stdout, "readiness (%s/readyz): %s\n", credurl.Redact(cfg.HTTPURL()), rep.Status)
		tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		out(tw, "CHECK\tSTATUS\tDETAIL\n")
		for _, c := range rep.Checks {
			out(tw, "%s\t%s\t%s\n", c.Name, c.Status, credurl.Redact(c.Error)) // a server of an older version may not mask it
		}
		_ = tw.Flush()
	}
	return errors.Join(errs...)
}

// humanBytes renders n in K, M or G (powers of 1024).
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%.0fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0fK", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
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
