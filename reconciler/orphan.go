package reconciler

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// A resource deleted with propagationPolicy Orphan (kubectl delete
// --cascade=orphan) keeps every object: the API server adds the orphan
// finalizer with the deletion, and the garbage collector removes the
// objects' ownerReferences, then that finalizer. stencil deletes nothing
// then, not even the objects no ownerReference ties to the resource
// (cluster-scoped ones) or a graph's, which it otherwise deletes itself,
// and removes only its own finalizer.
//
// The garbage collector may be done, and its finalizer gone, before the
// resource's reconcile reads it: every update event of the resource is
// looked at for the finalizer, and the objects tell too (a namespaced
// object of the resource without its ownerReference was orphaned).

// noteOrphaning remembers a resource deleted with propagationPolicy
// Orphan, by UID, until it is gone.
func (r *Reconciler) noteOrphaning(obj client.Object) {
	if obj.GetDeletionTimestamp() != nil && slices.Contains(obj.GetFinalizers(), metav1.FinalizerOrphanDependents) {
		r.orphans.Store(obj.GetUID(), struct{}{})
	}
}

func (r *Reconciler) noteOrphaningOnCreate(e event.CreateEvent) bool {
	r.noteOrphaning(e.Object)
	return true
}

// forgetOrphaning drops what noteOrphaning kept of a resource that is
// gone (in any shard: every shard's filter sees every resource).
func (r *Reconciler) forgetOrphaning(e event.DeleteEvent) bool {
	r.orphans.Delete(e.Object.GetUID())
	return true
}

// orphaning: cr is being deleted with propagationPolicy Orphan.
func (r *Reconciler) orphaning(ctx context.Context, cr v1alpha1.Object) (bool, error) {
	r.noteOrphaning(cr)
	if _, ok := r.orphans.Load(cr.GetUID()); ok {
		return true, nil
	}
	orphaned, err := r.orphanedObjects(ctx, cr)
	if orphaned {
		r.orphans.Store(cr.GetUID(), struct{}{})
	}
	return orphaned, err
}

// orphanedObjects tells, from cr's objects as the API server holds them,
// whether the garbage collector orphaned them: it is how a deletion with
// propagationPolicy Orphan is told once the collector is done and its
// finalizer gone (stencil was down meanwhile, or the resource's cache
// shows the collector's last write before its handler ran). Not from the
// cache: each type's informer has its own watch, so the resource's cache
// may show the finalizer gone while an object's cache still shows the
// ownerReference the collector removed before it. The collector removes the
// ownerReference to cr from every object it knows of before it removes its
// finalizer, so at least one of the namespaced objects stencil rendered for
// cr has none left. Not every one: the collector orphans only the objects
// its graph holds, and an object created a moment before the deletion, or
// of a type whose CRD it has not discovered yet (it looks every 30
// seconds), still has its ownerReference. One object without it is enough,
// then: when in doubt, stencil keeps. A normal deletion misread this way
// (a person removed an object's ownerReference by hand) leaves the
// resource's objects in place rather than deleting what was asked to stay.
func (r *Reconciler) orphanedObjects(ctx context.Context, cr v1alpha1.Object) (bool, error) {
	objs, err := r.renderedObjects(ctx, cr)
	for _, o := range objs {
		if metav1.GetControllerOf(o) == nil {
			return true, nil
		}
	}
	return false, err
}

// renderedObjects are the namespaced objects stencil rendered for cr, as
// the API server holds them: owner label and owner annotation (the
// cluster's controllers copy labels into what they make, not annotations);
// kept ones (prune disabled) never had an ownerReference and are left out.
func (r *Reconciler) renderedObjects(ctx context.Context, cr v1alpha1.Object) ([]client.Object, error) {
	owner := v1alpha1.OwnerAnnotation(r.kind().GroupVersionKind(), cr.GetNamespace(), cr.GetName())
	var out []client.Object
	for _, t := range r.kind().Declaration().Owns {
		if t.ClusterScoped || !r.types.served(t.GroupVersionKind()) {
			continue // not served: there is no such object, nor an informer to ask
		}
		items, err := r.applier.ListToPrune(ctx, cr, t.GroupVersionKind(), true)
		if err != nil {
			return out, fmt.Errorf("listing %s to see whether they were orphaned: %w", t.Kind, err)
		}
		for _, item := range items {
			if item.GetAnnotations()[v1alpha1.AnnotationPrune] != v1alpha1.PruneDisabled && item.GetAnnotations()[v1alpha1.AnnotationOwner] == owner {
				out = append(out, item)
			}
		}
	}
	return out, nil
}

// releaseOrphans removes the ownerReference to cr from each of its
// namespaced objects that still holds one, before stencil removes its
// finalizer: the garbage collector orphaned only the objects its graph
// held (see orphanedObjects), and once cr is gone it deletes any object
// whose owner no longer exists. Each patch carries the object's
// resourceVersion (a merge patch replaces the whole list) and keeps every
// other ownerReference.
func (r *Reconciler) releaseOrphans(ctx context.Context, cr v1alpha1.Object) (int, error) {
	objs, err := r.renderedObjects(ctx, cr)
	if err != nil {
		return 0, err
	}
	released := 0
	for _, o := range objs {
		refs := o.GetOwnerReferences()
		kept := slices.DeleteFunc(slices.Clone(refs), func(ref metav1.OwnerReference) bool { return ref.UID == cr.GetUID() })
		if len(kept) == len(refs) {
			continue
		}
		patch := client.MergeFromWithOptions(o.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
		o.SetOwnerReferences(kept)
		if err := r.client.Patch(ctx, o, patch); err != nil && !apierrors.IsNotFound(err) {
			return released, fmt.Errorf("removing the ownerReference of %s %s/%s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetNamespace(), o.GetName(), err)
		}
		released++
	}
	return released, nil
}

// leaveOrphans says that cr's objects stay.
func (r *Reconciler) leaveOrphans(ctx context.Context, cr v1alpha1.Object, released int) {
	ctrl.LoggerFrom(ctx).Info("Deleted with propagationPolicy Orphan; leaving every object in place", "cr", klog.KObj(cr), "ownerReferencesRemoved", released)
	r.recorder.Eventf(cr, nil, corev1.EventTypeNormal, "Orphaned", "Delete",
		"Deleted with propagationPolicy Orphan: stencil leaves every object of this resource in place and removes only its own finalizer")
}
