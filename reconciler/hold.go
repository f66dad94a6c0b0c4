package reconciler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
)

// While a paced rollout holds a resource back, its objects stay as the
// previous templates made them, and stencil keeps them so: the first time
// the resource waits, hold reads each of its objects once and remembers the
// fields stencil's field manager owns, with their values, extracted as
// client-go's Extract functions do (the types' schemas keep list order and
// atomic values whole). When another manager takes one of those fields
// later, hold reports the drift and, under drift policy Correct, applies
// the remembered fields again, paced as any fight. It never applies
// anything of the new templates. Types without a built-in schema (custom
// resources), create-only objects and hand-over fields are reported, never
// corrected. What it remembers lives in this process: a new one remembers
// the objects as it finds them, and says when it cannot tell whether they
// drifted before (their records differ from status.ownedFields).

// heldObject is one object of a waiting resource as stencil's manager left
// it.
type heldObject struct {
	uid types.UID
	engine.Held
}

// heldObjects are a waiting resource's objects, by inventory entry.
type heldObjects map[v1alpha1.InventoryEntry]heldObject

// hold keeps the objects of cr, which waits for its turn in a paced
// rollout, as the previous templates made them, and records in res what
// drifted.
func (r *Reconciler) hold(ctx context.Context, cr v1alpha1.Object, res *result) error {
	nn := client.ObjectKeyFromObject(cr)
	held := r.memory.get(nn).held
	if held == nil {
		held, err := r.rememberAll(ctx, cr, res)
		if err != nil {
			return err
		}
		r.memory.update(nn, func(m *remembered) { m.held = held })
		return nil
	}
	correct := cr.StencilDriftPolicy().OrDefault() == v1alpha1.DriftCorrect
	for e, h := range held {
		live, err := r.cachedEntry(ctx, e)
		if err != nil {
			return err
		}
		if live == nil || live.GetUID() != h.uid {
			continue // gone or replaced: intact lets the resource go at once
		}
		if err := r.keep(ctx, h, live, correct, res); err != nil {
			return err
		}
	}
	return nil
}

// rememberAll remembers every object of cr's inventory of the types the
// cache holds. When the live records are not those status.ownedFields
// recorded, something may have drifted before: res says so.
func (r *Reconciler) rememberAll(ctx context.Context, cr v1alpha1.Object, res *result) (heldObjects, error) {
	held := heldObjects{}
	digest := sha256.New()
	for _, e := range cr.StencilStatus().Inventory {
		live, err := r.cachedEntry(ctx, e)
		if err != nil {
			return nil, err
		}
		if live == nil {
			continue // a lost object lets the resource go at once (see intact)
		}
		h, err := r.remember(ctx, e, live.GetUID())
		if err != nil {
			return nil, err
		}
		held[e] = h
		if !engine.CreateOnly(h.Ref) {
			engine.WriteOwned(digest, h.Ref, h.Ref.GetAnnotations()[v1alpha1.AnnotationDesiredHash], h.Owned)
		}
	}
	// An empty record (fields left to others under policy Report) cannot
	// be compared: nothing is claimed either way.
	if recorded := cr.StencilStatus().OwnedFields; recorded != "" && "sha256:"+hex.EncodeToString(digest.Sum(nil))[:32] != recorded {
		res.driftUnknown = true
	}
	return held, nil
}

// cachedEntry reads an inventory entry's object from the cache: nil when
// it is gone, or of a type the cache does not hold.
func (r *Reconciler) cachedEntry(ctx context.Context, e v1alpha1.InventoryEntry) (client.Object, error) {
	gvk := schema.FromAPIVersionAndKind(e.APIVersion, e.Kind)
	if !r.applier.Types().Declared(gvk) {
		return nil, nil // not watched for drift
	}
	live := r.applier.Types().NewObject(gvk)
	err := r.client.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: e.Name}, live)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", e.Kind, e.Name, err)
	}
	return live, nil
}

// remember reads one object in full and keeps the fields our manager owns,
// with their values.
func (r *Reconciler) remember(ctx context.Context, e v1alpha1.InventoryEntry, uid types.UID) (heldObject, error) {
	full := &unstructured.Unstructured{}
	full.SetGroupVersionKind(schema.FromAPIVersionAndKind(e.APIVersion, e.Kind))
	if err := r.reader.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: e.Name}, full); err != nil {
		return heldObject{}, fmt.Errorf("reading %s %s to keep it while the rollout waits: %w", e.Kind, e.Name, err)
	}
	if full.GetUID() != uid {
		return heldObject{}, fmt.Errorf("%s %s was replaced while stencil read it: %w", e.Kind, e.Name, engine.ErrChangedWhileRead)
	}
	owned := engine.OwnedRecord(full.GetManagedFields(), engine.FieldManager)
	ref := &unstructured.Unstructured{}
	ref.SetGroupVersionKind(full.GroupVersionKind())
	ref.SetNamespace(e.Namespace)
	ref.SetName(e.Name)
	ref.SetLabels(full.GetLabels())
	ref.SetAnnotations(full.GetAnnotations())
	h := heldObject{uid: uid, Held: engine.Held{Owned: owned, Ref: ref, Desired: full}}
	obj, err := engine.ExtractOwned(full, owned)
	if err != nil {
		return heldObject{}, fmt.Errorf("%s %s: %w", e.Kind, e.Name, err)
	}
	if obj == nil {
		ctrl.LoggerFrom(ctx).V(1).Info("No built-in schema for an object kept for a paced rollout: its drift is reported, not corrected", "kind", e.Kind, "object", e.Name)
	}
	if obj != nil {
		h.Desired = obj
		if !engine.CreateOnly(ref) {
			h.Obj = obj
		}
	}
	full.SetManagedFields(nil)
	return h, nil
}

// keep holds h as the previous templates left it (engine.Applier.Keep),
// and records the drift it found.
func (r *Reconciler) keep(ctx context.Context, h heldObject, live client.Object, correct bool, res *result) error {
	drift, err := r.applier.Keep(ctx, h.Held, live, correct, r.writable)
	if drift != nil {
		res.drift = append(res.drift, *drift)
	}
	return err
}
