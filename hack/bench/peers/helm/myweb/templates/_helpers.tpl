{{- define "myweb.selector" -}}
app.kubernetes.io/name: myweb
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" | quote }}
{{- end -}}
{{- define "myweb.labels" -}}
{{ include "myweb.selector" . }}
app.kubernetes.io/component: web
{{- end -}}
