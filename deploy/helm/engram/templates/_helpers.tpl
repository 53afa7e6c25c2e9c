{{/* The chart's names and the pieces every Engram pod shares. */}}

{{- define "engram.fullname" -}}
{{- if contains "engram" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-engram" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "engram.labels" -}}
app.kubernetes.io/part-of: engram
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "engram.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "engram.secret" -}}
{{- required "credentials.existingSecret: name the Secret that holds ENGRAM_<ROLE>_PASSWORD and ENGRAM_REDIS_PASSWORD (sh deploy/credentials.sh prints them)" .Values.credentials.existingSecret -}}
{{- end -}}

{{/* The NATS URL the Engram pods connect to. */}}
{{- define "engram.natsURL" -}}
{{- if .Values.nats.enabled -}}
nats://{{ include "engram.fullname" . }}-nats:4222
{{- else -}}
{{- required "nats.external.url: the chart runs no NATS (nats.enabled: false)" .Values.nats.external.url -}}
{{- end -}}
{{- end -}}

{{/* Where KEDA reads the consumers' lag. */}}
{{- define "engram.natsMonitoring" -}}
{{- if .Values.nats.enabled -}}
{{ include "engram.fullname" . }}-nats-headless.{{ .Release.Namespace }}.svc.cluster.local:8222
{{- else -}}
{{- required "nats.external.monitoringEndpoint: KEDA reads the consumer lag there" .Values.nats.external.monitoringEndpoint -}}
{{- end -}}
{{- end -}}

{{- define "engram.ollamaHost" -}}
{{- if .Values.ollama.enabled -}}
http://{{ include "engram.fullname" . }}-ollama:11434
{{- else -}}
{{- required "ollama.host: the chart runs no Ollama (ollama.enabled: false)" .Values.ollama.host -}}
{{- end -}}
{{- end -}}

{{/* The Redis URL, with the password from the Secret ($(REDIS_PASSWORD)). */}}
{{- define "engram.redisURL" -}}
{{- if .Values.redis.enabled -}}
redis://:$(REDIS_PASSWORD)@{{ include "engram.fullname" . }}-redis:6379/0
{{- else -}}
{{- $scheme := ternary "rediss" "redis" .Values.redis.external.tls -}}
{{- printf "%s://%s:$(REDIS_PASSWORD)@%s/0" $scheme .Values.redis.external.user (required "redis.external.address: the chart runs no Redis (redis.enabled: false)" .Values.redis.external.address) -}}
{{- end -}}
{{- end -}}

{{/* The environment of an Engram pod of role: its NATS user and password,
     and the Redis URL unless noRedis. */}}
{{- define "engram.env" -}}
- {name: ENGRAM_NATS_USER, value: {{ .role }}}
- {name: ENGRAM_NATS_PASSWORD, valueFrom: {secretKeyRef: {name: {{ include "engram.secret" .root }}, key: {{ printf "ENGRAM_%s_PASSWORD" (upper .role) }}}}}
{{- if not .noRedis }}
- {name: REDIS_PASSWORD, valueFrom: {secretKeyRef: {name: {{ include "engram.secret" .root }}, key: ENGRAM_REDIS_PASSWORD}}}
- {name: ENGRAM_REDIS_URL, value: {{ include "engram.redisURL" .root | quote }}}
{{- end }}
{{- end -}}

{{/* The probes of a process with the health endpoint on port http. */}}
{{- define "engram.probes" -}}
startupProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 2
  failureThreshold: 60
livenessProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readyz, port: http}
  periodSeconds: 10
  failureThreshold: 3
{{- end -}}
