{{- define "agent.name" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "agent.labels" -}}
app.kubernetes.io/name: federation-agent
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "agent.selector" -}}
app.kubernetes.io/name: federation-agent
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "agent.tokenSecret" -}}
{{- default (printf "%s-token" (include "agent.name" .)) .Values.token.existingSecret -}}
{{- end -}}
