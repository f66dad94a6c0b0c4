package reconciler

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// While a paced rollout holds a resource back, its objects stay as the
// previous templates made them, and stencil keeps them so: the first time
// the resource waits, hold reads each of its objects once and remembers the
// fields stencil's field manager owns, with their values (the previous
// templates' render, as the API server keeps it). When another manager
// takes one of those fields later, hold reports the drift and, under drift
// policy Correct, applies the remembered fields again. It never applies
// anything of the new templates. What it remembers lives in this process: a
// new one remembers the objects as it finds them.

// heldObject is one object of a waiting resource as stencil's manager left
// it.
type heldObject struct {
	uid types.UID
	// owned is our manager's managedFields record when it was remembered.
	owned []string
	// obj holds those fields with their values: an apply of it restores
	// them, and claims nothing more.
	obj *unstructured.Unstructured
}

// heldObjects are a waiting resource's objects, by inventory entry.
type heldObjects map[v1alpha1.InventoryEntry]heldObject

// hold keeps the objects of cr, which waits for its turn in a paced
// rollout, as the previous templates made them, and records in res what
// drifted.
func (r *Reconciler) hold(ctx context.Context, cr v1alpha1.Object, res *result) error {
	nn := client.ObjectKeyFromObject(cr)
	v, _ := r.held.LoadOrStore(nn, heldObjects{})
	held := v.(heldObjects)
	correct := cr.StencilDriftPolicy().OrDefault() == v1alpha1.DriftCorrect
	for _, e := range cr.StencilStatus().Inventory {
		gvk := schema.FromAPIVersionAndKind(e.APIVersion, e.Kind)
		if !r.applier.types.declared(gvk) {
			continue // not in the cache: stencil does not watch it for drift
		}
		live := r.applier.types.newObject(gvk)
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: e.Name}, live); err != nil {
			if apierrors.IsNotFound(err) {
				continue // a lost object lets the resource go at once (see intact)
			}
			return fmt.Errorf("reading %s %s: %w", e.Kind, e.Name, err)
		}
		owned := ownedRecord(live.GetManagedFields(), FieldManager)
		h, ok := held[e]
		if !ok || h.uid != live.GetUID() {
			h, err := r.remember(ctx, gvk, live.GetUID(), e, owned)
			if err != nil {
				return err
			}
			held[e] = h
			continue
		}
		if err := r.keep(ctx, h, owned, correct, res); err != nil {
			return err
		}
	}
	return nil
}

// remember reads one object in full and keeps the fields our manager owns
// (record owned), with their values.
func (r *Reconciler) remember(ctx context.Context, gvk schema.GroupVersionKind, uid types.UID, e v1alpha1.InventoryEntry, owned []string) (heldObject, error) {
	full := &unstructured.Unstructured{}
	full.SetGroupVersionKind(gvk)
	if err := r.applier.reader.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: e.Name}, full); err != nil {
		return heldObject{}, fmt.Errorf("reading %s %s to keep it while the rollout waits: %w", e.Kind, e.Name, err)
	}
	if full.GetUID() != uid {
		return heldObject{}, fmt.Errorf("%s %s was replaced while stencil read it", e.Kind, e.Name)
	}
	set, err := parseRecord(ownedRecord(full.GetManagedFields(), FieldManager))
	if err != nil {
		return heldObject{}, err
	}
	obj := &unstructured.Unstructured{Object: extract(full.Object, set)}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(e.Namespace)
	obj.SetName(e.Name)
	return heldObject{uid: uid, owned: ownedRecord(full.GetManagedFields(), FieldManager), obj: obj}, nil
}

// keep reports the fields of h that our manager no longer owns (record
// owned now), and applies h again when correct says so.
func (r *Reconciler) keep(ctx context.Context, h heldObject, owned []string, correct bool, res *result) error {
	missing, err := missingFields(h.owned, owned, nil)
	if err != nil || missing.Empty() {
		return err
	}
	report, err := r.applier.report(ctx, h.obj, missing)
	if err != nil || len(report.Fields) == 0 {
		return err
	}
	if correct {
		if err := r.writable(); err != nil {
			return err
		}
		if _, err := r.applier.applyOne(ctx, h.obj.DeepCopy(), false, nil); err != nil {
			return err
		}
		report.Reverted = true
	}
	res.drift = append(res.drift, report)
	return nil
}
