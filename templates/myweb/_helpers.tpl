{{- define "myweb.selector" -}}
app.kubernetes.io/name: myweb
app.kubernetes.io/instance: {{ .Name | trunc 63 | trimAll "-." | quote }}
{{- end -}}
{{- define "myweb.labels" -}}
{{ include "myweb.selector" . }}
app.kubernetes.io/component: web
{{- end -}}
