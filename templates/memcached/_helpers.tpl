{{- define "memcached.selector" -}}
app.kubernetes.io/name: memcached
app.kubernetes.io/instance: {{ .Name | trunc 63 | trimAll "-." | quote }}
{{- end -}}
{{- define "memcached.labels" -}}
{{ include "memcached.selector" . }}
app.kubernetes.io/component: cache
{{- end -}}
