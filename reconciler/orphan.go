package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
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
// (cluster-scoped ones) or a graph's, which it otherwise deletes itself.
// It marks the resource, removes the ownerReferences the collector left
// (see releaseOrphans), then its own finalizer.
//
// The garbage collector may be done, and its finalizer gone, before the
// resource's reconcile reads it: every update event of the resource is
// looked at for the finalizer, stencil's mark tells after a restart, and
// the objects tell too (a namespaced object of the resource without its
// ownerReference, and none with it, was orphaned). The objects alone never
// keep the cluster-scoped objects: whoever may write the namespaced ones
// can strip their ownerReferences, and would then keep objects beyond its
// namespace past the resource's life; those go with the resource.

// noteOrphaning remembers a resource deleted with propagationPolicy
// Orphan, by UID, until it is gone.
func (r *Reconciler) noteOrphaning(obj client.Object) {
	if isOrphaning(obj) {
		r.orphans.Store(obj.GetUID(), struct{}{})
	}
}

// isOrphaning: obj is being deleted and carries the orphan finalizer, or
// stencil's mark of an orphaning it acted on.
func isOrphaning(obj client.Object) bool {
	return obj.GetDeletionTimestamp() != nil &&
		(slices.Contains(obj.GetFinalizers(), metav1.FinalizerOrphanDependents) || obj.GetAnnotations()[v1alpha1.AnnotationOrphaning] == "true")
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

// orphan says how stencil knows that a resource is being deleted with
// propagationPolicy Orphan.
type orphan int

const (
	notOrphaning orphan = iota
	// askedOrphan: the API server's orphan finalizer, or stencil's mark of
	// one it saw, says so: every object stays.
	askedOrphan
	// guessedOrphan: only the objects tell (see orphanedObjects), which a
	// tenant can make them do: the namespaced objects stay, the
	// cluster-scoped ones go with the resource.
	guessedOrphan
)

// orphaning: whether cr is being deleted with propagationPolicy Orphan, and
// how stencil knows.
func (r *Reconciler) orphaning(ctx context.Context, cr v1alpha1.Object) (orphan, error) {
	r.noteOrphaning(cr)
	if _, ok := r.orphans.Load(cr.GetUID()); ok {
		return askedOrphan, nil
	}
	// The cache may hold an older copy (a restart's first list): the
	// finalizer and the mark as the API server holds them, before anything
	// is deleted.
	live := cr.DeepCopyObject().(client.Object)
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(cr), live); err != nil && !apierrors.IsNotFound(err) {
		return notOrphaning, fmt.Errorf("reading the resource to see whether it is orphaning: %w", err)
	}
	if live.GetUID() == cr.GetUID() && isOrphaning(live) {
		r.orphans.Store(cr.GetUID(), struct{}{})
		return askedOrphan, nil
	}
	if orphaned, err := r.orphanedObjects(ctx, cr); err != nil || !orphaned {
		return notOrphaning, err
	}
	return guessedOrphan, nil
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
// finalizer, so the namespaced objects stencil rendered for cr (owner label
// and owner annotation: the cluster's controllers copy labels into what
// they make, not annotations; kept ones, prune disabled, never had one)
// have none left, and at least one exists. One object whose ownerReference
// a person removed (to keep it, under drift policy Report) is not enough:
// the others still have theirs. Once stencil acts on an orphaning it marks
// the resource (see releaseOrphans), so this look is only for a deletion
// that stencil did not see at all.
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

// releaseOrphans marks cr as orphaning (AnnotationOrphaning), then removes
// the ownerReference to cr from each of its objects that still holds one,
// before stencil removes its finalizer: the garbage collector orphans only
// the objects its graph holds, and an object created a moment before the
// deletion, or of a type whose CRD it has not discovered yet (it looks
// every 30 seconds), keeps its ownerReference; once cr is gone the
// collector deletes it, as it deletes any object whose owner is gone. It
// looks at every type cr's objects may be of (the inventory's too) and at
// every object with cr's owner label, as the collector would. It returns
// how many it released.
func (r *Reconciler) releaseOrphans(ctx context.Context, cr v1alpha1.Object) (int, error) {
	if err := r.markOrphaning(ctx, cr); err != nil {
		return 0, err
	}
	released := 0
	for _, gvk := range r.applier.PruneTypes(cr, false) {
		items, err := r.applier.ListToPrune(ctx, cr, gvk, true)
		if err != nil {
			return released, fmt.Errorf("listing %s to leave them in place: %w", gvk.Kind, err)
		}
		for _, item := range items {
			ok, err := r.releaseObject(ctx, cr, item)
			if err != nil {
				return released, err
			}
			if ok {
				released++
			}
		}
	}
	return released, nil
}

// markOrphaning sets AnnotationOrphaning on cr, with cr's resourceVersion
// as a precondition (lockedMetadataPatch).
func (r *Reconciler) markOrphaning(ctx context.Context, cr v1alpha1.Object) error {
	if cr.GetAnnotations()[v1alpha1.AnnotationOrphaning] == "true" {
		return nil
	}
	patch := lockedMetadataPatch(cr)
	ann := maps.Clone(cr.GetAnnotations())
	if ann == nil {
		ann = map[string]string{}
	}
	ann[v1alpha1.AnnotationOrphaning] = "true"
	cr.SetAnnotations(ann)
	if err := r.client.Patch(ctx, cr, patch); err != nil {
		return fmt.Errorf("marking the resource as orphaning: %w", err)
	}
	return nil
}

// releaseObject removes obj's ownerReference to cr, if it has one, with a JSON
// patch that first tests that reference's UID at its index: no other
// ownerReference is touched. When the list changed meanwhile (the garbage
// collector removed the reference too) the test fails the patch; the
// object is read again and, if it still has the reference, patched again.
func (r *Reconciler) releaseObject(ctx context.Context, cr v1alpha1.Object, obj client.Object) (bool, error) {
	var released bool
	err := retry.OnError(retry.DefaultRetry, apierrors.IsInvalid, func() error {
		i := slices.IndexFunc(obj.GetOwnerReferences(), func(ref metav1.OwnerReference) bool { return ref.UID == cr.GetUID() })
		if i < 0 {
			return nil
		}
		path := fmt.Sprintf("/metadata/ownerReferences/%d", i)
		ops, err := json.Marshal([]map[string]any{
			{"op": "test", "path": path + "/uid", "value": cr.GetUID()},
			{"op": "remove", "path": path},
		})
		if err == nil {
			err = r.client.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, ops))
		}
		if apierrors.IsInvalid(err) {
			if gerr := r.reader.Get(ctx, client.ObjectKeyFromObject(obj), obj); gerr != nil {
				return gerr
			}
		}
		released = err == nil
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("removing the ownerReference of %s %s/%s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return released, nil
}

// leaveOrphans says that cr's objects stay.
func (r *Reconciler) leaveOrphans(ctx context.Context, cr v1alpha1.Object, released int) {
	ctrl.LoggerFrom(ctx).Info("Deleted with propagationPolicy Orphan; leaving every object in place", "cr", klog.KObj(cr), "ownerReferencesRemoved", released)
	r.recorder.Eventf(cr, nil, corev1.EventTypeNormal, "Orphaned", "Delete",
		"Deleted with propagationPolicy Orphan: stencil leaves every object of this resource in place, removes the ownerReferences to it that the garbage collector left (%d), then its own finalizer", released)
}

// leaveNamespacedOrphans says that cr's namespaced objects stay and its
// cluster-scoped ones (deleted of them) went: the objects alone said it
// was orphaning.
func (r *Reconciler) leaveNamespacedOrphans(ctx context.Context, cr v1alpha1.Object, released, deleted int) {
	ctrl.LoggerFrom(ctx).Info("Deleted with its objects' ownerReferences gone, but no word of propagationPolicy Orphan from the API server; leaving the namespaced objects in place, deleting the cluster-scoped ones", "cr", klog.KObj(cr), "ownerReferencesRemoved", released, "clusterScopedDeleted", deleted)
	r.recorder.Eventf(cr, nil, corev1.EventTypeNormal, "Orphaned", "Delete",
		"Deleted after its objects lost their ownerReferences to it, as with propagationPolicy Orphan, but the API server did not ask to orphan them: stencil leaves the namespaced objects in place (%d ownerReferences removed) and deletes the cluster-scoped ones (%d), which only the resource's deletion cleans up", released, deleted)
}
