package health

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/engram-memory/engram/internal/runner"
	"github.com/engram-memory/engram/internal/runner/dlq"
	"github.com/engram-memory/engram/pkg/llm"
)

// Metrics are the process's Prometheus metrics. It implements
// runner.Observer (one per process, shared by every worker) and
// llm.Observer.
type Metrics struct {
	handled      *prometheus.CounterVec
	failed       *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	paused       *prometheus.GaugeVec
	captured     *prometheus.CounterVec
	dlqFailed    *prometheus.CounterVec
	dlqParked    *prometheus.CounterVec
	undurable    *prometheus.CounterVec

	idle prometheus.Counter

	compactionRefused     *prometheus.CounterVec
	consolidationPasses   *prometheus.CounterVec
	consolidationMessages *prometheus.CounterVec

	llmCalls   *prometheus.CounterVec
	llmLatency *prometheus.HistogramVec
	llmTokens  *prometheus.CounterVec

	projects projectLabels
}

// MaxProjectLabels bounds the project label values of a process when
// project labels are on (WithProjectLabels): the first this many projects
// seen get their own series, the others share OtherProject.
const MaxProjectLabels = 100

// OtherProject is the project label of the projects over MaxProjectLabels.
const OtherProject = "_other"

// MetricsOption configures Metrics.
type MetricsOption func(*Metrics)

// WithProjectLabels fills the project label of engram_model_calls_total
// and engram_model_tokens_total with project ids (at most MaxProjectLabels,
// the rest as OtherProject). Off by default: /metrics needs no credentials,
// so its labels would name every tenant, and project ids are chosen by
// whoever publishes events, so the series would be unbounded. Off, the
// label is empty (Prometheus treats an empty label as absent); the metric
// and label names stay the same either way.
func WithProjectLabels() MetricsOption {
	return func(m *Metrics) { m.projects.on = true }
}

// projectLabels maps project ids to label values.
type projectLabels struct {
	on   bool
	mu   sync.Mutex
	seen map[string]bool
}

func (p *projectLabels) label(project string) string {
	if !p.on {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen[project] {
		return project
	}
	if len(p.seen) >= MaxProjectLabels {
		return OtherProject
	}
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	p.seen[project] = true
	return project
}

var (
	_ runner.Observer = (*Metrics)(nil)
	_ llm.Observer    = (*Metrics)(nil)
)

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer, opts ...MetricsOption) (*Metrics, error) {
	m := &Metrics{
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engram_events_handled_total",
			Help: "Deliveries handled by a worker, by event type and result (acked, duplicate, retried, dead_lettered, interrupted).",
		}, []string{"worker", "type", "result"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engram_events_failed_total",
			Help: "Deliveries whose handling failed (retried or dead-lettered), by worker and event type.",
		}, []string{"worker", "type"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engram_events_dead_lettered_total",
			Help: "Messages a worker sent to ENGRAM_DLQ (source: handler or advisory capture).",
		}, []string{"worker", "source"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "engram_handler_duration_seconds",
			Help:    "Handler latency by worker and event type.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"worker", "type"}),
		paused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "engram_worker_paused",
			Help: "1 while a worker does not pull because a dependency (model, store) is unavailable.",
		}, []string{"worker"}),
		captured: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engram_events_max_deliveries_captured_total",
			Help: "Messages captured from the server's max-deliveries advisory into the DLQ.",
		}, []string{"worker"}),
		dlqFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engram_dlq_write_failures_total",
			Help: "Dead letters that could be stored nowhere (ENGRAM_DLQ full or unreachable, and the store could not park them): the event was nak'ed with backoff and stays in its stream, holding its consumer's slot; alert when this grows.",
		}, []string{"worker"}),
		undurable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engram_acks_waiting_durable_total",
			Help: "Handled events whose acknowledgement waits because the store could not confirm their writes durable (a Redis primary's replicas did not acknowledge within ENGRAM_REDIS_REPLICA_WAIT, SQLite could not sync its log): they are acknowledged once it can; alert when this keeps growing.",
		}, []string{"worker"}),
		dlqParked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engram_dlq_parked_total",
			Help: "Dead letters ENGRAM_DLQ refused (full or unreachable) that were parked in the store instead (the event terminated; the letter moves to the DLQ once it has room).",
		}, []string{"worker"}),
		idle: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "engram_idle_published_total",
			Help: "session_idle events the idle detector of this process published.",
		}),
		compactionRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engram_compaction_refusals_total",
			Help: "Model replies the compactor refused as a summary, by reason (cut_off, empty, missing_section, not_smaller); the previous summary stayed and the report was retried.",
		}, []string{"reason"}),
		consolidationPasses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engram_consolidation_passes_total",
			Help: "Consolidation passes ended, by verdict (done, budget, stuck, skipped: a window passed over after its last attempt).",
		}, []string{"verdict"}),
		consolidationMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engram_consolidation_messages_total",
			Help: "Transcript messages spanned by the windows of ended consolidation passes, by verdict (skipped: moved past unconsolidated).",
		}, []string{"verdict"}),
		llmCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engram_model_calls_total",
			Help: "Model calls by operation, role, project (empty unless ENGRAM_METRICS_PROJECT_LABELS), model and outcome (ok, budget_exhausted, or the error class: transient, permanent, canceled).",
		}, []string{"op", "role", "project", "model", "outcome"}),
		llmLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "engram_model_call_duration_seconds",
			Help:    "Model call latency by operation, role and model.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"op", "role", "model"}),
		llmTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engram_model_tokens_total",
			Help: "Model tokens by role, project (empty unless ENGRAM_METRICS_PROJECT_LABELS) and kind (prompt, completion).",
		}, []string{"role", "project", "kind"}),
	}
	for _, o := range opts {
		o(m)
	}
	for _, c := range []prometheus.Collector{m.handled, m.failed, m.deadLettered, m.latency, m.paused,
		m.captured, m.dlqFailed, m.dlqParked, m.undurable, m.idle, m.compactionRefused, m.consolidationPasses, m.consolidationMessages,
		m.llmCalls, m.llmLatency, m.llmTokens} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// InitWorker exports at 0 the series of worker that alert rules watch with
// increase() (deploy/prometheus/alerts.yml): a counter that first appears
// at its first increment has one sample, and increase() over one sample is
// nothing, so the first dead letter would never alert.
func (m *Metrics) InitWorker(worker string) {
	m.deadLettered.WithLabelValues(worker, "handler")
	m.deadLettered.WithLabelValues(worker, "advisory")
	m.dlqFailed.WithLabelValues(worker)
	m.dlqParked.WithLabelValues(worker)
	m.undurable.WithLabelValues(worker)
	m.captured.WithLabelValues(worker)
	m.paused.WithLabelValues(worker)
}

// InitModel exports at 0 the model-call series of (op, role, model) that
// alert rules watch (errors, a spent budget), for the empty project label
// (project labels off, the default; with them on, a project's series still
// appears at its first call).
func (m *Metrics) InitModel(op, role, model string) {
	for _, outcome := range []string{"ok", llm.ClassTransient.String(), llm.ClassPermanent.String(), OutcomeBudgetExhausted} {
		m.llmCalls.WithLabelValues(op, role, "", model, outcome)
	}
}

// Delivered implements runner.Observer.
func (m *Metrics) Delivered(o runner.Outcome) {
	typ := string(o.Type)
	if typ == "" {
		typ = "undecodable"
	}
	m.handled.WithLabelValues(o.Worker, typ, string(o.Result)).Inc()
	switch o.Result {
	case runner.ResultRetried, runner.ResultDeadLettered:
		m.failed.WithLabelValues(o.Worker, typ).Inc()
	}
	if o.DeadLetterFailed {
		m.dlqFailed.WithLabelValues(o.Worker).Inc()
	}
	if o.Parked {
		m.dlqParked.WithLabelValues(o.Worker).Inc()
	}
	if o.Result == runner.ResultUndurable {
		m.undurable.WithLabelValues(o.Worker).Inc()
	}
	if o.Result == runner.ResultDeadLettered {
		m.deadLettered.WithLabelValues(o.Worker, "handler").Inc()
	}
	if o.Latency > 0 {
		m.latency.WithLabelValues(o.Worker, typ).Observe(o.Latency.Seconds())
	}
}

// WatchParking registers engram_dlq_parked_letters, the dead letters of p
// waiting in the store for ENGRAM_DLQ to take them (alert when above 0 for
// long: the DLQ is full or unreachable).
func (m *Metrics) WatchParking(reg prometheus.Registerer, p *dlq.Parking) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "engram_dlq_parked_letters",
		Help: "Dead letters parked in the store because ENGRAM_DLQ refused them (full or unreachable), waiting to move there.",
	}, func() float64 { return float64(p.Status().Waiting) }))
}

// Paused implements runner.Observer.
func (m *Metrics) Paused(worker string, cause error) {
	v := 0.0
	if cause != nil {
		v = 1
	}
	m.paused.WithLabelValues(worker).Set(v)
}

// Captured implements runner.Observer.
func (m *Metrics) Captured(worker string, _ dlq.Letter) {
	m.captured.WithLabelValues(worker).Inc()
	m.deadLettered.WithLabelValues(worker, "advisory").Inc()
}

// IdlePublished counts a session_idle published by the idle detector
// (idle.Options.OnPublished).
func (m *Metrics) IdlePublished(_, _ string, _ time.Time) { m.idle.Inc() }

// CompactionRefused counts a summary the compactor refused
// (compact.Metrics).
func (m *Metrics) CompactionRefused(reason string) { m.compactionRefused.WithLabelValues(reason).Inc() }

// ConsolidationPass counts a consolidation pass that ended with verdict
// and the messages its window spanned (consolidate.Observer).
func (m *Metrics) ConsolidationPass(verdict string, messages int64) {
	m.consolidationPasses.WithLabelValues(verdict).Inc()
	if messages > 0 {
		m.consolidationMessages.WithLabelValues(verdict).Add(float64(messages))
	}
}

// ObserveCall implements llm.Observer.
func (m *Metrics) ObserveCall(ci llm.CallInfo) {
	outcome := "ok"
	if ci.Err != nil {
		outcome = classLabel(ci)
	}
	role := string(ci.Role)
	project := m.projects.label(ci.Project)
	m.llmCalls.WithLabelValues(ci.Op, role, project, ci.Model, outcome).Inc()
	m.llmLatency.WithLabelValues(ci.Op, role, ci.Model).Observe(ci.Latency.Seconds())
	if ci.PromptTokens > 0 {
		m.llmTokens.WithLabelValues(role, project, "prompt").Add(float64(ci.PromptTokens))
	}
	if ci.CompletionTokens > 0 {
		m.llmTokens.WithLabelValues(role, project, "completion").Add(float64(ci.CompletionTokens))
	}
}

// OutcomeBudgetExhausted is the outcome label of a model call refused
// because its project's daily token budget is spent (the alert "token
// budget spent" watches it); other failures are labelled with their
// llm.Class.
const OutcomeBudgetExhausted = "budget_exhausted"

func classLabel(ci llm.CallInfo) string {
	if errors.Is(ci.Err, llm.ErrBudgetExhausted) {
		return OutcomeBudgetExhausted
	}
	if ci.Class == llm.ClassNone {
		return llm.Classify(ci.Err).String()
	}
	return ci.Class.String()
}
