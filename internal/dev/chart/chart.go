// Package chart writes an operator's Helm chart (dist/chart) from the same
// kustomization that `make build-installer` and `make deploy` apply
// (config/default), so the two installs cannot drift apart:
//
//   - the CRDs go to crds/, which Helm installs before anything else (and,
//     as Helm does for every chart, never upgrades or deletes);
//   - the Namespace is left out: the release's namespace holds everything
//     (helm install --namespace … --create-namespace);
//   - every other object becomes a template in the release's namespace,
//     with cluster-scoped names prefixed by the release's name, so that two
//     releases never share a ClusterRole;
//   - the Deployment takes its image, replicas, resources, leader election
//     and metrics endpoint from values.yaml, whose defaults are what
//     config/manager sets; the metrics Service and RBAC exist only with
//     metrics enabled;
//   - values.yaml has an entry per shipped decorator, off as in
//     config/manager: decorators.<name>.enabled, with an optional
//     namespaceSelector and objectSelector (--decorators and its scope
//     flags), or disable (--disable-decorator).
//
// `stencil manifests` runs it (`make manifests`).
package chart

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The defaults of config/manager/manager.yaml that values.yaml replaces.
const (
	leaderElectArg   = "--leader-elect"
	metricsArgPrefix = "--metrics-bind-address="
	metricsSecureArg = "--metrics-secure"
	// The rollout flags, "=<value>".
	rolloutBatchArg    = "--rollout-batch"
	webhookServiceArg  = "--webhook-service"
	rolloutDeadlineArg = "--rollout-deadline"
	// decoratorsArg enables decorators; config/manager enables none.
	decoratorsArg = "--decorators"
)

// Write replaces the folder out with the chart of the operator named name
// (stencil, or a project's), made from the kustomization at config; the
// decorators each get their entry in values.yaml.
func Write(config, out, name string, decorators []string) error {
	files, err := chart(config, name, decorators)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	for name, data := range files {
		path := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// chart is the chart's files by path, from the kustomization at config.
func chart(config, name string, names []string) (map[string][]byte, error) {
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), config)
	if err != nil {
		return nil, fmt.Errorf("building %s: %w", config, err)
	}
	schema, err := valuesSchema(names)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"Chart.yaml": fmt.Appendf(nil, chartYAML, name, name), "values.schema.json": schema}
	clusterNames := map[string]bool{}
	var objects []*unstructured.Unstructured
	optIn, err := optInObjects(config)
	if err != nil {
		return nil, err
	}
	objects = append(objects, optIn...)
	for _, r := range res.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(data); err != nil {
			return nil, err
		}
		switch {
		case o.GetKind() == "CustomResourceDefinition":
			data, err := yaml.Marshal(o.Object)
			if err != nil {
				return nil, err
			}
			files["crds/"+o.GetName()+".yaml"] = data
		case o.GetKind() == "Namespace":
		default:
			if o.GetNamespace() == "" {
				clusterNames[o.GetName()] = true
			}
			objects = append(objects, o)
		}
	}
	for _, o := range objects {
		if o.GetKind() == "Deployment" {
			v, err := parameterize(o, name, names)
			if err != nil {
				return nil, fmt.Errorf("the Deployment %s: %w", o.GetName(), err)
			}
			if files["values.yaml"], err = v.yaml(); err != nil {
				return nil, err
			}
		}
		text, err := template(o, clusterNames, name)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		files["templates/"+strings.ToLower(o.GetKind())+"-"+o.GetName()+".yaml"] = []byte(text)
	}
	if files["values.yaml"] == nil {
		return nil, fmt.Errorf("%s has no Deployment", config)
	}
	return files, nil
}

// optInFiles are objects of config/ that the kustomization leaves out (an
// install opts in) and the chart holds, off until a value turns them on.
var optInFiles = []string{"manager/network_policy.yaml"}

// optInObjects reads optInFiles beside config (config/default), those that
// exist.
func optInObjects(config string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, name := range optInFiles {
		data, err := os.ReadFile(filepath.Join(filepath.Dir(config), name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &o.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, o)
	}
	return out, nil
}

// metricsObject: the object exists only for the metrics endpoint.
func metricsObject(o *unstructured.Unstructured, name string) bool {
	return strings.HasPrefix(o.GetName(), name+"-metrics")
}

// template is o as a Helm template (see the package comment); a Deployment
// has been parameterized.
func template(o *unstructured.Unstructured, clusterNames map[string]bool, operator string) (string, error) {
	data, err := yaml.Marshal(o.Object)
	if err != nil {
		return "", err
	}
	text := string(data)
	text = strings.ReplaceAll(text, "namespace: "+operator+"-system\n", "namespace: {{ .Release.Namespace }}\n")
	for name := range clusterNames {
		text = regexp.MustCompile(`(?m)^(\s*(?:name|policyName): )`+regexp.QuoteMeta(name)+`$`).ReplaceAllString(text, "${1}{{ .Release.Name }}-"+strings.TrimPrefix(name, operator+"-"))
	}
	text = strings.ReplaceAll(text, "image: __IMAGE__", `image: {{ required "image is required" .Values.image | quote }}`)
	text = strings.ReplaceAll(text, "replicas: __REPLICAS__", "replicas: {{ .Values.replicas }}")
	text = strings.ReplaceAll(text, "containerPort: __METRICS_PORT__", "containerPort: {{ .Values.metrics.port }}")
	text = regexp.MustCompile(`(?m)^(\s*)resources: __RESOURCES__$`).ReplaceAllStringFunc(text, func(line string) string {
		indent := len(line) - len(strings.TrimLeft(line, " "))
		return fmt.Sprintf("%sresources:\n%s{{- toYaml .Values.resources | nindent %d }}", strings.Repeat(" ", indent), strings.Repeat(" ", indent), indent+2)
	})
	text = regexp.MustCompile(`(?m)^(\s*)- __LEADER_ELECT__$`).ReplaceAllString(text, "${1}{{- if .Values.leaderElection }}\n${1}- "+leaderElectArg+"\n${1}{{- end }}")
	text = regexp.MustCompile(`(?m)^(\s*)- __DECORATORS__$`).ReplaceAllStringFunc(text, func(line string) string {
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		return indent + strings.ReplaceAll(strings.TrimSpace(decoratorArgs), "\n", "\n"+indent)
	})
	text = regexp.MustCompile(`(?m)^(\s*)- __METRICS__$`).ReplaceAllString(text,
		"${1}{{- if .Values.metrics.enabled }}\n${1}- "+metricsArgPrefix+":{{ .Values.metrics.port }}\n${1}- "+metricsSecureArg+"\n${1}{{- else }}\n${1}- "+metricsArgPrefix+"0\n${1}{{- end }}")
	text = "# Generated by stencil manifests from config/default; do not edit.\n" + text
	if o.GetKind() == "Deployment" {
		text = deploymentGuard + text
	}
	if metricsObject(o, operator) {
		text = "{{- if .Values.metrics.enabled }}\n" + text + "{{- end }}\n"
	}
	if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
		text = "{{- if .Values.admissionPolicy }}\n" + text + "{{- end }}\n"
	}
	if o.GetKind() == "NetworkPolicy" {
		from := regexp.MustCompile(`(?m)^(\s*)- ipBlock:\n\s*cidr: 0\.0\.0\.0/0\n\s*- ipBlock:\n\s*cidr: ::/0\n`)
		if !from.MatchString(text) {
			return "", fmt.Errorf("the NetworkPolicy admits the webhook from no ipBlocks 0.0.0.0/0 and ::/0 to parameterize:\n%s", text)
		}
		// Each except goes with the cidrs of its family (an IPv4 except in
		// ::/0 is invalid).
		indent := from.FindStringSubmatch(text)[1]
		lines := []string{
			"{{- range $cidr := .Values.webhookNetworkPolicy.cidrs }}",
			"- ipBlock:",
			"    cidr: {{ $cidr | quote }}",
			"    {{- $except := list }}",
			`    {{- range $.Values.webhookNetworkPolicy.except }}{{ if eq (contains ":" $cidr) (contains ":" .) }}{{ $except = append $except . }}{{ end }}{{ end }}`,
			"    {{- with $except }}",
			"    except: {{ toJson . }}",
			"    {{- end }}",
			"{{- end }}",
		}
		text = from.ReplaceAllLiteralString(text, indent+strings.Join(lines, "\n"+indent)+"\n")
		text = "{{- if .Values.webhookNetworkPolicy.enabled }}\n" + text + "{{- end }}\n"
	}
	if strings.Contains(text, "__") {
		return "", fmt.Errorf("a placeholder was left in the template:\n%s", text)
	}
	return text, nil
}

// values are the chart's defaults, as config/manager sets them.
type values struct {
	Image          string         `json:"image"`
	Replicas       int64          `json:"replicas"`
	LeaderElection bool           `json:"leaderElection"`
	Metrics        metricsValues  `json:"metrics"`
	Resources      map[string]any `json:"resources"`
	Rollout        rolloutValues  `json:"rollout"`
	// AdmissionPolicy installs config/policy, stencil's admission
	// policies (Kubernetes 1.30 or newer).
	AdmissionPolicy bool `json:"admissionPolicy"`
	// Decorators, by name.
	Decorators map[string]decoratorValues `json:"decorators"`
	// WebhookNetworkPolicy admits the conversion webhook from cidrs but
	// except (config/manager/network_policy.yaml).
	WebhookNetworkPolicy webhookNetworkPolicyValues `json:"webhookNetworkPolicy"`
}

type webhookNetworkPolicyValues struct {
	Enabled bool     `json:"enabled"`
	CIDRs   []string `json:"cidrs"`
	Except  []string `json:"except"`
}

type decoratorValues struct {
	Enabled           bool   `json:"enabled"`
	NamespaceSelector string `json:"namespaceSelector"`
	ObjectSelector    string `json:"objectSelector"`
	Disable           bool   `json:"disable"`
}

type rolloutValues struct {
	Batch    int64  `json:"batch"`
	Deadline string `json:"deadline"`
}

type metricsValues struct {
	Enabled bool  `json:"enabled"`
	Port    int64 `json:"port"`
}

func (v values) yaml() ([]byte, error) {
	data, err := yaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append([]byte(valuesHeader), data...), nil
}

// parameterize puts placeholders where the Deployment takes values, and
// returns what it found there: the chart's defaults.
func parameterize(d *unstructured.Unstructured, name string, decorators []string) (values, error) {
	v := values{AdmissionPolicy: true, Decorators: map[string]decoratorValues{},
		WebhookNetworkPolicy: webhookNetworkPolicyValues{CIDRs: []string{"0.0.0.0/0", "::/0"}, Except: []string{}}}
	for _, name := range decorators {
		v.Decorators[name] = decoratorValues{}
	}
	containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return v, fmt.Errorf("reading the containers: %w", err)
	}
	if len(containers) != 1 {
		return v, fmt.Errorf("%d containers, want one", len(containers))
	}
	c := containers[0].(map[string]any)
	v.Image, _ = c["image"].(string)
	v.Resources, _ = c["resources"].(map[string]any)
	c["image"], c["resources"] = "__IMAGE__", "__RESOURCES__"
	var args []any
	for _, a := range c["args"].([]any) {
		switch s := a.(string); {
		case s == leaderElectArg:
			v.LeaderElection = true
			args = append(args, "__LEADER_ELECT__")
		case strings.HasPrefix(s, metricsArgPrefix+":"):
			if v.Metrics.Port, err = strconv.ParseInt(strings.TrimPrefix(s, metricsArgPrefix+":"), 10, 32); err != nil {
				return v, fmt.Errorf("metrics address %q: %w", s, err)
			}
			v.Metrics.Enabled = true
			args = append(args, "__METRICS__")
		case s == metricsSecureArg:
		case strings.HasPrefix(s, rolloutBatchArg+"="):
			if v.Rollout.Batch, err = strconv.ParseInt(strings.TrimPrefix(s, rolloutBatchArg+"="), 10, 32); err != nil {
				return v, fmt.Errorf("rollout batch %q: %w", s, err)
			}
			args = append(args, rolloutBatchArg+"={{ .Values.rollout.batch }}")
		case strings.HasPrefix(s, rolloutDeadlineArg+"="):
			v.Rollout.Deadline = strings.TrimPrefix(s, rolloutDeadlineArg+"=")
			args = append(args, rolloutDeadlineArg+"={{ .Values.rollout.deadline }}")
		case strings.HasPrefix(s, "--decorator"), strings.HasPrefix(s, "--disable-decorator"):
			return v, fmt.Errorf("%s: config/manager runs no decorator (they are opt-in); the chart enables them from values", s)
		default:
			args = append(args, s)
		}
	}
	// The CRDs of kinds with several versions name the Service of
	// config/manager's namespace; the chart's is the release's.
	args = append(args, webhookServiceArg+"={{ .Release.Namespace }}/"+name+"-webhook", "__DECORATORS__")
	if !v.LeaderElection || !v.Metrics.Enabled || v.Rollout.Deadline == "" {
		return v, fmt.Errorf("want the args %s, %s:<port>, %s=<n> and %s=<duration>", leaderElectArg, metricsArgPrefix, rolloutBatchArg, rolloutDeadlineArg)
	}
	c["args"] = args
	for _, p := range c["ports"].([]any) {
		if port := p.(map[string]any); port["containerPort"] == v.Metrics.Port {
			port["containerPort"] = "__METRICS_PORT__"
		}
	}
	if err := unstructured.SetNestedSlice(d.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		return v, err
	}
	v.Replicas, _, _ = unstructured.NestedInt64(d.Object, "spec", "replicas")
	return v, unstructured.SetNestedField(d.Object, "__REPLICAS__", "spec", "replicas")
}

// deploymentGuard refuses values that would run two active operators.
const deploymentGuard = `{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection) }}
{{- fail "replicas > 1 needs leaderElection: true (else every replica reconciles)" }}
{{- end }}
`

// decoratorArgs are the Deployment's decorator flags, from
// values.decorators (a map: Helm ranges over it in the order of the names).
const decoratorArgs = `
{{- range $name, $d := .Values.decorators }}
{{- if and $d.enabled $d.disable }}
{{- fail (printf "decorators.%s: enabled and disable exclude each other" $name) }}
{{- end }}
{{- if $d.enabled }}
- ` + decoratorsArg + `={{ $name }}
{{- with $d.namespaceSelector }}
- {{ printf "--decorator-namespace-selector=%s=%s" $name . | quote }}
{{- end }}
{{- with $d.objectSelector }}
- {{ printf "--decorator-object-selector=%s=%s" $name . | quote }}
{{- end }}
{{- end }}
{{- if $d.disable }}
- --disable-decorator={{ $name }}
{{- end }}
{{- end }}
`

const chartYAML = `# Generated by stencil manifests from config/default; do not edit.
apiVersion: v2
name: %s
description: The %s operator, whose resource logic lives in templates (stencil).
type: application
version: 0.1.0
appVersion: "0.1.0"
`

const valuesHeader = `# Generated by stencil manifests from config/default; do not edit.
# image: the operator's image (required).
# replicas: one leads, the others stand by (needs leaderElection).
# leaderElection: through a Lease in the release's namespace.
# metrics: the HTTPS endpoint for scrapers the API server authorizes, and
#   its Service; enabled: false removes both.
# resources: of the operator's container.
# rollout: how a new stencil whose templates change converged resources
#   rolls the change out: batch resources per kind at a time (0: all at
#   once), halting when one is not Ready within deadline.
# admissionPolicy: the ValidatingAdmissionPolicies that keep stencil's
#   control keys to stencil (docs/tenancy.md) and refuse a foreground
#   deletion of a graph kind's resource, which would delete its objects all
#   at once (docs/add-graph.md); Kubernetes 1.30 or newer.
# decorators: each shipped decorator, off unless enabled (docs/add-decorator.md).
#   enabled: it runs, on the objects of its type that namespaceSelector
#   (labels of their namespace; a Namespace's own) and objectSelector
#   (their labels) select, both label selectors as kubectl -l takes them,
#   empty for all; e.g. replicaset-podcount: {enabled: true,
#   namespaceSelector: stencil.dev/podcount=on}.
#   disable: it removes what it set everywhere (after an older stencil ran
#   it); then set it back to false.
# webhookNetworkPolicy: a NetworkPolicy that admits the conversion webhook
#   (kinds with several versions) from the addresses of cidrs but except,
#   and the metrics and probes from anywhere. The API server calls the
#   webhook from the control plane's network: set except to the cluster's
#   pod CIDRs (e.g. [10.244.0.0/16]) and no pod reaches it. Off until
#   enabled: check first that the CNI matches the API server's traffic by
#   ipBlock (Cilium: policy-cidr-match-mode nodes), or every list of a kind
#   with several versions fails.
`

// valuesSchema is values.schema.json, with an entry per decorator.
func valuesSchema(decorators []string) ([]byte, error) {
	entry := map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"properties": map[string]any{
			"enabled":           map[string]string{"type": "boolean"},
			"namespaceSelector": map[string]string{"type": "string"},
			"objectSelector":    map[string]string{"type": "string"},
			"disable":           map[string]string{"type": "boolean"},
		},
	}
	props := map[string]any{}
	for _, name := range decorators {
		props[name] = entry
	}
	raw, err := json.MarshalIndent(map[string]any{"type": "object", "additionalProperties": false, "properties": props}, "    ", "  ")
	if err != nil {
		return nil, err
	}
	return []byte(strings.Replace(valuesSchemaTemplate, "__DECORATORS__", string(raw), 1)), nil
}

const valuesSchemaTemplate = `{
  "$schema": "https://json-schema.org/draft-07/schema#",
  "type": "object",
  "additionalProperties": false,
  "required": ["image", "replicas", "leaderElection", "metrics"],
  "properties": {
    "image": {"type": "string", "minLength": 1},
    "replicas": {"type": "integer", "minimum": 0},
    "leaderElection": {"type": "boolean"},
    "metrics": {
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "enabled": {"type": "boolean"},
        "port": {"type": "integer", "minimum": 1, "maximum": 65535}
      }
    },
    "resources": {"type": "object"},
    "rollout": {
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "batch": {"type": "integer", "minimum": 0},
        "deadline": {"type": "string", "pattern": "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"}
      }
    },
    "admissionPolicy": {"type": "boolean"},
    "webhookNetworkPolicy": {
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "enabled": {"type": "boolean"},
        "cidrs": {"type": "array", "items": {"type": "string"}},
        "except": {"type": "array", "items": {"type": "string"}}
      }
    },
    "decorators": __DECORATORS__
  }
}
`
