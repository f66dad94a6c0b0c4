package render

import (
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// podCount is seed 004 as a decorator: label pod-count on each ReplicaSet,
// the number of pods that carry its template's labels.
var podCount = fstest.MapFS{
	"_decorator.yaml": {Data: []byte(`decorates: {apiVersion: apps/v1, kind: ReplicaSet}
observes:
- {apiVersion: v1, kind: Pod, as: pods, matchLabelsFrom: spec.template.metadata.labels}
`)},
	"replicaset.yaml": {Data: []byte(`apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: {{ .Object.metadata.name | quote }}
  namespace: {{ .Object.metadata.namespace | quote }}
  labels:
    pod-count: {{ len .Observed.pods | quote }}
`)},
}

// namespaceDefaults: a NetworkPolicy in each Namespace labelled for it.
var namespaceDefaults = fstest.MapFS{
	"_decorator.yaml": {Data: []byte(`decorates:
  apiVersion: v1
  kind: Namespace
  selector: {matchLabels: {stencil.dev/defaults: "on"}}
owns:
- {apiVersion: networking.k8s.io/v1, kind: NetworkPolicy}
`)},
	"networkpolicy.yaml": {Data: []byte(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny}
spec: {podSelector: {}, policyTypes: [Ingress]}
`)},
}

func object(t *testing.T, src string) *unstructured.Unstructured {
	t.Helper()
	var o map[string]any
	if err := yaml.Unmarshal([]byte(src), &o); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: o}
}

const replicaSet = `apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-7d9, namespace: shop, uid: rs-uid, labels: {app: web}}
spec:
  replicas: 3
  template: {metadata: {labels: {app: web, tier: front}}}
`

func TestPodCount(t *testing.T) {
	d, err := LoadDecorator("replicaset-podcount", podCount)
	if err != nil {
		t.Fatal(err)
	}
	rs := object(t, replicaSet)
	sel, err := ObservedSelector(d.Declaration().Observes[0], rs)
	if err != nil || sel.String() != "app=web,tier=front" {
		t.Fatalf("observed selector %v, %v; want app=web,tier=front", sel, err)
	}
	pods := []*unstructured.Unstructured{object(t, "{kind: Pod, metadata: {name: a}}"), object(t, "{kind: Pod, metadata: {name: b}}")}
	patch, children, err := d.Render(rs, map[string][]*unstructured.Unstructured{"pods": pods})
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 0 {
		t.Errorf("children %v, want none", children)
	}
	want := object(t, "{apiVersion: apps/v1, kind: ReplicaSet, metadata: {name: web-7d9, namespace: shop, labels: {pod-count: \"2\"}}}")
	if patch == nil || !equality.Semantic.DeepEqual(patch.Object, want.Object) {
		t.Errorf("patch %v, want %v", patch, want)
	}
	if patch, _, _ := d.Render(rs, nil); patch.GetLabels()["pod-count"] != "0" {
		t.Errorf("no pods: pod-count %q, want 0", patch.GetLabels()["pod-count"])
	}
	noLabels := object(t, "{apiVersion: apps/v1, kind: ReplicaSet, metadata: {name: x, namespace: shop}}")
	if sel, err := ObservedSelector(d.Declaration().Observes[0], noLabels); sel != nil || err != nil {
		t.Errorf("a parent without template labels observes %v, %v; want nothing", sel, err)
	}
}

func TestNamespaceDefaults(t *testing.T) {
	d, err := LoadDecorator("namespace-defaults", namespaceDefaults)
	if err != nil {
		t.Fatal(err)
	}
	labelled := object(t, `{apiVersion: v1, kind: Namespace, metadata: {name: team-a, uid: ns-uid, labels: {stencil.dev/defaults: "on"}}}`)
	if !d.Decorates(labelled) || d.Decorates(object(t, `{apiVersion: v1, kind: Namespace, metadata: {name: other}}`)) {
		t.Fatalf("the selector does not choose only labelled Namespaces")
	}
	patch, children, err := d.Render(labelled, nil)
	if err != nil {
		t.Fatal(err)
	}
	if patch != nil {
		t.Errorf("patch %v, want none (the templates do not render the parent)", patch)
	}
	if len(children) != 1 || children[0].GetNamespace() != "team-a" {
		t.Fatalf("children %v, want the NetworkPolicy in team-a", children)
	}
	refs := children[0].GetOwnerReferences()
	if len(refs) != 1 || refs[0].Kind != "Namespace" || refs[0].Name != "team-a" || refs[0].UID != "ns-uid" {
		t.Errorf("ownerReferences %v, want the Namespace", refs)
	}
}

func TestDecoratorErrors(t *testing.T) {
	tests := []struct {
		name, declaration, template, want string
	}{
		{"the parent's spec", `decorates: {apiVersion: apps/v1, kind: ReplicaSet}`,
			"apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web-7d9, namespace: shop}\nspec: {replicas: 1}\n", "sets only labels and annotations"},
		{"the parent's ownerReferences", `decorates: {apiVersion: apps/v1, kind: ReplicaSet}`,
			"apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web-7d9, namespace: shop, ownerReferences: []}\n", "metadata.ownerReferences"},
		{"an undeclared child", `decorates: {apiVersion: apps/v1, kind: ReplicaSet}`,
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", "not of a type"},
		{"a child elsewhere", "decorates: {apiVersion: apps/v1, kind: ReplicaSet}\nowns: [{apiVersion: v1, kind: ConfigMap}]",
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: other}\n", "not in namespace shop"},
		{"a label that is a number", `decorates: {apiVersion: apps/v1, kind: ReplicaSet}`,
			"apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web-7d9, namespace: shop, labels: {pod-count: 3}}\n", "must be a string (use quote)"},
		{"a child's annotation that is a number", "decorates: {apiVersion: apps/v1, kind: ReplicaSet}\nowns: [{apiVersion: v1, kind: ConfigMap}]",
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, annotations: {n: 1}}\n", "must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := LoadDecorator("d", fstest.MapFS{"_decorator.yaml": {Data: []byte(tt.declaration)}, "t.yaml": {Data: []byte(tt.template)}})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := d.Render(object(t, replicaSet), nil); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one that says %q", err, tt.want)
			}
		})
	}
	declarations := []struct{ name, declaration, want string }{
		{"no parent", `owns: []`, "needs apiVersion and kind"},
		{"an observed list without a name", "decorates: {apiVersion: v1, kind: Namespace}\nobserves: [{apiVersion: v1, kind: Pod, ownedByParent: true}]", "needs as"},
		{"an observed list found no way", "decorates: {apiVersion: v1, kind: Namespace}\nobserves: [{apiVersion: v1, kind: Pod, as: pods}]", "one of matchLabelsFrom and ownedByParent"},
		{"an unknown field", "decorates: {apiVersion: v1, kind: Namespace}\nowner: x", "unknown field"},
		{"a bad selector", "decorates: {apiVersion: v1, kind: Namespace, selector: {matchExpressions: [{key: a, operator: Nope}]}}", "decorates.selector"},
	}
	if _, err := LoadDecorator("Not_A_Name", podCount); err == nil || !strings.Contains(err.Error(), "label value") {
		t.Errorf("a bad name: error %v", err)
	}
	for _, tt := range declarations {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadDecorator("d", fstest.MapFS{"_decorator.yaml": {Data: []byte(tt.declaration)}, "t.yaml": {Data: []byte("")}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one that says %q", err, tt.want)
			}
		})
	}
}
