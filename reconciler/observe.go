package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// kindStatus runs the kind's status template over the live objects it reads,
// all from the cache: the owned objects of types declared status: true, and
// the observed objects that carry the custom resource's owner label.
func (r *Reconciler) kindStatus(ctx context.Context, cr v1alpha1.Object, desired []*unstructured.Unstructured) (map[string]any, error) {
	if !r.kind.HasStatus() {
		return nil, nil
	}
	live := render.LiveState{Owned: map[string]any{}, Observed: map[string][]map[string]any{}}
	for _, d := range desired {
		if !r.applier.full[d.GroupVersionKind()] {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(d.GroupVersionKind())
		err := r.client.Get(ctx, client.ObjectKeyFromObject(d), u)
		if apierrors.IsNotFound(err) {
			continue // just applied; the cache will catch up and bring us back
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s %s for status: %w", d.GetKind(), d.GetName(), err)
		}
		live.Owned[d.GetKind()+"/"+d.GetName()] = u.Object
	}
	for _, t := range r.kind.Declaration().Observes {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(t.GroupVersionKind().GroupVersion().WithKind(t.Kind + "List"))
		err := r.client.List(ctx, list, client.InNamespace(cr.GetNamespace()), client.MatchingLabels{v1alpha1.LabelOwnerUID: string(cr.GetUID())})
		if err != nil {
			return nil, fmt.Errorf("listing %s for status: %w", t.Kind, err)
		}
		items := make([]map[string]any, 0, len(list.Items))
		for _, item := range list.Items {
			if item.GetDeletionTimestamp() == nil {
				items = append(items, item.Object)
			}
		}
		slices.SortFunc(items, func(a, b map[string]any) int {
			return strings.Compare(nameOf(a), nameOf(b))
		})
		live.Observed[t.Kind] = items
	}
	return r.kind.RenderStatus(cr, live)
}

func nameOf(obj map[string]any) string {
	name, _, _ := unstructured.NestedString(obj, "metadata", "name")
	return name
}
