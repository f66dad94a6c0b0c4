package reconciler

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
	"github.com/stencil-operator/stencil/render"
)

// prune deletes the objects that carry this custom resource's owner label,
// in the kind's declared types and the types of its inventory, that desired
// does not hold. Ownership is confirmed a second way (controller
// ownerReference, or owner annotation for cluster-scoped objects) and the
// delete carries a UID precondition, so an object that merely copied our
// label, or was replaced meanwhile, survives. With fresh (the finalizer), it
// lists from the API server rather than the cache, so an object applied just
// before the resource was deleted is not missed.
func (r *Reconciler) prune(ctx context.Context, cr v1alpha1.Object, desired []*unstructured.Unstructured, fresh bool) ([]v1alpha1.InventoryEntry, error) {
	return r.pruneFrom(ctx, cr, desired, fresh, fresh)
}

// pruneFrom is prune, listing from the API server with fresh and only
// cluster-scoped types with clusterOnly.
func (r *Reconciler) pruneFrom(ctx context.Context, cr v1alpha1.Object, desired []*unstructured.Unstructured, fresh, clusterOnly bool) ([]v1alpha1.InventoryEntry, error) {
	keep := map[string]bool{}
	for _, d := range desired {
		keep[idOf(d.GroupVersionKind(), d.GetNamespace(), d.GetName())] = true
	}
	var pruned []v1alpha1.InventoryEntry
	for _, gvk := range r.pruneTypes(cr, clusterOnly) {
		items, err := r.listToPrune(ctx, cr, gvk, fresh)
		if err != nil {
			return pruned, fmt.Errorf("listing %s to prune: %w", gvk.Kind, err)
		}
		for _, item := range items {
			if keep[idOf(gvk, item.GetNamespace(), item.GetName())] {
				continue
			}
			if item.GetAnnotations()[v1alpha1.AnnotationPrune] == v1alpha1.PruneDisabled {
				ctrl.LoggerFrom(ctx).V(1).Info("Keeping an object whose template disabled its pruning", "kind", gvk.Kind, "object", klog.KObj(item))
				continue
			}
			if !r.ownedBy(item, cr) {
				ctrl.LoggerFrom(ctx).Info("Not pruning an object that carries our owner label but no proof of ownership", "kind", gvk.Kind, "object", klog.KObj(item))
				continue
			}
			if err := r.deleteOwned(ctx, gvk, item); err != nil {
				return pruned, err
			}
			r.applier.forget(gvk.String(), item.GetNamespace(), item.GetName(), cr.GetUID())
			pruned = append(pruned, v1alpha1.InventoryEntry{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: item.GetNamespace(), Name: item.GetName()})
		}
	}
	return pruned, nil
}

// listOwned lists the cached objects of type gvk that carry the owner label
// uid: through the owner index for declared types, by label otherwise.
func (r *Reconciler) listOwned(ctx context.Context, gvk schema.GroupVersionKind, uid types.UID, opts ...client.ListOption) ([]client.Object, error) {
	if r.applier.types.declared(gvk) {
		opts = append(opts, client.MatchingFields{ownerUIDIndex: string(uid)})
	} else {
		opts = append(opts, client.MatchingLabels{v1alpha1.LabelOwnerUID: string(uid)})
	}
	list := r.applier.types.newList(gvk)
	if err := r.client.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	return items(list, gvk)
}

// listToPrune lists the objects of type gvk that carry cr's owner label:
// from the cache for the types a kind declares, else (types known only from
// the inventory, or fresh) from the API server, metadata only, so that no
// informer is started inside a reconcile (without RBAC for the type it
// would never sync). A type the API server no longer serves has nothing left
// to prune; one stencil may no longer list (its RBAC went with the type's
// declaration) is left alone, with a warning.
func (r *Reconciler) listToPrune(ctx context.Context, cr v1alpha1.Object, gvk schema.GroupVersionKind, fresh bool) ([]client.Object, error) {
	if r.applier.types.declared(gvk) && !fresh {
		return r.listOwned(ctx, gvk, cr.GetUID())
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	opts := []client.ListOption{client.MatchingLabels{v1alpha1.LabelOwnerUID: string(cr.GetUID())}}
	namespaced, err := r.namespaced(gvk)
	if namespaced {
		// A resource's namespaced objects are in its namespace: a list of
		// every namespace would cost the API server as much as the
		// cluster's objects of the type, for any tenant's resource.
		opts = append(opts, client.InNamespace(cr.GetNamespace()))
	}
	if err == nil {
		err = r.reader.List(ctx, list, opts...)
	}
	switch {
	case meta.IsNoMatchError(err), apierrors.IsNotFound(err), apierrors.IsMethodNotSupported(err):
		ctrl.LoggerFrom(ctx).V(1).Info("Type is not served; nothing to prune", "type", gvk.String())
		return nil, nil
	case apierrors.IsForbidden(err) && !r.applier.types.declared(gvk):
		ctrl.LoggerFrom(ctx).Info("Not allowed to list a type left in the inventory; its objects are left in place", "type", gvk.String(), "error", err.Error())
		r.recorder.Eventf(cr, nil, corev1.EventTypeWarning, "PruneSkipped", "Prune", "stencil may not list %s, which the kind no longer declares; its objects are left in place: delete them by hand", gvk.String())
		return nil, nil
	case err != nil:
		return nil, err
	}
	return items(list, gvk)
}

// namespaced reports whether gvk's objects live in namespaces, from the
// API server's discovery (cached by the REST mapper).
func (r *Reconciler) namespaced(gvk schema.GroupVersionKind) (bool, error) {
	m, err := r.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func (r *Reconciler) deleteOwned(ctx context.Context, gvk schema.GroupVersionKind, item client.Object) error {
	return r.deleteOwnedWith(ctx, gvk, item, metav1.DeletePropagationBackground)
}

// deleteOwnedWith is deleteOwned with a propagation policy: Foreground
// keeps the object until the garbage collector has deleted its dependents
// (a Job's pods).
func (r *Reconciler) deleteOwnedWith(ctx context.Context, gvk schema.GroupVersionKind, item client.Object, policy metav1.DeletionPropagation) error {
	uid := item.GetUID()
	err := writer(ctx, r.client).Delete(ctx, item, client.Preconditions{UID: &uid}, client.PropagationPolicy(policy))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("pruning %s %s: %w", gvk.Kind, klog.KObj(item), err)
	}
	ctrl.LoggerFrom(ctx).Info("Pruned", "kind", gvk.Kind, "object", klog.KObj(item))
	return nil
}

// pruneTypes are the kind's declared types plus any type in the inventory
// (a type the kind no longer declares may still have objects to remove);
// only the cluster-scoped ones with clusterOnly (the finalizer: namespaced
// objects go with the resource through their ownerReference).
func (r *Reconciler) pruneTypes(cr v1alpha1.Object, clusterOnly bool) []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var types []schema.GroupVersionKind
	add := func(gvk schema.GroupVersionKind) {
		if !seen[gvk] {
			seen[gvk] = true
			types = append(types, gvk)
		}
	}
	for _, t := range r.kind.Declaration().Owns {
		if t.ClusterScoped || !clusterOnly {
			add(t.GroupVersionKind())
		}
	}
	for _, e := range cr.StencilStatus().Inventory {
		if e.Namespace == "" || !clusterOnly {
			add(schema.FromAPIVersionAndKind(e.APIVersion, e.Kind))
		}
	}
	return types
}

// ownedBy is the second proof of ownership: a controller ownerReference to
// cr, or, for cluster-scoped objects, the owner annotation naming it.
func (r *Reconciler) ownedBy(item metav1.Object, cr v1alpha1.Object) bool {
	return ownedBy(r.kind.GroupVersionKind(), item, cr)
}

func ownedBy(kind schema.GroupVersionKind, item metav1.Object, cr v1alpha1.Object) bool {
	if ref := metav1.GetControllerOf(item); ref != nil {
		return ref.UID == cr.GetUID()
	}
	want := render.OwnerAnnotation(kind, cr.GetNamespace(), cr.GetName())
	return item.GetNamespace() == "" && item.GetAnnotations()[v1alpha1.AnnotationOwner] == want
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

func idOf(gvk schema.GroupVersionKind, namespace, name string) string {
	return gvk.Group + "/" + gvk.Kind + "/" + namespace + "/" + name
}
