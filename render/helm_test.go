package render_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/dev/chartimport"
	"github.com/stencil-operator/stencil/render"
)

var shopGVK = schema.GroupVersionKind{Group: "shops.example.com", Version: "v1alpha1", Kind: "Shop"}

// chartKind loads a chart kind from files, with a _kind.yaml that owns
// ConfigMaps.
func chartKind(t *testing.T, files map[string]string) *render.Kind {
	t.Helper()
	fsys := fstest.MapFS{"_kind.yaml": {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]")}}
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	k, err := render.Load(render.Definition{GroupVersionKind: shopGVK, Templates: fsys, New: func() v1alpha1.Object { return &chartimport.Resource{} }})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// data renders values with k and returns the ConfigMap name's data.
func data(t *testing.T, k *render.Kind, name string, values map[string]any) map[string]any {
	t.Helper()
	objs, err := k.Render(chartimport.NewResource(shopGVK, "rel", "ns1", values))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetName() == name {
			d, _, _ := unstructured.NestedMap(o.Object, "data")
			return d
		}
	}
	t.Fatalf("no ConfigMap %s in %d objects", name, len(objs))
	return nil
}

const dumpValues = `apiVersion: v1
kind: ConfigMap
metadata: {name: values}
data:
  values: {{ toJson .Values | quote }}
`

// TestChartValuesMergeAsHelms: a chart kind's .Values are the spec over
// the chart's values, merged as Helm v4.3.0 merges a release's values (as
// helm template prints them): a null of the chart's is no key, a null of
// the release's removes the chart's value, and is kept where the chart
// has none.
func TestChartValuesMergeAsHelms(t *testing.T) {
	k := chartKind(t, map[string]string{
		"_chart.yaml":  "name: shop\nversion: 1.0.0\n",
		"_values.yaml": "a: {b: 1, c: 2, unset: null}\nlist: [1, 2]\nmap: {x: 1}\nkept: k\nnone: null\n",
		"values.yaml":  dumpValues,
	})
	tests := []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"defaults", map[string]any{}, `{"a":{"b":1,"c":2},"kept":"k","list":[1,2],"map":{"x":1}}`},
		{"nested key over a nested default", map[string]any{"a": map[string]any{"c": 3}}, `{"a":{"b":1,"c":3},"kept":"k","list":[1,2],"map":{"x":1}}`},
		{"a list replaces the list", map[string]any{"list": []any{3}}, `{"a":{"b":1,"c":2},"kept":"k","list":[3],"map":{"x":1}}`},
		{"a null removes a default", map[string]any{"a": map[string]any{"b": nil}, "kept": nil}, `{"a":{"c":2},"list":[1,2],"map":{"x":1}}`},
		{"a null with no default is kept", map[string]any{"map": map[string]any{"y": nil}}, `{"a":{"b":1,"c":2},"kept":"k","list":[1,2],"map":{"x":1,"y":null}}`},
		{"a scalar replaces a map", map[string]any{"map": "flat"}, `{"a":{"b":1,"c":2},"kept":"k","list":[1,2],"map":"flat"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := data(t, k, "values", tt.values)["values"]; got != tt.want {
				t.Errorf("got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestChartSubcharts: a subchart's templates see its own values (the
// parent's under its name over its own) and the globals; its condition,
// comma-separated paths of which the first that holds a boolean decides,
// turns it off; and a named template the chart defines replaces the
// subchart's of the same name, as in Helm.
func TestChartSubcharts(t *testing.T) {
	k := chartKind(t, map[string]string{
		"_chart.yaml":                   "name: shop\nversion: 1.0.0\ndependencies:\n- {name: cache, condition: 'cache.enabled,global.cache.enabled'}\n",
		"_values.yaml":                  "global: {region: eu}\ncache: {size: 2}\n",
		"_helpers.tpl":                  `{{ define "who" }}parent{{ end }}`,
		"_charts/cache/_chart.yaml":     "name: cache\nversion: 0.1.0\n",
		"_charts/cache/_values.yaml":    "size: 1\nttl: 60\n",
		"charts--cache--_helpers.tpl":   `{{ define "who" }}cache{{ end }}`,
		"charts--cache--configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cache}\ndata:\n  size: {{ .Values.size | quote }}\n  ttl: {{ .Values.ttl | quote }}\n  region: {{ .Values.global.region }}\n  chart: {{ .Chart.Name }}\n  who: {{ include \"who\" . }}\n  base: {{ .Template.BasePath }}\n",
	})
	got := data(t, k, "cache", map[string]any{})
	want := map[string]any{"size": "2", "ttl": "60", "region": "eu", "chart": "cache", "who": "parent", "base": "shop/charts/cache/templates"}
	for key, v := range want {
		if got[key] != v {
			t.Errorf("%s: %v, want %v", key, got[key], v)
		}
	}
	for _, tt := range []struct {
		name   string
		values map[string]any
		on     bool
	}{
		{"first path false", map[string]any{"cache": map[string]any{"enabled": false}, "global": map[string]any{"cache": map[string]any{"enabled": true}}}, false},
		{"first path missing, second false", map[string]any{"global": map[string]any{"cache": map[string]any{"enabled": false}}}, false},
		{"first path true", map[string]any{"cache": map[string]any{"enabled": true}, "global": map[string]any{"cache": map[string]any{"enabled": false}}}, true},
		{"neither", map[string]any{}, true},
	} {
		objs, err := k.Render(chartimport.NewResource(shopGVK, "rel", "ns1", tt.values))
		if err != nil {
			t.Fatal(err)
		}
		if on := len(objs) == 1; on != tt.on {
			t.Errorf("%s: the subchart renders %v, want %v", tt.name, on, tt.on)
		}
	}
}

// TestChartKindHelmObjects: what a chart kind's templates read besides
// .Values, and what Helm does that they may count on.
func TestChartKindHelmObjects(t *testing.T) {
	k := chartKind(t, map[string]string{
		"_chart.yaml":   "name: shop\nversion: 1.2.3\nappVersion: \"4.5\"\n",
		"_values.yaml":  "greeting: 'hi {{ .Release.Name }}'\ndefined: '{{ define \"greet\" }}hello {{ .Release.Name }}{{ end }}{{ include \"greet\" . }}'\n",
		"_files/a.conf": "x=1\n",
		"_helpers.tpl":  `{{ define "secret" }}{{ randAlphaNum 8 }}{{ end }}`, // named, never called: loads
		"configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}}
data:
  chart: "{{ .Chart.Name }}-{{ .Chart.Version }}-{{ .Chart.AppVersion }}"
  release: "{{ .Release.Namespace }}/{{ .Release.Service }}/{{ .Release.IsInstall }}"
  missing: "{{ .Values.nothing }}"
  tpl: {{ tpl .Values.greeting . | quote }}
  defined: {{ tpl .Values.defined . | quote }}
  lookup: "{{ len (lookup "v1" "Secret" "ns1" "s") }}"
  file: {{ .Files.Get "a.conf" | quote }}
  has: "{{ .Capabilities.APIVersions.Has "apps/v1/Deployment" }}-{{ .Capabilities.APIVersions.Has "example.com/v1" }}"
  kube: "{{ .Capabilities.KubeVersion.Major }}.{{ .Capabilities.KubeVersion.Minor }}"
  helm: "{{ .Capabilities.HelmVersion.Version }}"
  sum: {{ include (print $.Template.BasePath "/other.yaml") . | sha256sum | trunc 8 | quote }}
  mutated: {{ $_ := set .Chart "Name" "changed" }}"{{ .Chart.Name }}"
`,
		"other.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n  annotations: {helm.sh/hook: test}\n",
	})
	want := map[string]any{
		"chart": "shop-1.2.3-4.5", "release": "ns1/stencil/true", "missing": "", "tpl": "hi rel", "defined": "hello rel", "lookup": "0",
		"file": "x=1\n", "has": "true-false", "kube": "1.37", "helm": "v4.3.0", "mutated": "changed",
	}
	for range 2 { // the second render sees the chart as it was
		objs, err := k.Render(chartimport.NewResource(shopGVK, "rel", "ns1", map[string]any{}))
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) != 1 {
			t.Fatalf("%d objects, want 1: the helm test hook's is dropped", len(objs))
		}
		got, _, _ := unstructured.NestedStringMap(objs[0].Object, "data")
		for key, v := range want {
			if got[key] != v {
				t.Errorf("%s: %q, want %q", key, got[key], v)
			}
		}
		if len(got["sum"]) != 8 {
			t.Errorf("sum: %q: no checksum of the template Helm names by .Template.BasePath", got["sum"])
		}
	}
	k = chartKind(t, map[string]string{
		"_chart.yaml": "name: shop\n",
		"c.yaml":      "{{ include \"secret\" . }}\n",
		"_h.tpl":      `{{ define "secret" }}{{ env "HOME" }}{{ end }}`,
	})
	_, err := k.Render(chartimport.NewResource(shopGVK, "rel", "ns1", nil))
	if err == nil || !strings.Contains(err.Error(), "env: a render is a pure function") {
		t.Errorf("a render that calls env: %v, want it refused", err)
	}
}

// TestGraphWithoutReadsMayIncludeAComputedName: a graph kind whose
// templates call no graph function (a chart kind whose hooks make it a
// graph) may include a name it computes, as Helm's checksum idiom does.
func TestGraphWithoutReadsMayIncludeAComputedName(t *testing.T) {
	fsys := fstest.MapFS{
		"_kind.yaml": {Data: []byte("owns: [{apiVersion: v1, kind: ConfigMap}]\ngraph:\n  b: {after: [a]}\n")},
		"a.yaml":     {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")},
		"b.yaml":     {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  annotations: {sum: {{ include (print \"a\" \".yaml\") . | sha256sum | quote }}}\n")},
	}
	if _, err := render.Load(render.Definition{GroupVersionKind: shopGVK, Templates: fsys, New: func() v1alpha1.Object { return &chartimport.Resource{} }}); err != nil {
		t.Fatal(err)
	}
}
