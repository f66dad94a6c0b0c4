package reconciler

import (
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// TestUnwatched: a reload is refused when the new templates need a watch
// or a whole cached type the running controller lacks; a type no longer
// needed, or a template edit alone, is fine.
func TestUnwatched(t *testing.T) {
	kind := func(t *testing.T, declaration string) *render.Kind {
		t.Helper()
		k, err := render.Load(render.Definition{
			GroupVersionKind: testv1alpha1.GroupVersion.WithKind("Gadget"),
			New:              func() v1alpha1.Object { return &testv1alpha1.Gadget{} },
			Templates: fstest.MapFS{
				"_kind.yaml": {Data: []byte(declaration)},
				"cm.yaml":    {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	const current = "owns: [{apiVersion: v1, kind: ConfigMap}, {apiVersion: v1, kind: Secret}]\nobserves: [{apiVersion: v1, kind: Pod}]\n"
	tests := map[string]struct {
		// next is the reloaded _kind.yaml.
		next string
		// refused names what the refusal says; empty: accepted.
		refused string
	}{
		"the same declaration":        {next: current},
		"a type no longer owned":      {next: "owns: [{apiVersion: v1, kind: ConfigMap}]\nobserves: [{apiVersion: v1, kind: Pod}]\n"},
		"owns a Service it did not":   {next: "owns: [{apiVersion: v1, kind: ConfigMap}, {apiVersion: v1, kind: Secret}, {apiVersion: v1, kind: Service}]\nobserves: [{apiVersion: v1, kind: Pod}]\n", refused: "it owns Service"},
		"observes Events too":         {next: "owns: [{apiVersion: v1, kind: ConfigMap}, {apiVersion: v1, kind: Secret}]\nobserves: [{apiVersion: v1, kind: Pod}, {apiVersion: v1, kind: Event}]\n", refused: "it observes Event"},
		"reads a metadata-only whole": {next: "owns: [{apiVersion: v1, kind: ConfigMap, status: true}, {apiVersion: v1, kind: Secret}]\nobserves: [{apiVersion: v1, kind: Pod}]\n", refused: "it reads ConfigMap whole"},
	}
	cur := kind(t, current)
	types := cachedTypesOf([]*render.Kind{cur}, runtime.NewScheme())
	if types.Whole[schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}] {
		t.Fatal("the current kind's ConfigMaps are cached whole; the test needs them metadata only")
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := unwatched(cur, kind(t, tt.next), types)
			switch {
			case tt.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
				t.Errorf("got %v, want a refusal that says %q", err, tt.refused)
			}
		})
	}
}
