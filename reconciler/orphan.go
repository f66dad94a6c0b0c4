package reconciler

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
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
// ownerReference to cr from every object before it removes its finalizer,
// so the namespaced objects stencil rendered for cr (owner label and owner
// annotation: the cluster's controllers copy labels into what they make,
// not annotations; kept ones, prune disabled, never had one) have none
// left, and at least one exists. One object whose ownerReference a person
// removed (to keep it) is not enough: the others still have theirs.
func (r *Reconciler) orphanedObjects(ctx context.Context, cr v1alpha1.Object) (bool, error) {
	owner := v1alpha1.OwnerAnnotation(r.kind().GroupVersionKind(), cr.GetNamespace(), cr.GetName())
	without := 0
	for _, t := range r.kind().Declaration().Owns {
		if t.ClusterScoped || !r.types.served(t.GroupVersionKind()) {
			continue // not served: there is no such object, nor an informer to ask
		}
		items, err := r.applier.ListToPrune(ctx, cr, t.GroupVersionKind(), true)
		if err != nil {
			return false, fmt.Errorf("listing %s to see whether they were orphaned: %w", t.Kind, err)
		}
		for _, item := range items {
			if item.GetAnnotations()[v1alpha1.AnnotationPrune] == v1alpha1.PruneDisabled || item.GetAnnotations()[v1alpha1.AnnotationOwner] != owner {
				continue
			}
			switch ref := metav1.GetControllerOf(item); {
			case ref == nil:
				without++
			case ref.UID == cr.GetUID():
				return false, nil
			}
		}
	}
	return without > 0, nil
}

// leaveOrphans says that cr's objects stay.
func (r *Reconciler) leaveOrphans(ctx context.Context, cr v1alpha1.Object) {
	ctrl.LoggerFrom(ctx).Info("Deleted with propagationPolicy Orphan; leaving every object in place", "cr", klog.KObj(cr))
	r.recorder.Eventf(cr, nil, corev1.EventTypeNormal, "Orphaned", "Delete",
		"Deleted with propagationPolicy Orphan: stencil leaves every object of this resource in place and removes only its own finalizer")
}
