package decorator_test

import (
	"fmt"
	"testing"
	"testing/fstest"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/render"
)

// revisions annotates each Deployment labelled revisions=on with the
// number of ReplicaSets it owns (observed by ownerReference), and fails to
// render for one labelled broken=yes.
var revisions = fstest.MapFS{
	"_decorator.yaml": {Data: []byte(`decorates:
  apiVersion: apps/v1
  kind: Deployment
  selector: {matchLabels: {revisions: "on"}}
observes:
- {apiVersion: apps/v1, kind: ReplicaSet, as: replicasets, ownedByParent: true}
`)},
	"deployment.yaml": {Data: []byte(`{{ if index .Object.metadata.labels "broken" }}{{ fail "broken on purpose" }}{{ end -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Object.metadata.name }}
  namespace: {{ .Object.metadata.namespace }}
  annotations:
    revisions: {{ len .Observed.replicasets | quote }}
`)},
}

// TestDecoratorObservesByOwner: objects observed by ownerReference (the
// ReplicaSets a Deployment owns) are counted as they come; a failed render
// applies nothing and keeps what was there.
func TestDecoratorObservesByOwner(t *testing.T) {
	d, err := render.LoadDecorator("revisions", revisions)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := testop.StartWithDecorators(t.Context(), cluster.Config, scheme, nil, []*render.Decorator{d}, nil); err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t)
	labels := map[string]string{"app": "rev"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "rev", Namespace: ns, Labels: map[string]string{"revisions": "on"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1"}}},
			},
		},
	}
	if err := k8s.Create(t.Context(), dep); err != nil {
		t.Fatal(err)
	}
	annotated := func(want string) func() error {
		return func() error {
			if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(dep), dep); err != nil {
				return err
			}
			if got := dep.Annotations["revisions"]; got != want {
				return fmt.Errorf("revisions=%q", got)
			}
			return nil
		}
	}
	eventually(t, 30*time.Second, "revisions=1", annotated("1"))
	// Merge patches: the Deployment controller and the decorator write the
	// Deployment too.
	patch := func(p string) {
		t.Helper()
		if err := k8s.Patch(t.Context(), dep, client.RawPatch(types.MergePatchType, []byte(p))); err != nil {
			t.Fatal(err)
		}
	}
	patch(`{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"nginx:2"}]}}}}`)
	eventually(t, 30*time.Second, "revisions=2 after a new ReplicaSet", annotated("2"))

	// The label that breaks the render first, then a third ReplicaSet: in
	// one patch, the ReplicaSet's event could reach the decorator before
	// its cache holds the labelled Deployment (two watches), and a render
	// of the Deployment as it was would rightly count 3.
	patch(`{"metadata":{"labels":{"broken":"yes"}}}`)
	eventually(t, 30*time.Second, "a RenderFailed event", func() error {
		list := &corev1.EventList{}
		if err := k8s.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == "RenderFailed" && e.InvolvedObject.Name == "rev" {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(list.Items))
	})
	patch(`{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"nginx:3"}]}}}}`)
	// The decorator renders again once it has the third ReplicaSet: a new
	// label on it, which its watch delivers after its creation, makes it
	// render, and the render fails.
	third := &appsv1.ReplicaSet{}
	eventually(t, 30*time.Second, "the third ReplicaSet", func() error {
		list := &appsv1.ReplicaSetList{}
		if err := k8s.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		for i := range list.Items {
			if c := list.Items[i].Spec.Template.Spec.Containers; len(c) == 1 && c[0].Image == "nginx:3" {
				third = &list.Items[i]
				return nil
			}
		}
		return fmt.Errorf("%d ReplicaSets, none of nginx:3", len(list.Items))
	})
	failures := map[string]string{"kind": "revisions", "reason": "RenderFailed"}
	failed := metric(t, "stencil_decorator_failures_total", failures)
	if err := k8s.Patch(t.Context(), third, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"test.stencil.dev/nudge":"yes"}}}`))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a failed render with the third ReplicaSet", func() error {
		if n := metric(t, "stencil_decorator_failures_total", failures); n <= failed {
			return fmt.Errorf("%v failed renders, as before", n)
		}
		return nil
	})
	if err := annotated("2")(); err != nil {
		t.Errorf("after a failed render: %v, want the annotation as it was", err)
	}
}
