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
// Metrics adapts the runner's Observer and the llm package's Observer to
// Prometheus (events handled/failed/dead-lettered, handler latency, model
// calls, latency and tokens); Lag refreshes JetStream consumer lag gauges
// (pending, ack pending, redelivered) periodically.
//
// The package does not log; the Server reports a failing listener through
// its Err channel.
package health
