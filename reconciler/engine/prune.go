package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// Prune deletes the objects that carry this custom resource's owner label,
// in the kind's declared types and the types of its inventory, that desired
// does not hold. Ownership is confirmed a second way (controller
// ownerReference, or owner annotation for cluster-scoped objects) and the
// delete carries a UID precondition, so an object that merely copied our
// label, or was replaced meanwhile, survives. With fresh (the finalizer), it
// lists from the API server rather than the cache, so an object applied just
// before the resource was deleted is not missed.
func (a *Applier) Prune(ctx context.Context, cr v1alpha1.Object, desired []*unstructured.Unstructured, fresh bool) ([]v1alpha1.InventoryEntry, error) {
	return a.PruneFrom(ctx, cr, desired, fresh, fresh)
}

// PruneFrom is prune, listing from the API server with fresh and only
// cluster-scoped types with clusterOnly.
func (a *Applier) PruneFrom(ctx context.Context, cr v1alpha1.Object, desired []*unstructured.Unstructured, fresh, clusterOnly bool) ([]v1alpha1.InventoryEntry, error) {
	keep := map[ObjectID]bool{}
	for _, d := range desired {
		keep[IDOf(d)] = true
	}
	var pruned []v1alpha1.InventoryEntry
	for _, gvk := range a.PruneTypes(cr, clusterOnly) {
		items, err := a.ListToPrune(ctx, cr, gvk, fresh)
		if err != nil {
			return pruned, fmt.Errorf("listing %s to prune: %w", gvk.Kind, err)
		}
		for _, item := range items {
			if keep[NewID(gvk, item.GetNamespace(), item.GetName())] {
				continue
			}
			if item.GetAnnotations()[v1alpha1.AnnotationPrune] == v1alpha1.PruneDisabled {
				ctrl.LoggerFrom(ctx).V(1).Info("Keeping an object whose template disabled its pruning", "kind", gvk.Kind, "object", klog.KObj(item))
				continue
			}
			if !a.OwnedBy(item, cr) {
				ctrl.LoggerFrom(ctx).Info("Not pruning an object that carries our owner label but no proof of ownership", "kind", gvk.Kind, "object", klog.KObj(item))
				continue
			}
			if err := a.deleteOwned(ctx, gvk, item); err != nil {
				return pruned, err
			}
			a.forget(gvk, item.GetNamespace(), item.GetName(), cr.GetUID())
			pruned = append(pruned, v1alpha1.InventoryEntry{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: item.GetNamespace(), Name: item.GetName()})
		}
	}
	return pruned, nil
}

// ListOwned lists the cached objects of type gvk that carry the owner label
// uid: through the owner index for declared types, by label otherwise.
func (a *Applier) ListOwned(ctx context.Context, gvk schema.GroupVersionKind, uid types.UID, opts ...client.ListOption) ([]client.Object, error) {
	if a.types.Declared(gvk) {
		opts = append(opts, client.MatchingFields{ownerUIDIndex: string(uid)})
	} else {
		opts = append(opts, client.MatchingLabels{v1alpha1.LabelOwnerUID: string(uid)})
	}
	list := a.types.NewList(gvk)
	if err := a.client.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	return Items(list, gvk)
}

// ListToPrune lists the objects of type gvk that carry cr's owner label:
// from the cache for the types a kind declares, else (types known only from
// the inventory, or fresh) from the API server, metadata only, so that no
// informer is started inside a reconcile (without RBAC for the type it
// would never sync). A type the API server no longer serves has nothing left
// to prune; one stencil may no longer list (its RBAC went with the type's
// declaration) is left alone, with a warning.
func (a *Applier) ListToPrune(ctx context.Context, cr v1alpha1.Object, gvk schema.GroupVersionKind, fresh bool) ([]client.Object, error) {
	if a.types.Declared(gvk) && !fresh {
		return a.ListOwned(ctx, gvk, cr.GetUID())
	}
	namespaced, err := a.namespaced(gvk)
	if err != nil {
		return a.listFailed(ctx, cr, gvk, err)
	}
	// A resource's namespaced objects are in its namespace, and those the
	// kind declares: a list of every namespace would cost the API server
	// as much as the cluster's objects of the type, for any tenant's
	// resource.
	namespaces := []string{""}
	if namespaced {
		namespaces = append([]string{cr.GetNamespace()}, a.beyond...)
	}
	var out []client.Object
	for _, ns := range namespaces {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := a.reader.List(ctx, list, client.MatchingLabels{v1alpha1.LabelOwnerUID: string(cr.GetUID())}, client.InNamespace(ns)); err != nil {
			return a.listFailed(ctx, cr, gvk, err)
		}
		items, err := Items(list, gvk)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

// listFailed is what ListToPrune makes of a failed list of gvk: nothing
// to prune, when the type is not served or stencil may no longer list one
// the kind does not declare (with a warning), else the error.
func (a *Applier) listFailed(ctx context.Context, cr v1alpha1.Object, gvk schema.GroupVersionKind, err error) ([]client.Object, error) {
	switch {
	case meta.IsNoMatchError(err), apierrors.IsNotFound(err), apierrors.IsMethodNotSupported(err):
		ctrl.LoggerFrom(ctx).V(1).Info("Type is not served; nothing to prune", "type", gvk.String())
		return nil, nil
	case apierrors.IsForbidden(err) && !a.types.Declared(gvk):
		ctrl.LoggerFrom(ctx).Info("Not allowed to list a type left in the inventory; its objects are left in place", "type", gvk.String(), "error", err.Error())
		a.recorder.Eventf(cr, nil, corev1.EventTypeWarning, "PruneSkipped", "Prune", "stencil may not list %s, which the kind no longer declares; its objects are left in place: delete them by hand", gvk.String())
		return nil, nil
	}
	return nil, err
}

// namespaced reports whether gvk's objects live in namespaces, from the
// API server's discovery (cached by the REST mapper).
func (a *Applier) namespaced(gvk schema.GroupVersionKind) (bool, error) {
	m, err := a.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func (a *Applier) deleteOwned(ctx context.Context, gvk schema.GroupVersionKind, item client.Object) error {
	return a.deleteOwnedWith(ctx, gvk, item, metav1.DeletePropagationBackground)
}

// DeleteOwned deletes item, an object of type gvk, with a UID precondition
// and the propagation policy (Foreground keeps it until the garbage
// collector has deleted its dependents, a Job's pods), but only when it is
// cr's (see OwnedBy); else it returns ErrNotOurs.
func (a *Applier) DeleteOwned(ctx context.Context, cr v1alpha1.Object, gvk schema.GroupVersionKind, item client.Object, policy metav1.DeletionPropagation) error {
	if !a.OwnedBy(item, cr) {
		return fmt.Errorf("deleting %s %s: %w", gvk.Kind, klog.KObj(item), ErrNotOurs)
	}
	return a.deleteOwnedWith(ctx, gvk, item, policy)
}

// deleteOwnedWith is deleteOwned with a propagation policy: Foreground
// keeps the object until the garbage collector has deleted its dependents
// (a Job's pods).
func (a *Applier) deleteOwnedWith(ctx context.Context, gvk schema.GroupVersionKind, item client.Object, policy metav1.DeletionPropagation) error {
	uid := item.GetUID()
	err := writer(ctx, a.client).Delete(ctx, item, client.Preconditions{UID: &uid}, client.PropagationPolicy(policy))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("pruning %s %s: %w", gvk.Kind, klog.KObj(item), err)
	}
	ctrl.LoggerFrom(ctx).Info("Pruned", "kind", gvk.Kind, "object", klog.KObj(item))
	return nil
}

// PruneTypes are the kind's declared types plus any type in the inventory
// (a type the kind no longer declares may still have objects to remove);
// only the cluster-scoped ones with clusterOnly (the finalizer: namespaced
// objects go with the resource through their ownerReference).
func (a *Applier) PruneTypes(cr v1alpha1.Object, clusterOnly bool) []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var types []schema.GroupVersionKind
	add := func(gvk schema.GroupVersionKind) {
		if a.served != nil && !a.served(gvk) {
			return
		}
		if !seen[gvk] {
			seen[gvk] = true
			types = append(types, gvk)
		}
	}
	for _, t := range a.owns {
		if t.ClusterScoped || !clusterOnly || len(a.beyond) > 0 {
			add(t.GVK)
		}
	}
	for _, e := range cr.StencilStatus().Inventory {
		if e.Namespace != cr.GetNamespace() || !clusterOnly {
			add(schema.FromAPIVersionAndKind(e.APIVersion, e.Kind))
		}
	}
	return types
}

// OwnedBy is the second proof of ownership: a controller ownerReference to
// cr, or, for objects beyond cr's namespace (cluster-scoped, or in one
// the kind declares), which no ownerReference can reach, the owner
// annotation naming it.
func (a *Applier) OwnedBy(item metav1.Object, cr v1alpha1.Object) bool {
	return ownedBy(a.ownerKind, item, cr)
}

func ownedBy(kind schema.GroupVersionKind, item metav1.Object, cr v1alpha1.Object) bool {
	if ref := metav1.GetControllerOf(item); ref != nil {
		return ref.UID == cr.GetUID()
	}
	want := v1alpha1.OwnerAnnotation(kind, cr.GetNamespace(), cr.GetName())
	return item.GetNamespace() != cr.GetNamespace() && item.GetAnnotations()[v1alpha1.AnnotationOwner] == want
}

// Prunable reports whether stencil would prune item, an object that cr (of
// kind) no longer renders: it carries cr's owner label, its template did
// not disable its pruning, and it is cr's by ownerReference (or, when
// cluster-scoped, by owner annotation), as prune checks.
func Prunable(kind schema.GroupVersionKind, cr v1alpha1.Object, item metav1.Object) bool {
	return item.GetLabels()[v1alpha1.LabelOwnerUID] == string(cr.GetUID()) &&
		item.GetAnnotations()[v1alpha1.AnnotationPrune] != v1alpha1.PruneDisabled &&
		ownedBy(kind, item, cr)
}

// EmptyRender reports whether desired, cr's render, is one stencil does not
// act on: it holds no objects while cr has some (its inventory). An empty
// render is more likely a template's mistake than a wish to delete
// everything: the reconcile stops there, prunes nothing and reports
// EmptyRender.
func EmptyRender(cr v1alpha1.Object, desired []*unstructured.Unstructured) bool {
	return len(desired) == 0 && len(cr.StencilStatus().Inventory) > 0
}
