// Package health serves a process's /healthz, /readyz and /metrics and
// holds its Prometheus metrics.
//
//   - /healthz answers 200 while the process runs.
//   - /readyz runs the readiness checks (NATS connected, store reachable,
//     each worker running, the model) and answers 200 when none failed, 503
//     otherwise, with a JSON body listing every check:
//     {"status":"ready","checks":[{"name":"nats","status":"ok","ms":0.4}, ...]}.
//     A check that returns an error wrapping ErrDegraded (model down, a worker
//     paused waiting for it) is reported as "degraded" and does not fail
//     readiness: a worker with nothing to do is still a healthy process.
//   - /metrics is Prometheus text.
//
// The "topology" check (TopologyCheck) asks the server about the
// topology: a missing stream or consumer fails readiness (a deleted
// ENGRAM_IN or worker consumer would otherwise leave the process "ready"
// while nothing flows); a stream FillWarn (80%) full, or a consumer with
// events pending, nothing in flight, no pull request waiting and no
// delivery for IdleAfter (a role with no worker running, or all of them
// paused) is degraded. Inspect gives the same state to `engram status`.
// A worker always has a pull request waiting while it runs, which is how
// the server-side view tells a role with no worker from a busy one, in
// every process of a distributed deployment.
//
// Metrics adapts the runner's Observer and the llm package's Observer to
// Prometheus (events handled/failed/dead-lettered, dead letters refused,
// handler latency, model calls, latency and tokens); Lag refreshes
// JetStream gauges periodically: consumer lag (pending, ack pending,
// redelivered, pull requests waiting) and stream messages, bytes and fill
// ratio. No label carries a project id unless WithProjectLabels (then at
// most MaxProjectLabels of them): /metrics is unauthenticated, and project
// ids are chosen by whoever publishes events.
//
// The package does not log; the Server reports a failing listener through
// its Err channel.
package health
