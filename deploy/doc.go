// Package deploy holds no code: its tests validate the deployment
// artefacts offline, since no Docker engine or Kubernetes cluster runs in
// CI. They fail when an artefact drifts from the code it deploys.
//
// What is checked, and against what:
//
//   - docker-compose.yml (top level): loaded with the compose-spec loader
//     (github.com/compose-spec/compose-go/v2, schema validation on, the
//     credentials from a deploy/credentials.sh run); every service, health
//     check, restart policy and volume; each worker's binary (cmd/<role>),
//     NATS user and password variable; every ENGRAM_* variable is a setting
//     of internal/config (or a NATS credential variable) and the whole
//     environment loads and validates as the process would load it; no
//     credential is written inline; image versions are the ones go.mod
//     tests (nats-server, Ollama).
//   - deploy/Dockerfile: parsed with BuildKit's Dockerfile parser:
//     multi-stage, CGO_ENABLED=0 (the SQLite driver is pure Go), a
//     non-root USER, the Go version of go.mod.
//   - deploy/k8s: every overlay rendered with the kustomize Go API
//     (krusty, on disk), every object decoded strictly into its k8s.io/api
//     type (unknown fields fail) and the KEDA ScaledObject into a local
//     struct mirroring keda.sh/v1alpha1 (KEDA's own module is too heavy
//     for a test); probes, ports, security contexts, resources, Secrets,
//     PodDisruptionBudgets, services and selectors; consumer and stream
//     names against events.DefaultTopology and config.Topology; the NATS
//     configuration with nats-server's own parser.
//   - NATS end to end: a real nats-server started from deploy/nats/nats.conf
//     (and accounts.conf), `engram setup`'s topology code run against it as
//     the setup user, every role's user logging in with its compose
//     password, the idle detector opening its ENGRAM_ACTIVITY bucket as the
//     idle user, and the KEDA scaler's own query (/jsz?acc=...) finding every
//     ScaledObject's account, stream and consumer, whose lag grows with
//     that role's events.
//   - deploy/prometheus/alerts.yml and deploy/grafana/engram.json: decoded
//     strictly, every expression parsed with the PromQL parser
//     (github.com/prometheus/prometheus/promql/parser), every metric and
//     label checked against the process's registry, no `project` label.
//   - deploy/helm/engram: rendered with the Helm v4 Go module as `helm
//     template` does, every object decoded strictly, the default render held
//     to every check of the kustomize production overlay, the
//     external-services render checked too, and Helm's linter.
//   - deploy/prometheus/alerts_test.yml: run by promtool test rules
//     (scripts/promtool.sh), with a case for every alert.
//   - docs/operations.md "Metrics": every metric the process registers is in the table
//     with its type and labels, and nothing else is.
package deploy
