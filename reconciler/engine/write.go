package engine

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// write applies body, the form of d that sendable made, and returns the
// API server's answer, or its refusal as the verdict reads it (refusal).
// It notes in out when another writer changed the object while the apply
// was in flight.
func (a *Applier) write(ctx context.Context, d, body *unstructured.Unstructured, v verdict, leftOut *fieldpath.Set, out *ApplyOutcome) (client.Object, error) {
	key := KeyOf(d)
	a.writes.Begin(key)
	live, err := a.applyOne(ctx, body, leftOut)
	if others := a.writes.endAwaited(key, live, v.cachedVersion(), d.GetAnnotations()[v1alpha1.AnnotationOwner]); others {
		out.OthersWrote = true
	}
	if err != nil {
		return nil, v.refusal(err, d)
	}
	if v.decision == create || v.resourceVersion != "" { // only a read-then-apply can follow a refusal
		a.refused.Delete(IDOf(d))
	}
	return live, nil
}

// applyOne server-side-applies d with force, records the fields our
// manager owns afterwards (and leftOut, the fields left out for other
// managers) as d's baseline, and returns the API server's answer: the whole
// object for types cached whole, else only its metadata (the API server
// sends no more, and there is less to decode).
func (a *Applier) applyOne(ctx context.Context, d *unstructured.Unstructured, leftOut *fieldpath.Set) (client.Object, error) {
	body, err := d.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	}
	live := a.types.NewObject(d.GroupVersionKind())
	live.SetNamespace(d.GetNamespace())
	live.SetName(d.GetName())
	if err := writer(ctx, a.client).Patch(ctx, live, client.RawPatch(types.ApplyPatchType, body), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("applying %s %s: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	}
	a.baselines.Store(KeyOf(d), baseline{
		hash: d.GetAnnotations()[v1alpha1.AnnotationDesiredHash], leftOut: leftOut,
		resourceVersion: ResourceVersion(live), appliedAt: time.Now(),
		owned: OwnedRecord(live.GetManagedFields(), FieldManager),
	})
	return live, nil
}
