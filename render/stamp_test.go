package render_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// TestHashLeavesOutItsOwnAnnotation: an object hashes the same with or
// without its hash annotation, any other change changes the hash, and the
// object hashed is left as it was.
func TestHashLeavesOutItsOwnAnnotation(t *testing.T) {
	object := func(annotations map[string]string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": "v"}}}
		o.SetName("cm")
		if annotations != nil {
			o.SetAnnotations(annotations)
		}
		return o
	}
	hash := func(o *unstructured.Unstructured) string {
		t.Helper()
		h, err := render.Hash(o)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	plain := hash(object(nil))
	tests := []struct {
		name        string
		annotations map[string]string
		same        bool
	}{
		{"only the hash annotation", map[string]string{v1alpha1.AnnotationDesiredHash: "old"}, true},
		{"another annotation", map[string]string{"team": "a"}, false},
		{"another annotation and the hash", map[string]string{"team": "a", v1alpha1.AnnotationDesiredHash: "old"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := object(tt.annotations)
			if got := hash(o); (got == plain) != tt.same {
				t.Errorf("hash %s, without annotations %s; want the same: %v", got, plain, tt.same)
			}
			if got := o.GetAnnotations(); len(got) != len(tt.annotations) {
				t.Errorf("annotations changed to %v", got)
			}
		})
	}
	withOther := object(map[string]string{"team": "a"})
	withBoth := object(map[string]string{"team": "a", v1alpha1.AnnotationDesiredHash: "old"})
	if hash(withOther) != hash(withBoth) {
		t.Error("the hash annotation changes the hash of an object with other annotations")
	}
}
