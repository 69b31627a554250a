{{- define "central.name" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "central.labels" -}}
app.kubernetes.io/name: federation-central
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "central.selector" -}}
app.kubernetes.io/name: federation-central
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "central.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{- define "central.dbSecret" -}}
{{- default (printf "%s-db" (include "central.name" .)) .Values.database.existingSecret -}}
{{- end -}}

{{- define "central.tokensSecret" -}}
{{- default (printf "%s-tokens" (include "central.name" .)) .Values.tokens.existingSecret -}}
{{- end -}}

{{- define "central.securityContext" -}}
runAsNonRoot: true
runAsUser: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
