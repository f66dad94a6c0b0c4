{{- define "widget.labels" -}}
app.kubernetes.io/name: widget
app.kubernetes.io/instance: {{ .Name | quote }}
{{- end -}}
