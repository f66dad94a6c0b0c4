{{/*
shop.name is the chart name, or nameOverride, cut to the 63 characters a label value allows.
*/}}
{{- define "shop.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
shop.fullname names every object. fullnameOverride wins; otherwise the release name alone when
it already contains the chart name, so "shop" does not become "shop-shop".
*/}}
{{- define "shop.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "shop.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
shop.chart is name-version for the helm.sh/chart label; "+" is not allowed in a label value.
*/}}
{{- define "shop.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
shop.selectorLabels must never change after install: a Deployment's selector is immutable.
*/}}
{{- define "shop.selectorLabels" -}}
app.kubernetes.io/name: {{ include "shop.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
shop.labels go on every object; they add the mutable labels to the selector labels.
*/}}
{{- define "shop.labels" -}}
{{ include "shop.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "shop.chart" . }}
{{- end -}}

{{/*
shop.serviceAccountName is the account the pods run as.
*/}}
{{- define "shop.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "shop.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/*
shop.image is repository:tag, the tag defaulting to the chart's appVersion.
*/}}
{{- define "shop.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/*
The database password: the values', else the one an earlier release's
Secret holds (lookup), else a generated one.
*/}}
{{- define "shop.password" -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (printf "%s-db" (include "shop.fullname" .)) -}}
{{- if .Values.database.password -}}
{{ .Values.database.password }}
{{- else if $existing -}}
{{ index $existing.data "password" | b64dec }}
{{- else -}}
{{ randAlphaNum 16 }}
{{- end -}}
{{- end }}
