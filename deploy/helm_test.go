package deploy

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
)

// helmTemplate renders deploy/helm/engram as `helm template` does (the
// Helm v4 Go API, client-only: no cluster), with the release name and
// namespace engram and vals over the chart's values, and returns every
// manifest, hooks included.
func helmTemplate(t *testing.T, vals map[string]any) ([]string, error) {
	t.Helper()
	ch, err := loader.Load(path("deploy", "helm", "engram"))
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	if err := ch.Validate(); err != nil {
		t.Fatalf("chart: %v", err)
	}
	cfg := &action.Configuration{}
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.ReleaseName = "engram"
	install.Namespace = "engram"
	install.KubeVersion = &common.KubeVersion{Version: "v1.34.0", Major: "1", Minor: "34"}
	rel, err := install.Run(ch, vals)
	if err != nil {
		return nil, err
	}
	r, ok := rel.(*release.Release)
	if !ok {
		t.Fatalf("release of type %T", rel)
	}
	docs := strings.Split(r.Manifest, "\n---\n")
	for _, h := range r.Hooks {
		docs = append(docs, h.Manifest)
	}
	return docs, nil
}

// renderHelm renders the chart and decodes every object strictly into its
// Kubernetes type, as render does for kustomize.
func renderHelm(t *testing.T, vals map[string]any) *rendered {
	t.Helper()
	docs, err := helmTemplate(t, vals)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	r := &rendered{overlay: "production", namespace: "engram", deployments: map[string]*appsv1.Deployment{}, statefulSets: map[string]*appsv1.StatefulSet{},
		jobs: map[string]*batchv1.Job{}, services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{},
		secrets: map[string]*corev1.Secret{}, pdbs: map[string]*policyv1.PodDisruptionBudget{}, scaled: map[string]*ScaledObject{}}
	for _, doc := range docs {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name, Namespace string
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("a rendered document is not YAML: %v\n%s", err, doc)
		}
		if head.Kind == "" {
			continue // a template that renders nothing
		}
		where := "helm " + head.Kind + "/" + head.Metadata.Name
		var obj any
		switch head.Kind {
		case "Deployment":
			r.deployments[head.Metadata.Name] = &appsv1.Deployment{}
			obj = r.deployments[head.Metadata.Name]
		case "StatefulSet":
			r.statefulSets[head.Metadata.Name] = &appsv1.StatefulSet{}
			obj = r.statefulSets[head.Metadata.Name]
		case "Job":
			r.jobs[head.Metadata.Name] = &batchv1.Job{}
			obj = r.jobs[head.Metadata.Name]
		case "Service":
			r.services[head.Metadata.Name] = &corev1.Service{}
			obj = r.services[head.Metadata.Name]
		case "ConfigMap":
			r.configMaps[head.Metadata.Name] = &corev1.ConfigMap{}
			obj = r.configMaps[head.Metadata.Name]
		case "PodDisruptionBudget":
			r.pdbs[head.Metadata.Name] = &policyv1.PodDisruptionBudget{}
			obj = r.pdbs[head.Metadata.Name]
		case "ScaledObject":
			r.scaled[head.Metadata.Name] = &ScaledObject{}
			obj = r.scaled[head.Metadata.Name]
		default:
			t.Errorf("%s: a kind the test does not know; decode it strictly here", where)
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Errorf("%s: not a valid %s: %v", where, head.Kind, err)
		}
	}
	return r
}

// TestHelmChart renders the chart with its defaults (NATS, Redis and
// Ollama run by the chart, KEDA on, the Secret existing) and holds it to
// every check of the kustomize production overlay: the same names, ports,
// users, consumers, probes, security, sizes, and each Engram container's
// configuration loaded by internal/config as the process would.
func TestHelmChart(t *testing.T) {
	creds := credentials(t)
	r := renderHelm(t, map[string]any{"image": map[string]any{"tag": "v1.0.0"}, "credentials": map[string]any{"existingSecret": "engram-credentials"}})
	checkOverlay(t, r, creds)
	setup := r.jobs["engram-setup"]
	if setup == nil || setup.Annotations["helm.sh/hook"] != "post-install,post-upgrade" || setup.Annotations["helm.sh/hook-delete-policy"] != "before-hook-creation" {
		t.Errorf("engram-setup is not an install and upgrade hook re-created each time (a Job cannot change in place)")
	}
	// The chart's own Redis is new with the install: the store's format is
	// raised then, and only then (an upgrade's hook may run before its
	// rollout is over).
	up := r.jobs["engram-upgrade"]
	if up == nil || up.Annotations["helm.sh/hook"] != "post-install" || len(up.Spec.Template.Spec.Containers) != 1 ||
		!slices.Equal(up.Spec.Template.Spec.Containers[0].Args, []string{"upgrade", "finish"}) {
		t.Errorf("no post-install job running `engram upgrade finish` on the chart's Redis")
	} else if !hasEnv(up.Spec.Template.Spec.Containers[0], "ENGRAM_REDIS_URL") {
		t.Errorf("the upgrade job has no ENGRAM_REDIS_URL")
	}
}

// TestHelmChartRefusesMissingSecret: without the name of an existing
// Secret the chart does not render (no password ever comes from values).
func TestHelmChartRefusesMissingSecret(t *testing.T) {
	_, err := helmTemplate(t, nil)
	if err == nil || !strings.Contains(err.Error(), "credentials.existingSecret") {
		t.Fatalf("rendered without a Secret: %v", err)
	}
}

// TestHelmChartExternal renders the chart against an external NATS, Redis
// (an ACL user over TLS) and Ollama, without KEDA: no StatefulSet, the
// Engram pods connect where the values say with the Secret's passwords, and
// the workers have fixed replicas.
func TestHelmChartExternal(t *testing.T) {
	creds := credentials(t)
	r := renderHelm(t, map[string]any{
		"image":       map[string]any{"tag": "v1.0.0"},
		"credentials": map[string]any{"existingSecret": "engram-credentials"},
		"keda":        map[string]any{"enabled": false},
		"nats":        map[string]any{"enabled": false, "external": map[string]any{"url": "nats://nats.messaging:4222"}},
		"redis":       map[string]any{"enabled": false, "external": map[string]any{"address": "cache.example:6380", "user": "engram", "tls": true}},
		"ollama":      map[string]any{"enabled": false, "host": "http://gpu-box:11434"},
		"config":      map[string]any{"ENGRAM_IDLE_QUIET": "15m", "ENGRAM_STREAM_REPLICAS": 3},
	})
	if len(r.statefulSets) != 0 || len(r.scaled) != 0 {
		t.Errorf("external services and no KEDA: %d StatefulSets, %d ScaledObjects", len(r.statefulSets), len(r.scaled))
	}
	if r.jobs["engram-upgrade"] != nil {
		t.Error("an install hook raises the format of an external Redis, which a running earlier release may share")
	}
	off := renderHelm(t, map[string]any{"image": map[string]any{"tag": "v1.0.0"}, "credentials": map[string]any{"existingSecret": "engram-credentials"},
		"redis": map[string]any{"finishUpgradeOnInstall": false}})
	if off.jobs["engram-upgrade"] != nil || off.jobs["engram-setup"] == nil {
		t.Error("redis.finishUpgradeOnInstall: false keeps the upgrade Job (or drops the setup Job)")
	}
	cm := r.configMaps["engram-config"]
	if cm == nil {
		t.Fatal("no ConfigMap engram-config")
	}
	for _, name := range append(workerRoles(), "idle") {
		d := r.deployments["engram-"+name]
		if d == nil {
			t.Errorf("no Deployment engram-%s", name)
			continue
		}
		if name != "idle" && (d.Spec.Replicas == nil || *d.Spec.Replicas < 1) {
			t.Errorf("engram-%s: replicas %v without KEDA", name, d.Spec.Replicas)
		}
		c := d.Spec.Template.Spec.Containers[0]
		env := map[string]string{}
		for k, v := range cm.Data {
			env[k] = v
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				checkSecretRef(t, name+" "+e.Name, e.ValueFrom.SecretKeyRef, "engram-credentials", creds)
				env[e.Name] = creds[e.ValueFrom.SecretKeyRef.Key]
				continue
			}
			env[e.Name] = expandEnv(e.Value, env)
		}
		cmd := append(append([]string{}, c.Command...), c.Args...)
		if len(c.Command) == 0 {
			cmd = append([]string{"/usr/local/bin/engram"}, c.Args...)
		}
		cfg := loadProcessConfig(t, "helm engram-"+name, kindOf(t, name, cmd), env, "REDIS_PASSWORD")
		if cfg.NATS.URL != "nats://nats.messaging:4222" || cfg.LLM.Host != "http://gpu-box:11434" || cfg.Idle.Quiet.String() != "15m0s" {
			t.Errorf("engram-%s: NATS %q, Ollama %q, idle quiet %v", name, cfg.NATS.URL, cfg.LLM.Host, cfg.Idle.Quiet)
		}
		if want := "rediss://engram:" + creds["ENGRAM_REDIS_PASSWORD"] + "@cache.example:6380/0"; cfg.Store.RedisURL != want {
			t.Errorf("engram-%s: Redis URL %q, want the external address with the ACL user over TLS", name, cfg.Store.RedisURL)
		}
	}
	if cm.Data["ENGRAM_STREAM_REPLICAS"] != "3" {
		t.Errorf("ENGRAM_STREAM_REPLICAS %q: config overrides the chart's setting", cm.Data["ENGRAM_STREAM_REPLICAS"])
	}
}

// TestHelmLint runs Helm's own chart linter (helm lint): no error and no
// warning; the information messages (an icon, ...) are logged.
func TestHelmLint(t *testing.T) {
	l := lint.RunAll(path("deploy", "helm", "engram"), map[string]any{"credentials": map[string]any{"existingSecret": "engram-credentials"}}, "engram")
	for _, m := range l.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		} else {
			t.Logf("helm lint: %s", m)
		}
	}
}

// hasEnv reports whether c sets the variable name.
func hasEnv(c corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}
