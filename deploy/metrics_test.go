package deploy

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/health"
	"github.com/engram-memory/engram/internal/runner/dlq"
	redisstore "github.com/engram-memory/engram/pkg/memory/redis"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// metricInfo is one metric a process registers.
type metricInfo struct {
	name, typ string // typ: counter, gauge, histogram, summary; "" for a standard collector's
	labels    []string
}

// capture registers collectors with a real registry and records what
// each one describes.
type capture struct {
	prometheus.Registerer
	got map[string]metricInfo
}

var descName = regexp.MustCompile(`fqName: "([^"]+)"`)
var descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)

// descConstLabels finds a Desc's constant labels (a GaugeFunc per label
// value, as the store's load gauges are): name="value" pairs.
var descConstLabels = regexp.MustCompile(`constLabels: \{([^}]*)\}`)

func (c *capture) Register(col prometheus.Collector) error {
	typ := ""
	switch col.(type) {
	case *prometheus.CounterVec:
		typ = "counter"
	case *prometheus.GaugeVec:
		typ = "gauge"
	case *prometheus.HistogramVec:
		typ = "histogram"
	case *prometheus.SummaryVec:
		typ = "summary"
	case prometheus.Gauge: // before Counter: a Gauge has Inc and Add too
		typ = "gauge"
	case prometheus.Counter:
		typ = "counter"
	case prometheus.Histogram:
		typ = "histogram"
	case prometheus.Summary:
		typ = "summary"
	case prometheus.GaugeFunc: // after the others: any Metric that collects itself matches
		typ = "gauge"
	}
	ch := make(chan *prometheus.Desc)
	go func() { col.Describe(ch); close(ch) }()
	for d := range ch {
		s := d.String()
		m := descName.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		var labels []string
		if l := descLabels.FindStringSubmatch(s); l != nil && l[1] != "" {
			labels = strings.Split(l[1], ",")
		}
		if l := descConstLabels.FindStringSubmatch(s); l != nil && l[1] != "" {
			for _, kv := range strings.Split(l[1], ",") {
				if name, _, ok := strings.Cut(kv, "="); ok && !slices.Contains(labels, name) {
					labels = append(labels, name)
				}
			}
		}
		sort.Strings(labels)
		c.got[m[1]] = metricInfo{name: m[1], typ: typ, labels: labels}
	}
	return c.Registerer.Register(col)
}

// processMetrics registers what an Engram process registers (app's
// telemetry: the Go and process collectors, health.Metrics, health.Lag)
// and returns them by name.
func processMetrics(t *testing.T) map[string]metricInfo {
	t.Helper()
	c := &capture{Registerer: prometheus.NewRegistry(), got: map[string]metricInfo{}}
	if err := c.Register(collectors.NewGoCollector()); err != nil {
		t.Fatal(err)
	}
	if err := c.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		t.Fatal(err)
	}
	m, err := health.NewMetrics(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.WatchParking(c, dlq.NewParking(nil, nil, dlq.ParkingOptions{})); err != nil {
		t.Fatal(err)
	}
	if _, err := health.NewLag(c, nil); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "engram.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := app.RegisterLoadGauges(c, st); err != nil {
		t.Fatal(err)
	}
	rc := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}) // never asked: the gauges read on scrape
	t.Cleanup(func() { _ = rc.Close() })
	rs, err := redisstore.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.RegisterFormatGauges(c, rs); err != nil {
		t.Fatal(err)
	}
	// Every Engram metric of the source is registered above: a new
	// collector elsewhere must be added here (and to docs/operations.md).
	metricName := regexp.MustCompile(`"(engram_[a-z0-9_]+)"`)
	for _, dir := range []string{"internal", "pkg", "cmd"} {
		err := filepath.WalkDir(path(dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil || !strings.Contains(string(b), "github.com/prometheus/client_golang/prometheus") {
				return err
			}
			for _, m := range metricName.FindAllStringSubmatch(string(b), -1) {
				if _, ok := c.got[m[1]]; !ok {
					t.Errorf("%s names metric %s, which processMetrics does not register: add its collector there", p, m[1])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return c.got
}

// metricsDoc is the reference whose "## Metrics" table lists every metric.
const metricsDoc = "docs/operations.md"

// docRow is one row of the metrics table of docs/operations.md.
type docRow struct {
	typ    string
	labels []string
}

// docMetrics parses the table of the "## Metrics" section of
// docs/operations.md: | `name` | type | labels | meaning |.
func docMetrics(t *testing.T) map[string]docRow {
	t.Helper()
	doc := string(read(t, metricsDoc))
	i := strings.Index(doc, "\n## Metrics\n")
	if i < 0 {
		t.Fatalf("%s has no \"## Metrics\" section", metricsDoc)
	}
	sec := doc[i+len("\n## Metrics\n"):]
	if j := strings.Index(sec, "\n#"); j >= 0 {
		sec = sec[:j]
	}
	rows := map[string]docRow{}
	row := regexp.MustCompile("^\\| `([a-z0-9_*]+)` \\| ([a-z()]+) \\| ([^|]*) \\| [^|]+ \\|$")
	header := false
	for _, line := range strings.Split(sec, "\n") {
		if line == "| metric | type | labels | meaning |" {
			header = true
			continue
		}
		if !header || !strings.HasPrefix(line, "| `") {
			continue
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("%s metrics row %q: want | `name` | type | labels | meaning |", metricsDoc, line)
			continue
		}
		var labels []string
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "-" {
				labels = append(labels, l)
			}
		}
		sort.Strings(labels)
		rows[m[1]] = docRow{typ: m[2], labels: labels}
	}
	if !header {
		t.Fatalf("%s metrics table lacks the header | metric | type | labels | meaning |", metricsDoc)
	}
	return rows
}

// TestDocsListEveryMetric: every metric the process registers is a row of
// the metrics table of docs/operations.md with its type and labels, and every row is
// a registered metric. The Go and process collectors are rows go_* and
// process_*.
func TestDocsListEveryMetric(t *testing.T) {
	reg := processMetrics(t)
	doc := docMetrics(t)
	for name, m := range reg {
		if m.typ == "" {
			prefix := name[:strings.Index(name, "_")+1] + "*"
			if _, ok := doc[prefix]; !ok {
				t.Errorf("%s metrics table lacks the row `%s` (the standard collector of %s)", metricsDoc, prefix, name)
			}
			continue
		}
		d, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("%s metrics table lacks %s (%s, labels %v)", metricsDoc, name, m.typ, m.labels)
		case d.typ != m.typ:
			t.Errorf("%s says %s is a %s; it is a %s", metricsDoc, name, d.typ, m.typ)
		case !slices.Equal(d.labels, m.labels):
			t.Errorf("%s gives %s the labels %v; it has %v", metricsDoc, name, d.labels, m.labels)
		}
	}
	for name := range doc {
		if _, ok := reg[name]; !ok && !strings.HasSuffix(name, "*") {
			t.Errorf("%s documents %s, which no process registers", metricsDoc, name)
		}
	}
}
