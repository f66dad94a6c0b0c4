package engine

import (
	"errors"
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
)

func TestOwnership(t *testing.T) {
	const owner = "Widget.test.stencil.dev/ns/web"
	desired := &unstructured.Unstructured{}
	desired.SetLabels(map[string]string{v1alpha1.LabelOwnerUID: "uid-web"})
	desired.SetAnnotations(map[string]string{v1alpha1.AnnotationOwner: owner})
	controller := func(uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: "Widget", Name: "web", UID: types.UID(uid), Controller: new(true)}}
	}
	tests := []struct {
		name                         string
		labels, annotations          map[string]string
		refs                         []metav1.OwnerReference
		owned, adopted, predecessors bool
	}{
		{name: "ours, namespaced", labels: map[string]string{v1alpha1.LabelOwnerUID: "uid-web"}, annotations: map[string]string{v1alpha1.AnnotationOwner: owner}, refs: controller("uid-web"), owned: true},
		{name: "ours, cluster-scoped", labels: map[string]string{v1alpha1.LabelOwnerUID: "uid-web"}, annotations: map[string]string{v1alpha1.AnnotationOwner: owner}, owned: true},
		{name: "our controller reference alone", refs: controller("uid-web"), owned: true},
		{name: "a copied label", labels: map[string]string{v1alpha1.LabelOwnerUID: "uid-web"}},
		{name: "copied label and annotation, another controller", labels: map[string]string{v1alpha1.LabelOwnerUID: "uid-web"},
			annotations: map[string]string{v1alpha1.AnnotationOwner: owner, v1alpha1.AnnotationAdopt: owner}, refs: controller("uid-other")},
		{name: "a user's object, adoption asked", annotations: map[string]string{v1alpha1.AnnotationAdopt: owner}, adopted: true},
		{name: "adoption asked for another resource", annotations: map[string]string{v1alpha1.AnnotationAdopt: "Widget.test.stencil.dev/ns/other"}},
		{name: "the deleted predecessor's", labels: map[string]string{v1alpha1.LabelOwnerUID: "uid-old"}, annotations: map[string]string{v1alpha1.AnnotationOwner: owner}, refs: controller("uid-old"), predecessors: true},
		{name: "an orphaned predecessor's", labels: map[string]string{v1alpha1.LabelOwnerUID: "uid-old"}, annotations: map[string]string{v1alpha1.AnnotationOwner: owner}},
		{name: "another resource's", labels: map[string]string{v1alpha1.LabelOwnerUID: "uid-other"}, annotations: map[string]string{v1alpha1.AnnotationOwner: "Widget.test.stencil.dev/ns/other"}, refs: controller("uid-other")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := &metav1.ObjectMeta{Labels: tt.labels, Annotations: tt.annotations, OwnerReferences: tt.refs}
			if got := ownedFor(live, desired); got != tt.owned {
				t.Errorf("ownedFor = %v, want %v", got, tt.owned)
			}
			if got := adoptedBy(live, desired); got != tt.adopted {
				t.Errorf("adoptedBy = %v, want %v", got, tt.adopted)
			}
			if got := predecessorOf(live, desired); got != tt.predecessors {
				t.Errorf("predecessorOf = %v, want %v", got, tt.predecessors)
			}
		})
	}
}

// PreviewBody and Prunable decide as apply and prune do.
func TestPreviewRules(t *testing.T) {
	kind := testv1alpha1.GroupVersion.WithKind("Widget")
	cr := &testv1alpha1.Widget{}
	cr.Namespace, cr.Name, cr.UID = "ns", "w", "uid-1"
	desired := func(annotations map[string]string) *unstructured.Unstructured {
		d := &unstructured.Unstructured{}
		d.SetAPIVersion("v1")
		d.SetKind("ConfigMap")
		d.SetNamespace("ns")
		d.SetName("cm")
		d.SetLabels(map[string]string{v1alpha1.LabelOwnerUID: "uid-1"})
		ann := map[string]string{v1alpha1.AnnotationOwner: "Widget.test.stencil.dev/ns/w"}
		maps.Copy(ann, annotations)
		d.SetAnnotations(ann)
		return d
	}
	ours := func(mutate func(*unstructured.Unstructured)) *unstructured.Unstructured {
		live := desired(nil)
		live.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "test.stencil.dev/v1alpha1", Kind: "Widget", Name: "w", UID: "uid-1", Controller: new(true)}})
		if mutate != nil {
			mutate(live)
		}
		return live
	}
	foreign := desired(nil)
	foreign.SetLabels(nil)
	foreign.SetAnnotations(nil)

	cases := []struct {
		name          string
		d, live       *unstructured.Unstructured
		applies, errs bool
	}{
		{"absent: created", desired(nil), nil, true, false},
		{"ours: applied", desired(nil), ours(nil), true, false},
		{"not ours: left alone", desired(nil), foreign, false, true},
		{"create-only and there: not applied", desired(map[string]string{v1alpha1.AnnotationSSA: v1alpha1.SSAIfNotPresent}), ours(nil), false, false},
		{"on its way out: not applied", desired(nil), ours(func(u *unstructured.Unstructured) { u.SetDeletionTimestamp(new(metav1.Now())) }), false, false},
	}
	for _, c := range cases {
		_, applies, err := PreviewBody(c.d, c.live, false)
		if applies != c.applies || (err != nil) != c.errs || c.errs && !errors.Is(err, ErrNotOurs) {
			t.Errorf("%s: applies %v, error %v", c.name, applies, err)
		}
	}

	keep := ours(func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{v1alpha1.AnnotationPrune: v1alpha1.PruneDisabled})
	})
	copied := ours(func(u *unstructured.Unstructured) { u.SetOwnerReferences(nil) })
	for name, want := range map[*unstructured.Unstructured]bool{ours(nil): true, keep: false, foreign: false, copied: false} {
		if got := Prunable(kind, cr, name); got != want {
			t.Errorf("Prunable(%v) = %v, want %v", name.Object["metadata"], got, want)
		}
	}
}
