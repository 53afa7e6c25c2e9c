package deploy

import (
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/idle"
	"github.com/engram-memory/engram/pkg/events"
)

// ScaledObject mirrors the shape of KEDA's keda.sh/v1alpha1 ScaledObject
// (github.com/kedacore/keda/v2 apis/keda/v1alpha1, scaledobject_types.go):
// KEDA's own Go module pulls in a large part of Kubernetes, so the test
// decodes into this copy of its fields, strictly.
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ScaledObjectSpec `json:"spec"`
}

// ScaledObjectSpec is keda.sh/v1alpha1 ScaledObjectSpec.
type ScaledObjectSpec struct {
	ScaleTargetRef        *ScaleTarget    `json:"scaleTargetRef"`
	PollingInterval       *int32          `json:"pollingInterval,omitempty"`
	InitialCooldownPeriod *int32          `json:"initialCooldownPeriod,omitempty"`
	CooldownPeriod        *int32          `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount      *int32          `json:"idleReplicaCount,omitempty"`
	MinReplicaCount       *int32          `json:"minReplicaCount,omitempty"`
	MaxReplicaCount       *int32          `json:"maxReplicaCount,omitempty"`
	Advanced              *AdvancedConfig `json:"advanced,omitempty"`
	Triggers              []ScaleTriggers `json:"triggers"`
	Fallback              *Fallback       `json:"fallback,omitempty"`
}

// ScaleTarget is keda.sh/v1alpha1 ScaleTarget.
type ScaleTarget struct {
	Name                   string `json:"name"`
	APIVersion             string `json:"apiVersion,omitempty"`
	Kind                   string `json:"kind,omitempty"`
	EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
}

// AdvancedConfig is keda.sh/v1alpha1 AdvancedConfig (without the scaling
// modifiers, which the manifests do not use).
type AdvancedConfig struct {
	HorizontalPodAutoscalerConfig *struct {
		Name     string                                         `json:"name,omitempty"`
		Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
	} `json:"horizontalPodAutoscalerConfig,omitempty"`
	RestoreToOriginalReplicaCount bool `json:"restoreToOriginalReplicaCount,omitempty"`
}

// Fallback is keda.sh/v1alpha1 Fallback.
type Fallback struct {
	FailureThreshold int32  `json:"failureThreshold"`
	Replicas         int32  `json:"replicas"`
	Behavior         string `json:"behavior,omitempty"`
}

// ScaleTriggers is keda.sh/v1alpha1 ScaleTriggers.
type ScaleTriggers struct {
	Type              string            `json:"type"`
	Name              string            `json:"name,omitempty"`
	UseCachedMetrics  bool              `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string `json:"metadata"`
	AuthenticationRef *struct {
		Name string `json:"name"`
		Kind string `json:"kind,omitempty"`
	} `json:"authenticationRef,omitempty"`
	MetricType autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// natsJetStreamMetadata are the keys KEDA's nats-jetstream scaler reads
// (pkg/scalers/nats_jetstream_scaler.go); the first five are required.
var natsJetStreamMetadata = []string{"natsServerMonitoringEndpoint", "account", "stream", "consumer", "lagThreshold",
	"activationLagThreshold", "useHttps"}

// rendered is one overlay, every object decoded into its type.
type rendered struct {
	overlay      string
	namespace    string
	deployments  map[string]*appsv1.Deployment
	statefulSets map[string]*appsv1.StatefulSet
	jobs         map[string]*batchv1.Job
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	pdbs         map[string]*policyv1.PodDisruptionBudget
	scaled       map[string]*ScaledObject
}

// render builds an overlay with the kustomize Go API, on disk, from a copy
// of deploy/k8s that holds a fresh credentials.env for the dev overlay.
func render(t *testing.T, overlay string, creds map[string]string) *rendered {
	t.Helper()
	dir := t.TempDir()
	src := path("deploy", "k8s")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		if d.Name() == "credentials.env" {
			return nil // a developer's own; the test writes fresh ones
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	var env strings.Builder
	for k, v := range creds {
		fmt.Fprintf(&env, "%s=%s\n", k, v)
	}
	if err := os.WriteFile(filepath.Join(dir, "overlays", "dev", "credentials.env"), []byte(env.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(dir, "overlays", overlay))
	if err != nil {
		t.Fatalf("overlay %s does not render: %v", overlay, err)
	}
	r := &rendered{overlay: overlay, deployments: map[string]*appsv1.Deployment{}, statefulSets: map[string]*appsv1.StatefulSet{},
		jobs: map[string]*batchv1.Job{}, services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{},
		secrets: map[string]*corev1.Secret{}, pdbs: map[string]*policyv1.PodDisruptionBudget{}, scaled: map[string]*ScaledObject{}}
	for _, res := range rm.Resources() {
		b, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		kind, name := res.GetKind(), res.GetName()
		where := overlay + " " + kind + "/" + name
		var obj any
		switch kind {
		case "Namespace":
			ns := &corev1.Namespace{}
			obj = ns
			r.namespace = name
		case "Deployment":
			r.deployments[name] = &appsv1.Deployment{}
			obj = r.deployments[name]
		case "StatefulSet":
			r.statefulSets[name] = &appsv1.StatefulSet{}
			obj = r.statefulSets[name]
		case "Job":
			r.jobs[name] = &batchv1.Job{}
			obj = r.jobs[name]
		case "Service":
			r.services[name] = &corev1.Service{}
			obj = r.services[name]
		case "ConfigMap":
			r.configMaps[name] = &corev1.ConfigMap{}
			obj = r.configMaps[name]
		case "Secret":
			r.secrets[name] = &corev1.Secret{}
			obj = r.secrets[name]
		case "PodDisruptionBudget":
			r.pdbs[name] = &policyv1.PodDisruptionBudget{}
			obj = r.pdbs[name]
		case "ScaledObject":
			r.scaled[name] = &ScaledObject{}
			obj = r.scaled[name]
		default:
			t.Errorf("%s: a kind the test does not know; decode it strictly here", where)
			continue
		}
		if err := yaml.UnmarshalStrict(b, obj); err != nil {
			t.Errorf("%s: not a valid %s: %v", where, kind, err)
		}
		if kind != "Namespace" && res.GetNamespace() != "engram" {
			t.Errorf("%s: namespace %q, want engram", where, res.GetNamespace())
		}
	}
	if r.namespace != "engram" {
		t.Errorf("overlay %s creates namespace %q, want engram", overlay, r.namespace)
	}
	return r
}

// generated finds a generated object (ConfigMap, Secret) by its name
// before kustomize's hash suffix.
func generated[T any](m map[string]*T, base string) (*T, string) {
	for name, o := range m {
		if name == base || regexp.MustCompile("^"+regexp.QuoteMeta(base)+"-[a-z0-9]{10}$").MatchString(name) {
			return o, name
		}
	}
	return nil, ""
}

func TestKustomizeOverlays(t *testing.T) {
	creds := credentials(t)
	for _, overlay := range []string{"dev", "production"} {
		t.Run(overlay, func(t *testing.T) { checkOverlay(t, render(t, overlay, creds), creds) })
	}
}

func checkOverlay(t *testing.T, r *rendered, creds map[string]string) {
	cm, cmName := generated(r.configMaps, "engram-config")
	if cm == nil {
		t.Fatalf("no ConfigMap engram-config")
	}
	secret, secretName := generated(r.secrets, "engram-credentials")
	switch r.overlay {
	case "dev":
		if secret == nil {
			t.Fatal("dev generates no Secret engram-credentials")
		}
		for k := range creds {
			if _, ok := secret.Data[k]; !ok {
				if _, ok := secret.StringData[k]; !ok {
					t.Errorf("dev Secret lacks %s", k)
				}
			}
		}
	case "production":
		if secret != nil {
			t.Error("production renders a Secret engram-credentials: it must come from the secret manager, not the manifests")
		}
		secretName = "engram-credentials"
	}
	for name, c := range r.configMaps {
		for k, v := range c.Data {
			if regexp.MustCompile(`PASSWORD|_TOKENS?$|SECRET`).MatchString(k) || regexp.MustCompile(`://[^/@]*:[^/@]*@`).MatchString(v) {
				t.Errorf("ConfigMap %s holds a credential in %s", name, k)
			}
		}
	}

	// NATS: a StatefulSet of three on file storage, its configuration
	// checked with nats-server's parser against the pods' ports.
	sts := r.statefulSets["engram-nats"]
	if sts == nil {
		t.Fatal("no StatefulSet engram-nats")
	}
	natsC := sts.Spec.Template.Spec.Containers[0]
	port := func(c corev1.Container, name string) int {
		for _, p := range c.Ports {
			if p.Name == name {
				return int(p.ContainerPort)
			}
		}
		t.Errorf("container %s has no port %s", c.Name, name)
		return 0
	}
	headless := r.services[sts.Spec.ServiceName]
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 || headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("NATS: %v replicas behind service %q; want a cluster of 3 behind a headless service", sts.Spec.Replicas, sts.Spec.ServiceName)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 || !mounts(natsC, sts.Spec.VolumeClaimTemplates[0].Name, "/data") {
		t.Errorf("NATS: no volume claim mounted on /data (JetStream file storage)")
	}
	natsCM := configMapVolume(t, r, sts.Spec.Template.Spec, natsC, "/etc/nats")
	natsEnv := map[string]string{}
	for _, e := range natsC.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.Name == "POD_NAME" && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			checkSecretRef(t, "NATS "+e.Name, e.ValueFrom.SecretKeyRef, secretName, creds)
			natsEnv[e.Name] = creds[e.ValueFrom.SecretKeyRef.Key]
		default:
			t.Errorf("NATS: unexpected env %s", e.Name)
		}
	}
	for _, role := range credentialRoles {
		if natsEnv[passwordVar(role)] != creds[passwordVar(role)] {
			t.Errorf("NATS: no %s from the Secret (accounts.conf reads it)", passwordVar(role))
		}
	}
	opts := natsOptionsFrom(t, natsCM, natsEnv)
	mon, cli, clu := port(natsC, "monitor"), port(natsC, "client"), port(natsC, "cluster")
	if !opts.JetStream || opts.StoreDir != "/data" || opts.HTTPPort != mon || opts.Port != cli || opts.Cluster.Port != clu {
		t.Errorf("nats.conf: JetStream %v in %q, monitoring %d, clients %d, cluster %d; the pod has %d, %d, %d",
			opts.JetStream, opts.StoreDir, opts.HTTPPort, opts.Port, opts.Cluster.Port, mon, cli, clu)
	}
	if opts.ServerName != "engram-nats-0" {
		t.Errorf("nats.conf server_name %q, want the pod's name (KEDA finds a consumer's leader by it)", opts.ServerName)
	}
	var routes []string
	for _, u := range opts.Routes {
		routes = append(routes, u.Host)
	}
	var want []string
	for i := range int(*sts.Spec.Replicas) {
		want = append(want, fmt.Sprintf("%s-%d.%s:%d", sts.Name, i, sts.Spec.ServiceName, clu))
	}
	if !slices.Equal(routes, want) {
		t.Errorf("nats.conf routes %v, want %v", routes, want)
	}
	if b, err := os.ReadFile(path("deploy", "nats", "accounts.conf")); err == nil && natsCM.Data["accounts.conf"] != string(b) {
		t.Error("the NATS ConfigMap's accounts.conf differs from deploy/nats/accounts.conf: cp deploy/nats/accounts.conf deploy/k8s/base/nats/accounts.conf")
	}
	natsSvc := r.services["engram-nats"]
	if natsSvc == nil {
		t.Fatal("no Service engram-nats for the clients")
	}
	headlessHost := fmt.Sprintf("%s.%s.svc.cluster.local:%d", headless.Name, r.namespace, servicePort(t, headless, "monitor"))
	if servicePort(t, headless, "monitor") != mon {
		t.Errorf("headless service monitor port differs from the pods' %d", mon)
	}

	redisSts := r.statefulSets["engram-redis"]
	if redisSts == nil || !strings.Contains(strings.Join(redisSts.Spec.Template.Spec.Containers[0].Command, " "), "--appendonly yes") ||
		len(redisSts.Spec.VolumeClaimTemplates) != 1 {
		t.Error("no Redis StatefulSet with AOF persistence on a volume claim")
	}
	if r.statefulSets["engram-ollama"] == nil || len(r.statefulSets["engram-ollama"].Spec.VolumeClaimTemplates) != 1 {
		t.Error("no Ollama StatefulSet with a volume for its models")
	}

	// Every pod: non-root, read-only root, no privilege, resources, pinned images.
	for name, d := range r.deployments {
		checkPod(t, "Deployment "+name, d.Spec.Template.Spec)
	}
	for name, s := range r.statefulSets {
		checkPod(t, "StatefulSet "+name, s.Spec.Template.Spec)
	}
	for name, j := range r.jobs {
		checkPod(t, "Job "+name, j.Spec.Template.Spec)
		if p := j.Spec.Template.Spec.RestartPolicy; p != corev1.RestartPolicyOnFailure && p != corev1.RestartPolicyNever {
			t.Errorf("Job %s: restart policy %q", name, p)
		}
	}
	pull := r.jobs["engram-ollama-pull"]
	if pull == nil {
		t.Error("no Job engram-ollama-pull")
	} else {
		script := strings.Join(pull.Spec.Template.Spec.Containers[0].Args, " ")
		for _, v := range []string{"ENGRAM_EXTRACT_MODEL", "ENGRAM_CONSOLIDATE_MODEL", "ENGRAM_SUMMARIZE_MODEL", "ENGRAM_EMBED_MODEL"} {
			if !strings.Contains(script, "$"+v) {
				t.Errorf("engram-ollama-pull does not pull $%s", v)
			}
		}
		if !envFromConfigMap(pull.Spec.Template.Spec.Containers[0], cmName) {
			t.Error("engram-ollama-pull does not read the models from engram-config")
		}
	}

	// The Engram processes: each loads its configuration from the
	// ConfigMap and its env as the process would.
	type proc struct {
		spec corev1.PodSpec
		kind processKind
	}
	procs := map[string]proc{}
	var setupCfg *config.Config
	addProc := func(where string, spec corev1.PodSpec) {
		c := spec.Containers[0]
		if !strings.Contains(c.Image, "engram") {
			return
		}
		cmd := append(append([]string{}, c.Command...), c.Args...)
		if len(c.Command) == 0 {
			cmd = append([]string{"/usr/local/bin/engram"}, c.Args...)
		}
		k := kindOf(t, where, cmd)
		procs[where] = proc{spec, k}
		if !envFromConfigMap(c, cmName) {
			t.Errorf("%s: config does not come from ConfigMap engram-config", where)
		}
		env := map[string]string{}
		for k, v := range cm.Data {
			env[k] = v
		}
		for _, e := range c.Env {
			switch {
			case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
				checkSecretRef(t, where+" "+e.Name, e.ValueFrom.SecretKeyRef, secretName, creds)
				env[e.Name] = creds[e.ValueFrom.SecretKeyRef.Key]
			case e.ValueFrom != nil:
				t.Errorf("%s: %s from an unexpected source", where, e.Name)
			default:
				env[e.Name] = expandEnv(e.Value, env)
				if regexp.MustCompile(`PASSWORD|_TOKENS?$|SECRET`).MatchString(e.Name) {
					t.Errorf("%s: %s written inline", where, e.Name)
				}
			}
		}
		cfg := loadProcessConfig(t, where, k, env, "REDIS_PASSWORD")
		if k.role == "setup" {
			setupCfg = &cfg
		}
		if env["ENGRAM_NATS_USER"] != k.user() || env["ENGRAM_NATS_PASSWORD"] != creds[passwordVar(k.user())] {
			t.Errorf("%s: NATS user %q; want %s with the Secret's %s", where, env["ENGRAM_NATS_USER"], k.user(), passwordVar(k.user()))
		}
		if u, err := url.Parse(cfg.NATS.URL); err != nil || u.Host != fmt.Sprintf("%s:%d", natsSvc.Name, servicePort(t, natsSvc, "client")) ||
			servicePort(t, natsSvc, "client") != opts.Port {
			t.Errorf("%s: ENGRAM_NATS_URL %q is not the NATS client service", where, cfg.NATS.URL)
		}
		if k.groups&config.Runtime != 0 {
			redis := r.services["engram-redis"]
			u, err := url.Parse(cfg.Store.RedisURL)
			if err != nil || cfg.Store.Kind != "redis" || redis == nil || u.Host != fmt.Sprintf("%s:%d", redis.Name, servicePort(t, redis, "redis")) {
				t.Errorf("%s: store %s at %q is not the Redis service", where, cfg.Store.Kind, cfg.Store.RedisURL)
			} else if pw, _ := u.User.Password(); pw != creds["ENGRAM_REDIS_PASSWORD"] {
				t.Errorf("%s: the Redis URL does not carry the Secret's ENGRAM_REDIS_PASSWORD", where)
			}
			ol := r.services["engram-ollama"]
			if ol == nil || cfg.LLM.Host != fmt.Sprintf("http://%s:%d", ol.Name, servicePort(t, ol, "http")) {
				t.Errorf("%s: ENGRAM_OLLAMA_HOST %q is not the Ollama service", where, cfg.LLM.Host)
			}
		}
		if strings.HasPrefix(where, "Job") {
			return
		}
		_, httpPort, _ := net.SplitHostPort(cfg.HTTP.Addr)
		if strconv.Itoa(port(c, "http")) != httpPort {
			t.Errorf("%s: container port http %d, ENGRAM_HTTP_ADDR %q", where, port(c, "http"), cfg.HTTP.Addr)
		}
		for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port != intstr.FromString("http") {
				t.Errorf("%s: want a probe on %s of port http, got %+v", where, want, probe)
			}
		}
		if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= cfg.Work.ShutdownTimeout+10*time.Second {
			t.Errorf("%s: terminationGracePeriodSeconds %v, want more than ENGRAM_SHUTDOWN_TIMEOUT %v + 10s", where, g, cfg.Work.ShutdownTimeout)
		}
		if k.worker {
			checkScaledObject(t, r, where, k.role, cfg.Topology(), cfg.ConcurrencyOf(k.role), headlessHost)
		}
	}
	for name, d := range r.deployments {
		addProc("Deployment "+name, d.Spec.Template.Spec)
	}
	for name, j := range r.jobs {
		addProc("Job "+name, j.Spec.Template.Spec)
	}
	roles := map[string]string{}
	for where, p := range procs {
		if other, dup := roles[p.kind.role]; dup {
			t.Errorf("%s and %s both run the %s", where, other, p.kind.role)
		}
		roles[p.kind.role] = where
	}
	for _, role := range append(workerRoles(), idle.ConsumerName) {
		where, ok := roles[role]
		if !ok || where != "Deployment engram-"+role {
			t.Errorf("the %s runs in %q, want Deployment engram-%s", role, where, role)
			continue
		}
		checkPDB(t, r, r.deployments["engram-"+role])
	}
	setup, ok := roles["setup"]
	if !ok || setup != "Job engram-setup" || setupCfg == nil {
		t.Fatalf("engram setup runs in %q, want Job engram-setup", setup)
	}
	// JetStream reserves each file stream's max bytes: the streams engram
	// setup creates must fit the server's max_file_store and its volume
	// (every node of the cluster holds a replica of each stream).
	topo := setupCfg.Topology()
	var need int64
	for _, sc := range []events.StreamConfig{topo.In, topo.Out, topo.DLQ} {
		if sc.MaxBytes <= 0 {
			t.Errorf("stream %s has no max bytes: it could fill the NATS volume", sc.Name)
		}
		need += sc.MaxBytes
	}
	disk := sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().Value()
	if need > opts.JetStreamMaxStore || opts.JetStreamMaxStore > disk {
		t.Errorf("streams need %d bytes, NATS max_file_store is %d, its volume %d: want streams <= max_file_store <= volume",
			need, opts.JetStreamMaxStore, disk)
	}
	if topo.In.Replicas != int(*sts.Spec.Replicas) {
		t.Errorf("ENGRAM_STREAM_REPLICAS %d for a NATS cluster of %d", topo.In.Replicas, *sts.Spec.Replicas)
	}
	for name := range r.scaled {
		if _, ok := r.deployments[name]; !ok {
			t.Errorf("ScaledObject %s scales no Deployment", name)
		}
	}
	checkPDB(t, r, &appsv1.Deployment{ObjectMeta: sts.ObjectMeta, Spec: appsv1.DeploymentSpec{Selector: sts.Spec.Selector, Template: sts.Spec.Template}})
	checkServices(t, r)
}

// checkScaledObject: the worker's ScaledObject scales its Deployment on
// the lag of the consumer the worker's own topology names for its role,
// through the headless NATS service's monitoring port.
func checkScaledObject(t *testing.T, r *rendered, where, role string, topo events.Topology, concurrency int, host string) {
	t.Helper()
	so := r.scaled["engram-"+role]
	if so == nil {
		t.Errorf("%s: no ScaledObject engram-%s", where, role)
		return
	}
	d := r.deployments["engram-"+role]
	if ref := so.Spec.ScaleTargetRef; ref == nil || ref.Name != d.Name || (ref.Kind != "" && ref.Kind != "Deployment") {
		t.Errorf("ScaledObject %s targets %+v, want Deployment %s", so.Name, ref, d.Name)
	}
	if d.Spec.Replicas != nil {
		t.Errorf("Deployment %s sets replicas: KEDA's HPA owns them (an apply would reset them)", d.Name)
	}
	mn, mx := so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount
	if mn == nil || mx == nil || *mn < 1 || *mx < *mn {
		t.Errorf("ScaledObject %s: replicas %v..%v, want 1 <= min <= max (from zero a worker starts late)", so.Name, mn, mx)
	}
	if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "nats-jetstream" {
		t.Errorf("ScaledObject %s: triggers %+v, want one nats-jetstream", so.Name, so.Spec.Triggers)
		return
	}
	md := so.Spec.Triggers[0].Metadata
	for k := range md {
		if !slices.Contains(natsJetStreamMetadata, k) {
			t.Errorf("ScaledObject %s: metadata %s is not a nats-jetstream parameter", so.Name, k)
		}
	}
	cc, ok := topo.Consumer(role)
	if !ok {
		t.Errorf("%s: the worker's topology has no consumer %s", where, role)
	}
	if md["stream"] != topo.In.Name || md["consumer"] != cc.Name {
		t.Errorf("ScaledObject %s: stream %q consumer %q, want %s %s (the worker's topology)", so.Name, md["stream"], md["consumer"], topo.In.Name, cc.Name)
	}
	// The consumer hands out at most MaxAckPending messages at once: more
	// replicas than that many pulls would wait with nothing to do.
	if mx != nil && int(*mx)*concurrency > cc.MaxAckPending {
		t.Errorf("ScaledObject %s: %d replicas x concurrency %d exceed consumer %s's max ack pending %d",
			so.Name, *mx, concurrency, cc.Name, cc.MaxAckPending)
	}
	if md["natsServerMonitoringEndpoint"] != host {
		t.Errorf("ScaledObject %s: endpoint %q, want %s (the headless service: KEDA asks <server_name>.<endpoint>)", so.Name, md["natsServerMonitoringEndpoint"], host)
	}
	if md["account"] == "" {
		t.Errorf("ScaledObject %s: no account", so.Name)
	}
	if n, err := strconv.Atoi(md["lagThreshold"]); err != nil || n < 1 {
		t.Errorf("ScaledObject %s: lagThreshold %q, want a positive integer", so.Name, md["lagThreshold"])
	}
}

// checkPod: non-root, read-only root filesystem, no privilege escalation,
// no capabilities, resources, no service account token, pinned images.
func checkPod(t *testing.T, where string, spec corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	podNonRoot := psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: mounts a service account token it does not need", where)
	}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		cw := where + " container " + c.Name
		sc := c.SecurityContext
		nonRoot := podNonRoot || sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot
		if !nonRoot {
			t.Errorf("%s: not runAsNonRoot", cw)
		}
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: root filesystem not read-only", cw)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: allows privilege escalation", cw)
		}
		if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("%s: keeps its capabilities", cw)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: resources %+v, want cpu and memory requests and a memory limit", cw, c.Resources)
		}
		if strings.Contains(c.Image, "engram") {
			if _, tag, _ := strings.Cut(c.Image, ":"); tag == "" || tag == "latest" {
				t.Errorf("%s: image %s, want a tag set by the overlay", cw, c.Image)
			}
			continue
		}
		checkImage(t, cw, c.Image)
	}
}

// checkPDB: a PodDisruptionBudget selects the workload's pods.
func checkPDB(t *testing.T, r *rendered, d *appsv1.Deployment) {
	t.Helper()
	for _, p := range r.pdbs {
		if p.Spec.Selector != nil && selects(p.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			if p.Spec.MaxUnavailable == nil && p.Spec.MinAvailable == nil {
				t.Errorf("PodDisruptionBudget %s limits nothing", p.Name)
			}
			return
		}
	}
	t.Errorf("no PodDisruptionBudget selects the pods of %s", d.Name)
}

// checkServices: every Service selects pods, and its target ports are
// ports of those pods.
func checkServices(t *testing.T, r *rendered) {
	t.Helper()
	var pods []corev1.PodTemplateSpec
	for _, d := range r.deployments {
		pods = append(pods, d.Spec.Template)
	}
	for _, s := range r.statefulSets {
		pods = append(pods, s.Spec.Template)
	}
	for name, svc := range r.services {
		var matched []corev1.PodTemplateSpec
		for _, p := range pods {
			if selects(svc.Spec.Selector, p.Labels) {
				matched = append(matched, p)
			}
		}
		if len(svc.Spec.Selector) == 0 || len(matched) == 0 {
			t.Errorf("Service %s selects no pods", name)
			continue
		}
		for _, sp := range svc.Spec.Ports {
			for _, p := range matched {
				found := false
				for _, c := range p.Spec.Containers {
					for _, cp := range c.Ports {
						if sp.TargetPort.String() == cp.Name || sp.TargetPort.IntValue() == int(cp.ContainerPort) {
							found = true
						}
					}
				}
				if !found {
					t.Errorf("Service %s port %s targets %s, which its pods do not have", name, sp.Name, sp.TargetPort.String())
				}
			}
		}
	}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func servicePort(t *testing.T, s *corev1.Service, name string) int {
	t.Helper()
	for _, p := range s.Spec.Ports {
		if p.Name == name {
			return int(p.Port)
		}
	}
	t.Errorf("Service %s has no port %s", s.Name, name)
	return 0
}

func mounts(c corev1.Container, volume, at string) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == volume && m.MountPath == at {
			return true
		}
	}
	return false
}

func envFromConfigMap(c corev1.Container, name string) bool {
	for _, e := range c.EnvFrom {
		if e.ConfigMapRef != nil && e.ConfigMapRef.Name == name {
			return true
		}
	}
	return false
}

// configMapVolume is the ConfigMap mounted at "at" in c.
func configMapVolume(t *testing.T, r *rendered, spec corev1.PodSpec, c corev1.Container, at string) *corev1.ConfigMap {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath != at {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				if cm := r.configMaps[v.ConfigMap.Name]; cm != nil {
					return cm
				}
			}
		}
	}
	t.Fatalf("container %s mounts no rendered ConfigMap at %s", c.Name, at)
	return nil
}

func checkSecretRef(t *testing.T, where string, ref *corev1.SecretKeySelector, secret string, creds map[string]string) {
	t.Helper()
	if ref.Name != secret {
		t.Errorf("%s: from Secret %s, want %s", where, ref.Name, secret)
	}
	if _, ok := creds[ref.Key]; !ok {
		t.Errorf("%s: key %s is not one deploy/credentials.sh makes", where, ref.Key)
	}
}

// expandEnv resolves $(NAME) references to earlier variables as the
// kubelet does.
func expandEnv(v string, env map[string]string) string {
	return regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(v, func(m string) string {
		if x, ok := env[m[2:len(m)-1]]; ok {
			return x
		}
		return m
	})
}

// natsOptionsFrom parses the nats.conf of a ConfigMap (with its
// accounts.conf) with nats-server's parser.
func natsOptionsFrom(t *testing.T, cm *corev1.ConfigMap, env map[string]string) *server.Options {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Setenv("POD_NAME", "engram-nats-0")
	dir := t.TempDir()
	for _, f := range []string{"nats.conf", "accounts.conf"} {
		if cm.Data[f] == "" {
			t.Fatalf("ConfigMap %s lacks %s", cm.Name, f)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(cm.Data[f]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "nats.conf"))
	if err != nil {
		t.Fatalf("the NATS ConfigMap's nats.conf: nats-server refuses it: %v", err)
	}
	return opts
}

// TestNATSAccountsCopy: the Kubernetes base's accounts.conf is a copy of
// deploy/nats/accounts.conf (kustomize reads no file outside its root).
func TestNATSAccountsCopy(t *testing.T) {
	want, err := os.ReadFile(path("deploy", "nats", "accounts.conf"))
	if os.IsNotExist(err) {
		t.Skip("deploy/nats/accounts.conf does not exist yet; the base holds a copy of the NATS auth branch's")
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, "deploy", "k8s", "base", "nats", "accounts.conf"); string(got) != string(want) {
		t.Error("deploy/k8s/base/nats/accounts.conf differs from deploy/nats/accounts.conf: cp deploy/nats/accounts.conf deploy/k8s/base/nats/accounts.conf")
	}
	// The Helm chart reads only files inside itself: a copy too.
	if got := read(t, "deploy", "helm", "engram", "files", "accounts.conf"); string(got) != string(want) {
		t.Error("deploy/helm/engram/files/accounts.conf differs from deploy/nats/accounts.conf: cp deploy/nats/accounts.conf deploy/helm/engram/files/accounts.conf")
	}
}
