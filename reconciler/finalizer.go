package reconciler

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/fence"
)

// finalizer is set on custom resources whose render holds objects beyond
// their namespace (cluster-scoped, or in another namespace the kind
// declares), which no ownerReference can clean up, and on those of graph
// kinds, whose objects are deleted in the graph's reverse order.
const finalizer = "stencil.dev/cleanup"

// ensureFinalizer adds the cleanup finalizer before any object beyond the
// resource's namespace is applied.
func (r *Reconciler) ensureFinalizer(ctx context.Context, cr v1alpha1.Object, desired []*unstructured.Unstructured) error {
	if controllerutil.ContainsFinalizer(cr, finalizer) || !anyBeyond(desired, cr.GetNamespace()) && !r.kind().HasGraph() {
		return nil
	}
	patch := lockedMetadataPatch(cr)
	controllerutil.AddFinalizer(cr, finalizer)
	if err := r.client.Patch(ctx, cr, patch); err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	return nil
}

// lockedMetadataPatch is a merge patch from cr that carries cr's
// resourceVersion (for its finalizers and stencil's marks): a merge patch
// replaces the whole finalizers list, so without the lock it would drop a
// finalizer that another controller added meanwhile.
func lockedMetadataPatch(cr v1alpha1.Object) client.Patch {
	return client.MergeFromWithOptions(cr.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
}

// anyBeyond: an object of objs is beyond namespace, the resource's
// (cluster-scoped, or in another namespace the kind declares), where no
// ownerReference reaches it.
func anyBeyond(objs []*unstructured.Unstructured, namespace string) bool {
	for _, o := range objs {
		if o.GetNamespace() != namespace {
			return true
		}
	}
	return false
}

// finalizeAndReport finalizes cr and says in its status how that went:
// when it fails, Ready=False with reason CleanupFailed and what is left;
// when it succeeds after such a failure, Ready=False with reason Deleting
// (the resource may still wait for other finalizers). The status write has
// its own deadline, as in finish: a cleanup that ran out of time is
// reported too.
func (r *Reconciler) finalizeAndReport(ctx context.Context, cr v1alpha1.Object) error {
	pruned, err := r.finalize(ctx, cr)
	if apierrors.IsConflict(err) || errors.Is(err, fence.ErrFenced) || errors.Is(ctx.Err(), context.Canceled) {
		return err
	}
	res := &result{generation: cr.GetGeneration(), pruned: pruned}
	switch ready := meta.FindStatusCondition(cr.StencilStatus().Conditions, v1alpha1.ConditionReady); {
	case isStageLeft(err):
		res.record(v1alpha1.ReasonDeleting, false, err)
	case err != nil:
		res.record(v1alpha1.ReasonCleanupFailed, false, err)
	case ready != nil && ready.Reason == v1alpha1.ReasonCleanupFailed:
		res.record(v1alpha1.ReasonDeleting, false, errCleanedUp)
	default:
		return nil
	}
	current, serr := r.currentStatus(cr)
	if serr == nil {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusWriteTimeout)
		defer cancel()
		serr = r.writeStatus(wctx, cr, current, res)
	}
	return errors.Join(err, serr)
}

// isStageLeft: a graph kind's resource still has objects to delete, in a
// later turn (their deletion events bring it back).
func isStageLeft(err error) bool {
	_, ok := errors.AsType[*stageLeft](err)
	return ok
}

var errCleanedUp = errors.New("stencil finished its cleanup and removed its finalizer")

// finalize deletes the objects beyond the namespace of a custom resource
// being deleted (those in it go with it through their ownerReference), then
// removes the finalizer. It returns what it deleted.
func (r *Reconciler) finalize(ctx context.Context, cr v1alpha1.Object) ([]v1alpha1.InventoryEntry, error) {
	if !controllerutil.ContainsFinalizer(cr, finalizer) {
		return nil, nil
	}
	orphaning, err := r.orphaning(ctx, cr)
	if err != nil {
		return nil, fmt.Errorf("cleaning up before deletion: %w", err)
	}
	var pruned []v1alpha1.InventoryEntry
	switch {
	case orphaning == askedOrphan:
		// Deleted with propagationPolicy Orphan (kubectl delete
		// --cascade=orphan): every object stays; the garbage collector
		// removes the ownerReferences of those it knows of, stencil those
		// of the others.
		var released int
		if released, err = r.releaseOrphans(ctx, cr); err == nil {
			r.leaveOrphans(ctx, cr, released)
		}
	case orphaning == guessedOrphan:
		// Only the objects say so, and whoever may write them could have
		// stripped their ownerReferences: the namespaced objects stay, the
		// cluster-scoped ones, beyond the namespace, go with the resource.
		// (Pruned first: releaseOrphans marks the resource orphaning,
		// which a retry would take for the API server's word.)
		if pruned, err = r.applier.Prune(ctx, cr, nil, true); err == nil {
			var released int
			if released, err = r.releaseOrphans(ctx, cr); err == nil {
				r.leaveNamespacedOrphans(ctx, cr, released, len(pruned))
			}
		}
	case r.kind().HasGraph():
		if pruned, err = r.deleteInOrder(ctx, cr); isStageLeft(err) {
			return pruned, err
		}
	default:
		pruned, err = r.applier.Prune(ctx, cr, nil, true)
	}
	if err != nil {
		return pruned, fmt.Errorf("cleaning up before deletion: %w", err)
	}
	patch := lockedMetadataPatch(cr)
	controllerutil.RemoveFinalizer(cr, finalizer)
	if err := r.client.Patch(ctx, cr, patch); err != nil && !apierrors.IsNotFound(err) {
		return pruned, fmt.Errorf("removing finalizer: %w", err)
	}
	return pruned, nil
}
