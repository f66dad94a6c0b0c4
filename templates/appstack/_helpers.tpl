{{- /* appstack.selector (list $ component): the labels that select a component's pods. */ -}}
{{- define "appstack.selector" -}}
{{- $cr := index . 0 -}}
app.kubernetes.io/name: appstack
app.kubernetes.io/instance: {{ $cr.Name | quote }}
app.kubernetes.io/component: {{ index . 1 | quote }}
{{- end -}}

{{- /* appstack.db: the database's Secret, StatefulSet and Service name. */ -}}
{{- define "appstack.db" -}}
{{ .Name }}-db
{{- end -}}
