package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/render"
)

// kindStatus runs the kind's status template over the live objects it reads:
// the owned objects of types cached whole (as this reconcile's apply returned
// them, else from the cache), and the observed objects that carry the custom
// resource's owner label, from the cache.
func (r *Reconciler) kindStatus(ctx context.Context, cr v1alpha1.Object, res *result) (map[string]any, error) {
	if !r.kind().HasStatus() {
		return nil, nil
	}
	live := render.LiveState{Owned: map[string]any{}, Observed: map[string][]map[string]any{}}
	for _, d := range res.desired {
		if !r.kind().ReadsWhole(d.GroupVersionKind()) {
			// Cached whole for another reason (a graph kind reads it): the
			// status template sees only what its kind declares it reads.
			continue
		}
		m, err := r.wholeMap(ctx, d, res)
		if err != nil {
			return nil, fmt.Errorf("status: %w", err)
		}
		if m == nil {
			continue // applied by an earlier reconcile; the cache will catch up and bring us back
		}
		live.Owned[d.GetKind()+"/"+d.GetName()] = m
	}
	for _, t := range r.kind().Declaration().Observes {
		items, err := r.applier.ListOwned(ctx, t.GroupVersionKind(), cr.GetUID(), client.InNamespace(cr.GetNamespace()))
		if err != nil {
			return nil, fmt.Errorf("listing %s for status: %w", t.Kind, err)
		}
		objs := make([]map[string]any, 0, len(items))
		for _, item := range items {
			if item.GetDeletionTimestamp() != nil {
				continue
			}
			m, err := engine.ObjectMap(item)
			if err != nil {
				return nil, err
			}
			objs = append(objs, m)
		}
		slices.SortFunc(objs, func(a, b map[string]any) int {
			return strings.Compare(nameOf(a), nameOf(b))
		})
		live.Observed[t.Kind] = objs
	}
	return r.renderKind().RenderStatus(cr, live)
}

func nameOf(obj map[string]any) string {
	name, _, _ := unstructured.NestedString(obj, "metadata", "name")
	return name
}
