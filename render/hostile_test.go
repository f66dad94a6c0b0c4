package render_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/dev/chartimport"
	"github.com/stencil-operator/stencil/render"
)

// hostileRenderBudget is how far one render of a hostile spec may grow the
// heap (its objects, collected or not, sampled through the render), with
// the default limits (4 MiB of output). The largest hostile value here (a
// map as wide as etcd stores an object) is copied a few times on its way
// to .Values, and YAML's encoder and parser allocate tens of bytes for
// each byte they write or read.
const hostileRenderBudget = 128 << 20

// hostileValues are values a tenant can write into any value of a chart
// kind's spec. Each, put in place of any value, must fail the render or
// render what the chart renders with a plain value there, within the render
// budget and time. Each was a crash, an allocation of hundreds of MiB or
// more, or an object the chart does not render, before the render's guards.
func hostileValues() map[string]any {
	deepMap, deepList := any("x"), any("x")
	for range 9990 { // the API server reads JSON 10,000 deep at most
		deepMap, deepList = map[string]any{"a": deepMap}, []any{deepList}
	}
	wide := map[string]any{} // 1.4 MiB: etcd keeps objects up to 1.5
	for i := range 40000 {
		wide[fmt.Sprintf("key-%07d", i)] = "value-0123456789abcdef"
	}
	values := map[string]any{
		"a dict that holds itself":         `{{ $m := dict }}{{ $_ := set $m "a" $m }}{{ $m }}`,
		"a dict that holds itself, deeper": `{{ $m := dict }}{{ $l := list $m }}{{ $_ := set $m "a" $l }}{{ toYaml $m }}`,
		"a merge that holds itself":        `{{ $m := dict "x" 1 }}{{ $_ := merge $m (dict "y" (list $m)) }}{{ toJson $m }}`,
		"a literal printf width":           `{{ printf "%999999999d" 1 }}`,
		"a literal printf precision":       `{{ printf "%.999999999f" 1.0 }}`,
		"a printf width argument":          `{{ printf "%*d" 999999999 1 }}`,
		"a list doubled 22 times":          `{{ $l := list 1 }}{{ range until 22 }}{{ $l = list $l $l }}{{ end }}{{ $l }}`,
		"a list doubled, to JSON":          `{{ $l := list 1 }}{{ range until 22 }}{{ $l = list $l $l }}{{ end }}{{ toJson $l }}`,
		"a list doubled, to YAML":          `{{ $l := list 1 }}{{ range until 22 }}{{ $l = list $l $l }}{{ end }}{{ toYaml $l }}`,
		"a list doubled, quoted":           `{{ $l := list 1 }}{{ range until 22 }}{{ $l = list $l $l }}{{ end }}{{ quote $l }}`,
		"a list doubled, html":             `{{ $l := list 1 }}{{ range until 22 }}{{ $l = list $l $l }}{{ end }}{{ html $l }}`,
		"uniq of a long list":              `{{ $l := until 200000 }}{{ $u := uniq $l }}`,
		"nesting 9,990 deep, a map":        deepMap,
		"nesting 9,990 deep, a list":       deepList,
		"a map 1.4 MiB wide":               wide,
		"a YAML document in a string":      "x\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: evil\nrules: [{apiGroups: ['*'], resources: ['*'], verbs: ['*']}]",
		"a document after a comment":       "x\n--- # more\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: evil}",
		"a separator split over values":    "x\n-",
		"stencil's behaviour annotations": map[string]any{
			v1alpha1.AnnotationPrune: v1alpha1.PruneDisabled, v1alpha1.AnnotationForce: "true",
			v1alpha1.AnnotationSSA: v1alpha1.SSAIfNotPresent, v1alpha1.AnnotationHandOver: "spec.replicas",
		},
		"a behaviour annotation in a string": "x\n  annotations:\n    stencil.dev/prune: disabled",
		"a kind in a string":                 "x\nkind: ClusterRole\nrules:\n- apiGroups: ['*']\n  resources: ['*']\n  verbs: ['*']",
	}
	for indent := 0; indent <= 10; indent += 2 { // a key beside the value's own, at every depth
		values[fmt.Sprintf("a key in a string, indented %d", indent)] = "x\n" + strings.Repeat(" ", indent) + "injected: true"
	}
	for _, br := range []string{"\r", "\u0085", "\u2028", "\u2029"} { // breaks that indent does not see
		values[fmt.Sprintf("a key after %q", br)] = "x" + br + "injected: true"
		values[fmt.Sprintf("a map with a key after %q", br)] = map[string]any{"k": "x" + br + "injected: true"}
	}
	return values
}

// benign is a plain value of hostile's shape, and as true (not empty):
// what the chart renders with it is what a hostile render may render at
// most.
func benign(hostile any) any {
	switch hostile.(type) {
	case map[string]any:
		return map[string]any{"x": "x"}
	case []any:
		return []any{"x"}
	}
	return "x"
}

// probeChart uses its values as charts do: through tpl, toYaml, toJson,
// printf, quote, join, include, and printed as they are, unquoted.
var probeChart = fstest.MapFS{
	"_kind.yaml":  {Data: []byte("owns:\n- {apiVersion: v1, kind: ConfigMap}\n- {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, clusterScoped: true}\n")},
	"_chart.yaml": {Data: []byte("name: probe\nversion: 0.1.0\n")},
	"_values.yaml": {Data: []byte(`name: web
greeting: "hello {{ .Release.Name }}"
image: {repository: nginx, tag: "1.25"}
labels: {team: a}
annotations: {}
config: {a: 1}
items: [a, b]
rules: []
`)},
	"_helpers.tpl": {Data: []byte(`{{- define "probe.name" -}}{{ .Release.Name }}-{{ .Values.name }}{{- end }}`)},
	"configmap.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "probe.name" . }}
  labels:
    {{- toYaml .Values.labels | nindent 4 }}
  annotations:
    {{- toYaml .Values.annotations | nindent 4 }}
data:
  greeting: {{ tpl .Values.greeting . | quote }}
  image: {{ .Values.image.repository }}:{{ .Values.image.tag }}
  name: {{ .Values.name }}
  config: {{ toJson .Values.config | quote }}
  printed: {{ printf "%v" .Values.config | quote }}
  items: {{ join "," .Values.items | quote }}
  yaml: |
    {{- toYaml .Values.config | nindent 4 }}
`)},
	"clusterrole.yaml": {Data: []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .Release.Namespace }}-{{ .Values.name }}
rules:
  {{- toYaml .Values.rules | nindent 2 }}
`)},
}

// TestHostileValues puts each hostile value in place of every value of
// every chart kind of the tests (the probe chart above, under tpl: own and
// under tpl: any, and the test chart of stencil import chart): no render
// crashes the process, grows the heap past hostileRenderBudget or runs
// past its time limit, and a render that succeeds renders no object, no
// type and no stencil behaviour annotation that the chart does not render
// with a plain value in that place.
func TestHostileValues(t *testing.T) {
	kinds := map[string]*render.Kind{}
	probe, err := render.Load(render.Definition{GroupVersionKind: shopGVK, Templates: probeChart, New: func() v1alpha1.Object { return &chartimport.Resource{} }})
	if err != nil {
		t.Fatal(err)
	}
	kinds["probe"] = probe
	// The same chart under tpl: any, the most a kind may let its
	// resources do: their template text runs, within the guards.
	anyTpl := maps.Clone(probeChart)
	anyTpl["_kind.yaml"] = &fstest.MapFile{Data: append(slices.Clone(probeChart["_kind.yaml"].Data), "tpl: any\n"...)}
	if kinds["probe (tpl: any)"], err = render.Load(render.Definition{GroupVersionKind: shopGVK, Templates: anyTpl, New: func() v1alpha1.Object { return &chartimport.Resource{} }}); err != nil {
		t.Fatal(err)
	}
	shopDef, err := chartimport.Definition("../internal/dev/chartimport/testdata/charts/shop", shopGVK)
	if err != nil {
		t.Fatal(err)
	}
	if kinds["shop"], err = render.Load(shopDef); err != nil {
		t.Fatal(err)
	}
	addRealCharts(t, kinds)
	hostile := hostileValues()
	var worst struct {
		bytes uint64
		what  string
	}
	for _, name := range slices.Sorted(maps.Keys(kinds)) {
		k := kinds[name]
		for _, path := range samplePaths(valuePaths(k.Chart().Values(), nil), maxPaths(name)) {
			for _, hv := range slices.Sorted(maps.Keys(hostile)) {
				what := fmt.Sprintf("%s: %s at .Values.%s", name, hv, strings.Join(path, "."))
				grown := checkHostile(t, k, what, path, hostile[hv])
				if grown > worst.bytes {
					worst.bytes, worst.what = grown, what
				}
			}
		}
	}
	t.Logf("the most a hostile render grew the heap: %.1f MiB (%s)", float64(worst.bytes)/(1<<20), worst.what)
}

// realChartsEnv names a folder of real charts (hack/realcharts/charts.sh
// fetches those of docs/from-helm.md): TestHostileValues then runs them
// too, as chart kinds imported as stencil import chart imports them, at
// realChartPaths of their values each. make test does not set it: the
// charts come from GitHub.
const (
	realChartsEnv  = "STENCIL_REALCHARTS"
	realChartPaths = 40
)

// addRealCharts adds the charts of the folder realChartsEnv names, if any,
// to kinds, as "real/<name>".
func addRealCharts(t *testing.T, kinds map[string]*render.Kind) {
	t.Helper()
	dir := os.Getenv(realChartsEnv)
	if dir == "" {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		def, err := chartimport.Definition(filepath.Join(dir, e.Name()), shopGVK)
		if err != nil {
			// By design (docs/from-helm.md): a password generated on
			// install, an object in another namespace.
			t.Logf("not run: %s does not import with its default values: %v", e.Name(), err)
			continue
		}
		if kinds["real/"+e.Name()], err = render.Load(def); err != nil {
			t.Errorf("loading %s: %v", e.Name(), err)
		}
	}
}

// maxPaths is how many value positions of the kind name are tried: all of
// the test charts', realChartPaths of a real chart's.
func maxPaths(name string) int {
	if strings.HasPrefix(name, "real/") {
		return realChartPaths
	}
	return 0
}

// samplePaths is n of paths, evenly spaced (all when n is 0 or more than
// there are).
func samplePaths(paths [][]string, n int) [][]string {
	if n == 0 || len(paths) <= n {
		return paths
	}
	out := make([][]string, 0, n)
	for i := range n {
		out = append(out, paths[i*len(paths)/n])
	}
	return out
}

// checkHostile renders k with v at path, and with the benign value there,
// and checks the hostile render; it returns what the render allocated.
func checkHostile(t *testing.T, k *render.Kind, what string, path []string, v any) uint64 {
	t.Helper()
	plain, err := k.Render(chartimport.NewResource(shopGVK, "rel", "ns1", withValue(path, benign(v))))
	if err != nil {
		// The chart refuses a plain value of this shape here (it expects
		// another): there is nothing to count against, only the behaviour
		// annotations to look for.
		plain = nil
	}
	compare := err == nil
	cr := chartimport.NewResource(shopGVK, "rel", "ns1", withValue(path, v))
	var objs []*unstructured.Unstructured
	start := time.Now()
	grown := heapGrowth(func() { objs, err = k.Render(cr) })
	took := time.Since(start)
	if grown > hostileRenderBudget {
		t.Errorf("%s: the render grew the heap by %d MiB, more than the budget of %d MiB (err %v)", what, grown>>20, hostileRenderBudget>>20, err)
	}
	if took > render.DefaultLimits.Time+5*time.Second {
		t.Errorf("%s: the render took %s, past its limit of %s", what, took, render.DefaultLimits.Time)
	}
	if err != nil {
		if _, ok := errors.AsType[*render.Error](err); !ok {
			t.Errorf("%s: the render failed with %T %v, not a *render.Error naming the template", what, err, err)
		}
		return grown
	}
	if _, ok := v.(string); ok && compare && shape(objs) > shape(plain) {
		t.Errorf("%s: the render's objects hold %d keys and items, %d with a plain value there: the value added some", what, shape(objs), shape(plain))
	}
	if extra := beyond(objs, plain, compare); extra != "" {
		t.Errorf("%s: the render holds %s, which the chart does not render with a plain value there", what, extra)
	}
	return grown
}

// heapGrowth runs f and returns how far the heap's objects grew past what
// they were before it, at the most: sampled every 100 µs while f runs.
func heapGrowth(f func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base, peak := read(), uint64(0)
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	tick := time.NewTicker(100 * time.Microsecond)
	defer tick.Stop()
	for {
		if now := read(); now > peak {
			peak = now
		}
		select {
		case <-done:
			return max(peak, read()) - min(base, peak)
		case <-tick.C:
		}
	}
}

// beyond names what objs holds and plain does not (when compare: plain
// rendered): more objects of a type; or a stencil behaviour annotation;
// "" when nothing.
func beyond(objs, plain []*unstructured.Unstructured, compare bool) string {
	count := func(list []*unstructured.Unstructured) map[schema.GroupVersionKind]int {
		n := map[schema.GroupVersionKind]int{}
		for _, o := range list {
			n[o.GroupVersionKind()]++
		}
		return n
	}
	want := count(plain)
	for gvk, n := range count(objs) {
		if compare && n > want[gvk] {
			return fmt.Sprintf("%d objects of %s (%d with a plain value)", n, gvk, want[gvk])
		}
	}
	behaviour := []string{v1alpha1.AnnotationPrune, v1alpha1.AnnotationSSA, v1alpha1.AnnotationForce, v1alpha1.AnnotationHandOver}
	for _, o := range objs {
		for _, a := range behaviour {
			if _, ok := o.GetAnnotations()[a]; ok {
				return fmt.Sprintf("the annotation %s on %s %s", a, o.GetKind(), o.GetName())
			}
		}
	}
	return ""
}

// shape counts the keys and list items of objs, all the way down: a
// string value in place of another adds none.
func shape(objs []*unstructured.Unstructured) int {
	var count func(v any) int
	count = func(v any) int {
		n := 0
		switch v := v.(type) {
		case map[string]any:
			for _, x := range v {
				n += 1 + count(x)
			}
		case []any:
			for _, x := range v {
				n += 1 + count(x)
			}
		}
		return n
	}
	total := 0
	for _, o := range objs {
		total += count(o.Object)
	}
	return total
}

// valuePaths lists the path of every value in values, maps included, in
// order.
func valuePaths(values map[string]any, prefix []string) [][]string {
	var out [][]string
	for _, key := range slices.Sorted(maps.Keys(values)) {
		p := append(slices.Clone(prefix), key)
		out = append(out, p)
		if m, ok := values[key].(map[string]any); ok {
			out = append(out, valuePaths(m, p)...)
		}
	}
	return out
}

// withValue is a spec that sets v at path, and nothing else.
func withValue(path []string, v any) map[string]any {
	spec := map[string]any{}
	m := spec
	for _, key := range path[:len(path)-1] {
		next := map[string]any{}
		m[key] = next
		m = next
	}
	m[path[len(path)-1]] = v
	return spec
}

// TestTplRunsOnlyTheChartsOwnActions: under tpl: own (a chart kind's
// default), tpl runs the chart's own strings, and a string of the values
// whose actions are all the chart's own (a default passed through toYaml,
// with the tenant's text beside it); a tenant's action fails the render;
// a string without actions is returned as it is.
func TestTplRunsOnlyTheChartsOwnActions(t *testing.T) {
	k := chartKind(t, map[string]string{
		"_chart.yaml":  "name: shop\nversion: 1.0.0\n",
		"_values.yaml": "greeting: 'hello {{ .Release.Name }}'\nextra: [{name: A, value: '{{ .Release.Name }}-a'}]\n",
		"cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data:
  greeting: {{ tpl .Values.greeting . | quote }}
  extra: {{ tpl (toYaml .Values.extra) . | quote }}
`,
	})
	tests := []struct {
		name   string
		values map[string]any
		want   map[string]any // data, nil: the render fails
	}{
		{"the chart's own", nil, map[string]any{"greeting": "hello rel", "extra": "- name: A\n  value: 'rel-a'"}},
		{"plain text", map[string]any{"greeting": "hi there"}, map[string]any{"greeting": "hi there", "extra": "- name: A\n  value: 'rel-a'"}},
		{"the chart's own actions among the tenant's text", map[string]any{"extra": []any{map[string]any{"name": "B", "value": "{{ .Release.Name }}-b"}}},
			map[string]any{"greeting": "hello rel", "extra": "- name: B\n  value: 'rel-b'"}},
		{"an action of the tenant's", map[string]any{"greeting": "{{ .Release.Namespace }}"}, nil},
		{"an action of the tenant's through toYaml", map[string]any{"extra": []any{map[string]any{"name": "B", "value": "{{ .Files }}"}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := k.Render(chartimport.NewResource(shopGVK, "rel", "ns1", tt.values))
			if tt.want == nil {
				if err == nil || !strings.Contains(err.Error(), "values are data") {
					t.Fatalf("error %v, want one saying values are data", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _, _ := unstructured.NestedMap(objs[0].Object, "data")
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("data %v, want %v", got, tt.want)
			}
		})
	}
}

// TestAValueCannotChangeAKind: a value that a template prints at the top
// level of a document cannot change the document's kind from the one the
// file writes; a file that writes its kind from a value may render any
// kind the kind owns.
func TestAValueCannotChangeAKind(t *testing.T) {
	k := chartKind(t, map[string]string{
		"_kind.yaml":   "owns: [{apiVersion: v1, kind: ConfigMap}, {apiVersion: v1, kind: Secret}]",
		"_chart.yaml":  "name: shop\nversion: 1.0.0\n",
		"_values.yaml": "top: 'data: {a: b}'\nkind: ConfigMap\n",
		"cm.yaml":      "apiVersion: v1\nkind: ConfigMap # the chart's\nmetadata: {name: cm}\n{{ .Values.top }}\n",
		"any.yaml":     "apiVersion: v1\nkind: {{ .Values.kind }}\nmetadata: {name: any}\n",
	})
	tests := []struct {
		name   string
		values map[string]any
		fails  bool
	}{
		{"the chart's values", nil, false},
		{"a kind the file does not write", map[string]any{"top": "kind: Secret\nstringData: {a: b}"}, true},
		{"a kind from a value where the file writes it so", map[string]any{"kind": "Secret"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := k.Render(chartimport.NewResource(shopGVK, "rel", "ns1", tt.values))
			if failed := err != nil && strings.Contains(err.Error(), "changed the object's kind"); failed != tt.fails || err != nil && !tt.fails {
				t.Fatalf("error %v, want one saying a value changed the kind: %v", err, tt.fails)
			}
		})
	}
}

// TestPrintErrorsNameTheValue: a value refused where it prints is named
// by its path in the resource, as its author wrote it.
func TestPrintErrorsNameTheValue(t *testing.T) {
	k := chartKind(t, map[string]string{
		"_chart.yaml":  "name: shop\nversion: 1.0.0\n",
		"_values.yaml": "image: {repository: nginx, tag: '1.25'}\n",
		"cm.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata:\n  image: {{ .Values.image.repository }}:{{ .Values.image.tag }}\n",
	})
	values := map[string]any{"image": map[string]any{"tag": "x\n  injected: true"}}
	_, err := k.Render(chartimport.NewResource(shopGVK, "rel", "ns1", values))
	if err == nil || !strings.Contains(err.Error(), "the value at .Values.image.tag: ") {
		t.Fatalf("error %v, want one naming .Values.image.tag", err)
	}
}
