package reconciler

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stencil-operator/stencil/render"
)

// duringRead is a Snapshot that calls f as it reads.
type duringRead struct{ f func() }

func (d duringRead) Get(schema.GroupVersionKind, string, string) (*unstructured.Unstructured, error) {
	d.f()
	return nil, nil
}

func (d duringRead) List(schema.GroupVersionKind, string, labels.Selector) ([]*unstructured.Unstructured, error) {
	d.f()
	return nil, nil
}

// TestInputReadRegisteredBeforeTheRead: an event of an input that comes
// while the render reads it (or at any time after) already finds the
// resource among its readers, for a read by name and by selector, and a
// failed render's reads stay registered (set with what the log holds).
func TestInputReadRegisteredBeforeTheRead(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	nn := types.NamespacedName{Namespace: "ns", Name: "app"}
	event := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "settings", Labels: map[string]string{"team": "a"}}}
	sel, err := labels.Parse("team=a")
	if err != nil {
		t.Fatal(err)
	}
	var w inputReads
	seen := 0
	log := &readLog{
		Snapshot: duringRead{f: func() {
			if got := w.readers(cm, event); len(got) != 1 || got[0].NamespacedName != nn {
				t.Errorf("while the input is read, its event wakes %v; want %v", got, nn)
			}
			seen++
		}},
		watch: func(r render.Read) { w.add(nn, r) },
	}
	if _, err := log.Get(cm, "ns", "settings"); err != nil {
		t.Fatal(err)
	}
	w.set(nn, nil)
	if _, err := log.List(cm, "ns", sel); err != nil {
		t.Fatal(err)
	}
	if seen != 2 {
		t.Fatalf("%d reads seen; want 2", seen)
	}
	w.set(nn, log.reads) // what renderPlan does, the render failed or not
	if got := w.readers(cm, event); len(got) != 1 {
		t.Fatalf("after the render, the input's event wakes %v; want %v", got, nn)
	}
}
