{{/* Labels of the controller's objects (config/default's), plus the user's. */}}
{{- define "ferrolb.controller.labels" -}}
app: metallb
component: controller
{{- range $k, $v := .Values.controller.labels }}
{{ $k }}: {{ $v | quote }}
{{- end }}
{{- end }}

{{- /* The speaker Pods' app label: metallb, as MetalLB's; ferrolb beside a
running MetalLB (speaker.metallbCoexistence), so that neither member list
takes the other's speakers for its own. */ -}}
{{- define "ferrolb.speaker.app" -}}
{{ if .Values.speaker.metallbCoexistence.enabled }}ferrolb{{ else }}metallb{{ end }}
{{- end }}

{{- define "ferrolb.speaker.labels" -}}
app: {{ include "ferrolb.speaker.app" . }}
component: speaker
{{- range $k, $v := .Values.speaker.labels }}
{{ $k }}: {{ $v | quote }}
{{- end }}
{{- end }}

{{- define "ferrolb.controller.serviceAccountName" -}}
{{- if .Values.controller.serviceAccount.create -}}
{{ default "controller" .Values.controller.serviceAccount.name }}
{{- else -}}
{{ default "default" .Values.controller.serviceAccount.name }}
{{- end -}}
{{- end }}

{{- define "ferrolb.speaker.serviceAccountName" -}}
{{- if .Values.speaker.serviceAccount.create -}}
{{ default "speaker" .Values.speaker.serviceAccount.name }}
{{- else -}}
{{ default "default" .Values.speaker.serviceAccount.name }}
{{- end -}}
{{- end }}

{{/* An image reference: repository:tag, the tag defaulting to appVersion. */}}
{{- define "ferrolb.image" -}}
{{ .image.repository }}:{{ .image.tag | default .chart.AppVersion }}
{{- end }}

{{/*
The liveness, readiness or startup probe `probe` of a component: /healthz
(/readyz for readiness) on the metrics port, or on `port` when given (the
program then answers there too: --health-probe-port).
*/}}
{{- define "ferrolb.probe" -}}
httpGet:
  path: {{ .path }}
  port: {{ .probe.port | default "monitoring" }}
{{- range $k := list "initialDelaySeconds" "periodSeconds" "timeoutSeconds" "successThreshold" "failureThreshold" }}
{{- if hasKey $.probe $k }}
{{ $k }}: {{ get $.probe $k }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The port the probes of a component (its values: livenessProbe, ...) name,
for --health-probe-port; empty when they name none.
*/}}
{{- define "ferrolb.healthProbePort" -}}
{{- $port := "" -}}
{{- range $p := list .livenessProbe .readinessProbe (.startupProbe | default dict) -}}
{{- if and $p $p.enabled $p.port -}}
{{- if and $port (ne (toString $port) (toString $p.port)) -}}
{{- fail (printf "the probes of one component must use the same port (%v and %v): the program answers on one --health-probe-port" $port $p.port) -}}
{{- end -}}
{{- $port = $p.port -}}
{{- end -}}
{{- end -}}
{{- $port -}}
{{- end }}
