package chartimport

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestConvertSubchartsAndHooks: an aliased subchart goes by its alias (its
// values, its condition, its files), a subchart's hook is ordered under its
// own name, and a custom resource's type (a ServiceMonitor) is declared
// optional: the kind runs where its CRD is not installed.
func TestConvertSubchartsAndHooks(t *testing.T) {
	c, err := newChart(map[string][]byte{
		"Chart.yaml":                  []byte("name: app\nversion: 1.0.0\ndependencies:\n- {name: db, alias: primary, condition: primary.enabled}\n"),
		"values.yaml":                 []byte("primary: {enabled: true, size: 2}\nmonitor: false\n"),
		"templates/monitor.yaml":      []byte("{{ if .Values.monitor }}\napiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: m}\n{{ end }}\n"),
		"templates/cm.yaml":           []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n"),
		"charts/db/Chart.yaml":        []byte("name: db\nversion: 0.1.0\n"),
		"charts/db/values.yaml":       []byte("size: 1\n"),
		"charts/db/templates/cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '{{ .Chart.Name }}-{{ .Values.size }}'}\n"),
		"charts/db/templates/job.yaml": []byte("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: db-init\n  annotations: {\"helm.sh/hook\": post-install}\n" +
			"spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Convert(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"_charts/primary/_chart.yaml", "charts--primary--cm.yaml", "charts--primary--job.yaml"} {
		if f.Files[name] == nil {
			t.Errorf("no %s in the kind's folder", name)
		}
	}
	if f.Hooks["charts--primary--job.yaml"] != hookAfter {
		t.Errorf("hooks %v: the subchart's post-install Job is not ordered after the rest", f.Hooks)
	}
	gvk := schema.GroupVersionKind{Group: "apps.example.com", Version: "v1alpha1", Kind: "App"}
	decl, err := Declare(gvk, f, []ValuesFile{{"values.yaml", map[string]any{}}, {"monitor", map[string]any{"monitor": true}}, {"no primary", map[string]any{"primary": map[string]any{"enabled": false}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(decl), "kind: ServiceMonitor\n  optional: true") {
		t.Errorf("_kind.yaml does not declare the ServiceMonitor optional:\n%s", decl)
	}
	k, err := Kind(gvk, f, decl)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Render(k, "rel", "ns", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.GetName())
	}
	slices.Sort(names)
	if got := strings.Join(names, ","); got != "app,db-init,primary-2" {
		t.Errorf("objects %s, want app, db-init and primary-2 (the aliased subchart's name and its values under the alias)", got)
	}
	if objs, err = Render(k, "rel", "ns", map[string]any{"primary": map[string]any{"enabled": false}}); err != nil || len(objs) != 1 {
		t.Errorf("the alias's condition false: %d objects (%v), want the chart's one", len(objs), err)
	}
}

// TestHooksWaitForEveryBuiltinType: a chart whose post-install hook comes
// after a LoadBalancer Service, a DaemonSet, a ReplicaSet and a CRD
// imports: the offline run holds each ready (the import aborted on the
// first two before); the values file that fails is named by its path.
func TestHooksWaitForEveryBuiltinType(t *testing.T) {
	c, err := newChart(map[string][]byte{
		"Chart.yaml":            []byte("name: edge\nversion: 1.0.0\n"),
		"values.yaml":           []byte("broken: false\n"),
		"ci/broken-values.yaml": []byte("broken: true\n"),
		"templates/svc.yaml":    []byte("apiVersion: v1\nkind: Service\nmetadata: {name: edge}\nspec: {type: LoadBalancer, ports: [{port: 80}]}\n"),
		"templates/ds.yaml": []byte("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\n" +
			"spec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: busybox}]}}}\n"),
		"templates/rs.yaml": []byte("apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: rs}\n" +
			"spec: {replicas: 2, selector: {matchLabels: {a: c}}, template: {metadata: {labels: {a: c}}, spec: {containers: [{name: c, image: busybox}]}}}\n"),
		"templates/fail.yaml": []byte("{{ if .Values.broken }}{{ fail \"broken on purpose\" }}{{ end }}\n"),
		"templates/crd.yaml": []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gadgets.edge.example.com}\n" +
			"spec: {group: edge.example.com, scope: Namespaced, names: {kind: Gadget, plural: gadgets}, versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]}\n"),
		"templates/job.yaml": []byte("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: smoke\n  annotations: {\"helm.sh/hook\": post-install}\n" +
			"spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Convert(c)
	if err != nil {
		t.Fatal(err)
	}
	cases, err := c.cases()
	if err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: "edge.example.com", Version: "v1alpha1", Kind: "Edge"}
	if _, err := Declare(gvk, f, cases.values()[:1]); err != nil {
		t.Fatalf("the default values: %v", err)
	}
	_, err = Declare(gvk, f, cases.values())
	if want := "rendering with ci/broken-values.yaml: "; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "broken on purpose") {
		t.Errorf("the broken values file: %v, want an error with %q and the chart's message", err, want)
	}
}

// TestTemplatedAPIVersionsAreDeclared: a type whose apiVersion is
// templated on the capabilities, in the line (ternary) or in a helper
// (bitnami's common.capabilities.*.apiVersion, with ifs of its own), is
// declared at import even when no values file renders it, so that a value
// that turns it on later renders (it was an undeclared type,
// RenderFailed): at the newest version quoted for its kind (apps/v1, not
// extensions/v1beta1), owned when GA, optional when beta.
func TestTemplatedAPIVersionsAreDeclared(t *testing.T) {
	c, err := newChart(map[string][]byte{
		"Chart.yaml":  []byte("name: app\nversion: 1.0.0\n"),
		"values.yaml": []byte("pdb: false\nhpa: false\n"),
		"templates/_helpers.tpl": []byte(`{{- define "app.ingress.apiVersion" -}}
{{- if .Values.legacy -}}{{- end -}}
{{- if .Capabilities.APIVersions.Has "networking.k8s.io/v1" -}}
{{- print "networking.k8s.io/v1" -}}
{{- else -}}
{{- print "networking.k8s.io/v1beta1" -}}
{{- end -}}
{{- end -}}
{{- define "app.deployment.apiVersion" -}}
{{- ternary "apps/v1" "extensions/v1beta1" true -}}
{{- end -}}
{{- define "app.hpa.apiVersion" -}}
{{- if .Capabilities.APIVersions.Has "autoscaling/v2" -}}
{{- print "autoscaling/v2" -}}
{{- else -}}
{{- print "autoscaling/v2beta2" -}}
{{- end -}}
{{- end -}}
`),
		"templates/cm.yaml":      []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n"),
		"templates/ingress.yaml": []byte("{{- if .Values.ingress }}\napiVersion: {{ include \"app.ingress.apiVersion\" . }}\nkind: Ingress\nmetadata: {name: app}\n{{- end }}\n"),
		"templates/deploy.yaml":  []byte("{{- if .Values.deploy }}\napiVersion: {{ include \"app.deployment.apiVersion\" . }}\nkind: Deployment\nmetadata: {name: app}\n{{- end }}\n"),
		"templates/slice.yaml":   []byte("{{- if .Values.slice }}\napiVersion: {{ ternary \"resource.k8s.io/v1beta2\" \"resource.k8s.io/v1beta1\" true }}\nkind: ResourceSlice\nmetadata: {name: app}\n{{- end }}\n"),
		"templates/pdb.yaml": []byte(`{{- if .Values.pdb }}
apiVersion: {{ ternary "policy/v1" "policy/v1beta1" (.Capabilities.APIVersions.Has "policy/v1") }}
kind: PodDisruptionBudget
metadata: {name: app}
spec: {minAvailable: 1, selector: {matchLabels: {app: app}}}
{{- end }}
`),
		"templates/hpa.yaml": []byte(`{{- if .Values.hpa }}
apiVersion: {{ include "app.hpa.apiVersion" . }}
kind: HorizontalPodAutoscaler
metadata: {name: app}
spec: {maxReplicas: 3, scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: app}}
{{- end }}
`),
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Convert(c)
	if err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: "apps.example.com", Version: "v1alpha1", Kind: "App"}
	decl, err := Declare(gvk, f, []ValuesFile{{"values.yaml", map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"- apiVersion: policy/v1\n  kind: PodDisruptionBudget\n",
		"- apiVersion: autoscaling/v2\n  kind: HorizontalPodAutoscaler\n",
		"- apiVersion: networking.k8s.io/v1\n  kind: Ingress\n",
		"- apiVersion: apps/v1\n  kind: Deployment\n",
		"- apiVersion: resource.k8s.io/v1beta2\n  kind: ResourceSlice\n  optional: true\n",
	} {
		if !strings.Contains(string(decl), want) {
			t.Errorf("_kind.yaml has no\n%s\n%s", want, decl)
		}
	}
	for _, unwanted := range []string{"v1beta1", "extensions", "PodDisruptionBudget\n  optional", "Deployment\n  optional"} {
		if strings.Contains(string(decl), unwanted) {
			t.Errorf("_kind.yaml has %q:\n%s", unwanted, decl)
		}
	}
	k, err := Kind(gvk, f, decl)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Render(k.WithAPIVersions(OptionalServed(k)), "release", "default", map[string]any{"pdb": true, "hpa": true})
	if err != nil {
		t.Fatalf("rendering with the PDB and HPA turned on: %v", err)
	}
	if len(objs) != 3 {
		t.Errorf("rendered %d objects, want the ConfigMap, the PDB and the HPA", len(objs))
	}
}

// TestNotesAreAboutActions: the notes on functions a template calls read
// its actions only, not its text: a CRD's `format: date-time` and a
// comment naming now are no generated value; a call of now is.
func TestNotesAreAboutActions(t *testing.T) {
	c, err := newChart(map[string][]byte{
		"Chart.yaml":  []byte("name: app\nversion: 1.0.0\n"),
		"values.yaml": []byte("{}\n"),
		"templates/crd.yaml": []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: a}\n" +
			"# stamped with the date of the lookup\nspec:\n  x:\n    format: date-time\n"),
		"templates/cm.yaml": []byte("{{/* not now */}}\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata:\n  at: {{ now | quote }}\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Convert(c)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range f.Notes {
		got = append(got, n.String())
	}
	clock := slices.DeleteFunc(slices.Clone(got), func(n string) bool { return !strings.Contains(n, "generated value") && !strings.Contains(n, "lookup") })
	if len(clock) != 1 || !strings.Contains(clock[0], "cm.yaml:6") {
		t.Errorf("notes on functions %q, want one, on cm.yaml:6 (all: %q)", clock, got)
	}
}

// TestAMissingDependencyIsNamed: a chart that includes the helpers of a
// dependency it does not vendor fails to import with an error that names
// the dependency and how to vendor it, not only Go's "no template".
func TestAMissingDependencyIsNamed(t *testing.T) {
	c, err := newChart(map[string][]byte{
		"Chart.yaml":        []byte("name: app\nversion: 1.0.0\ndependencies:\n- {name: common, version: 2.x.x, repository: oci://registry-1.docker.io/bitnamicharts}\n"),
		"values.yaml":       []byte("{}\n"),
		"templates/cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ include \"common.names.fullname\" . }}}\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Convert(c)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Declare(schema.GroupVersionKind{Group: "apps.example.com", Version: "v1alpha1", Kind: "App"}, f, []ValuesFile{{"values.yaml", map[string]any{}}})
	if err == nil || !strings.Contains(err.Error(), `no template "common.names.fullname"`) || !strings.Contains(err.Error(), "not under charts/: common; vendor them with helm dependency build") {
		t.Errorf("importing without the dependency: %v", err)
	}
}

// TestHookWeightsAndOnce: the hooks of a phase run lightest first
// (helm.sh/hook-weight), every hook is declared once, and the rest waits
// for the pre-install hooks.
func TestHookWeightsAndOnce(t *testing.T) {
	job := func(name, hook, weight string) []byte {
		return []byte("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: " + name + "\n  annotations: {\"helm.sh/hook\": " + hook + ", \"helm.sh/hook-weight\": \"" + weight + "\"}\n" +
			"spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}\n")
	}
	c, err := newChart(map[string][]byte{
		"Chart.yaml":           []byte("name: app\nversion: 1.0.0\n"),
		"values.yaml":          []byte("{}\n"),
		"templates/cm.yaml":    []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n"),
		"templates/heavy.yaml": job("heavy", "pre-install", "5"),
		"templates/light.yaml": job("light", "pre-install", "-5"),
		"templates/after.yaml": job("after", "post-install", "0"),
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Convert(c)
	if err != nil {
		t.Fatal(err)
	}
	g := f.graph()
	for node, want := range map[string][]string{
		"light": nil,
		"heavy": {"light"},
		"cm":    {"heavy", "light"},
		"after": {"heavy", "light", "cm"},
	} {
		n := g[node]
		got := slices.Clone(n.After)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s after %v, want %v", node, n.After, want)
		}
		if hook := node != "cm"; n.Once != hook {
			t.Errorf("%s once %v, want %v", node, n.Once, hook)
		}
	}
}

// TestHooksWrittenAsADict: a hook whose annotations a template builds as a
// dict (prometheus-operator-admission-webhook's Jobs) is a hook too, with
// its weight, and a test hook written so is skipped.
func TestHooksWrittenAsADict(t *testing.T) {
	job := func(annotations string) []byte {
		return []byte("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  annotations:\n    {{- $a := dict " + annotations + " }}\n    {{- toYaml $a | nindent 4 }}\n" +
			"spec: {ttlSecondsAfterFinished: 0, template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}\n")
	}
	c, err := newChart(map[string][]byte{
		"Chart.yaml":           []byte("name: app\nversion: 1.0.0\n"),
		"values.yaml":          []byte("{}\n"),
		"templates/patch.yaml": job(`"helm.sh/hook" "post-install,post-upgrade" "helm.sh/hook-weight" "3"`),
		"templates/check.yaml": job(`"helm.sh/hook" "test"`),
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Convert(c)
	if err != nil {
		t.Fatal(err)
	}
	if f.Hooks["patch.yaml"] != hookAfter || f.HookWeights["patch.yaml"] != 3 {
		t.Errorf("hooks %v, weights %v: the dict-built post-install hook of weight 3 is not one", f.Hooks, f.HookWeights)
	}
	if f.Files["check.yaml"] != nil {
		t.Error("the dict-built test hook is kept")
	}
}

// TestAHookNamedInACommentIsNoHook: a manifest whose comment names the
// hook annotation followed by a word is a manifest, and kept.
func TestAHookNamedInACommentIsNoHook(t *testing.T) {
	c, err := newChart(map[string][]byte{
		"Chart.yaml":        []byte("name: app\nversion: 1.0.0\n"),
		"values.yaml":       []byte("{}\n"),
		"templates/cm.yaml": []byte("# the helm.sh/hook annotation is not used here\n{{/* helm.sh/hook tests are elsewhere */}}\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Convert(c)
	if err != nil {
		t.Fatal(err)
	}
	if f.Files["cm.yaml"] == nil || len(f.Hooks) != 0 {
		t.Errorf("the manifest was taken for a hook: hooks %v, kept %v", f.Hooks, f.Files["cm.yaml"] != nil)
	}
}
