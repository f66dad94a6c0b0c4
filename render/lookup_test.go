package render_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/dev/chartimport"
	"github.com/stencil-operator/stencil/render"
)

// TestLookupAnswersOwnObjects: a chart kind's lookup answers, by name, the
// resource's own objects of a type it owns, as the render's live objects
// hold them (bitnami's idiom that keeps an existing password); anything
// else is an empty map, as helm template answers: another owner's object,
// another namespace, a type the kind does not own, a list, and every
// lookup of a render with no live objects.
func TestLookupAnswersOwnObjects(t *testing.T) {
	k := chartKind(t, map[string]string{
		"_chart.yaml": "name: shop\n",
		"c.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: c}
data:
  own: {{ dig "data" "password" "none" (lookup "v1" "ConfigMap" .Release.Namespace "kept") | quote }}
  other: {{ len (lookup "v1" "ConfigMap" .Release.Namespace "others") | quote }}
  elsewhere: {{ len (lookup "v1" "ConfigMap" "kube-system" "kept") | quote }}
  undeclared: {{ len (lookup "v1" "Secret" .Release.Namespace "kept") | quote }}
  list: {{ len (lookup "v1" "ConfigMap" .Release.Namespace "") | quote }}
`,
	})
	cm := func(ns, name, owner string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("v1")
		o.SetKind("ConfigMap")
		o.SetNamespace(ns)
		o.SetName(name)
		o.SetLabels(map[string]string{v1alpha1.LabelOwnerUID: owner})
		o.Object["data"] = map[string]any{"password": "kept-pass"}
		return o
	}
	secret := cm("ns1", "kept", "uid-1")
	secret.SetKind("Secret")
	live := render.Objects{cm("ns1", "kept", "uid-1"), cm("ns1", "others", "uid-2"), cm("kube-system", "kept", "uid-1"), secret}
	cr := chartimport.NewResource(shopGVK, "rel", "ns1", nil)
	cr.SetUID("uid-1")
	for _, tc := range []struct {
		name string
		in   render.GraphInput
		want map[string]any
	}{
		{"live", render.GraphInput{Live: live}, map[string]any{"own": "kept-pass", "other": "0", "elsewhere": "0", "undeclared": "0", "list": "0"}},
		{"offline", render.GraphInput{}, map[string]any{"own": "none", "other": "0", "elsewhere": "0", "undeclared": "0", "list": "0"}},
	} {
		plan, err := k.RenderGraph(cr, tc.in)
		if err != nil {
			t.Fatal(err)
		}
		got, _, _ := unstructured.NestedMap(plan.Objects[0].Object, "data")
		for key, want := range tc.want {
			if got[key] != want {
				t.Errorf("%s: %s: %v, want %v", tc.name, key, got[key], want)
			}
		}
	}
}
