package reconciler

import (
	"errors"
	"testing"
	"testing/fstest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
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

// TestReadFailureNamesTheFailedTemplatesInputs: a render that fails names
// the inputs the failed template reads, not those other nodes read.
func TestReadFailureNamesTheFailedTemplatesInputs(t *testing.T) {
	kind, err := render.Load(render.Definition{
		GroupVersionKind: schema.GroupVersionKind{Group: "test.stencil.dev", Version: "v1alpha1", Kind: "Gadget"},
		New:              func() v1alpha1.Object { return &testv1alpha1.Gadget{} },
		Templates: fstest.MapFS{
			"_kind.yaml": {Data: []byte("owns:\n- {apiVersion: v1, kind: ConfigMap}\ninputs:\n  a: {apiVersion: v1, kind: ConfigMap, name: a}\n  b: {apiVersion: v1, kind: Secret, name: b}\n")},
			"one.yaml":   {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\ndata:\n  x: {{ (input \"a\").data.x | quote }}\n")},
			"two.yaml":   {Data: []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: two\ndata:\n  x: {{ (input \"b\").data.x | quote }}\n")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{}
	r.current.Store(kind)
	cr := &testv1alpha1.Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}}
	reads := []render.Read{
		{GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: "ns", Name: "a"},
		{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Namespace: "ns", Name: "b"},
	}
	failed := &render.Error{File: "one.yaml", Err: errors.New(`map has no entry for key "x"`)}
	got := r.failedNodeReads(cr, failed, reads)
	if len(got) != 1 || describeRead(got[0]) != "ConfigMap ns/a" {
		t.Fatalf("one.yaml failed; the reads named are %v, want ConfigMap ns/a alone", got)
	}
	if got := r.failedNodeReads(cr, errors.New("not a template's"), reads); len(got) != 2 {
		t.Fatalf("an error that names no template: %d reads named, want every one", len(got))
	}
}
