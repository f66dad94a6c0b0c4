{{- define "guestbook.selector" -}}
app.kubernetes.io/name: guestbook
app.kubernetes.io/instance: {{ .Name | trunc 63 | trimAll "-." | quote }}
{{- end -}}
