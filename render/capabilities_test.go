package render_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/internal/testing/testkind"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// TestCapabilities: (capabilities).APIVersions.Has answers for the declared
// types, optional ones served only when WithAPIVersions names them, and a
// render that holds an optional type not served fails.
func TestCapabilities(t *testing.T) {
	def := testkind.Widget()
	def.Templates = fstest.MapFS{
		"_kind.yaml": {Data: []byte(`owns:
- {apiVersion: v1, kind: ConfigMap}
- {apiVersion: cert-manager.io/v1, kind: Certificate, optional: true}
`)},
		"has.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: has}
data:
  answer: {{ (capabilities).APIVersions.Has .Spec.Message | quote }}
`)},
		"cert.yaml": {Data: []byte(`{{- if eq .Spec.ConfigName "cert" }}
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: cert}
{{- end }}
`)},
	}
	kind, err := render.Load(def)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		ask  string   // what the template asks Has
		cert bool     // render a Certificate
		with []string // WithAPIVersions (nil: not called)
		want string   // answer, or the error's text
	}{
		{name: "built-in declared type", ask: "v1/ConfigMap", want: "true"},
		{name: "core group/version", ask: "v1", want: "true"},
		{name: "optional type offline", ask: "cert-manager.io/v1/Certificate", want: "false"},
		{name: "optional group/version offline", ask: "cert-manager.io/v1", want: "false"},
		{name: "optional type served", ask: "cert-manager.io/v1/Certificate", with: []string{"cert-manager.io/v1/Certificate"}, want: "true"},
		{name: "optional group/version served", ask: "cert-manager.io/v1/Certificate", with: []string{"cert-manager.io/v1"}, want: "true"},
		{name: "undeclared type", ask: "apps/v1/Deployment", want: "does not declare this type"},
		{name: "optional type rendered, not served", ask: "v1", cert: true, want: "the cluster does not serve cert-manager.io/v1/Certificate"},
		{name: "optional type rendered, served", ask: "v1", cert: true, with: []string{"cert-manager.io/v1/Certificate"}, want: "true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := kind
			if tt.with != nil {
				k = kind.WithAPIVersions(tt.with)
			}
			cr := widget(testv1alpha1.WidgetSpec{Message: tt.ask})
			if tt.cert {
				cr.Spec.ConfigName = "cert"
			}
			objs, err := k.Render(cr)
			got := ""
			if err != nil {
				got = err.Error()
			}
			for _, o := range objs {
				if o.GetName() == "has" {
					got, _, _ = unstructured.NestedString(o.Object, "data", "answer")
				}
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
