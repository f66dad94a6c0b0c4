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
	if controllerutil.ContainsFinalizer(cr, finalizer) || !anyBeyond(desired, cr.GetNamespace()) && r.kind().Graph() == nil {
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

// deletionPhases are the steps of a reconcile of a resource being deleted,
// run by the same runner as the phases of a live one; finishDeletion then
// writes its status when there is something to tell: a cleanup that failed
// (Ready=False, CleanupFailed, with what is left), a graph's stage that
// waits for the one after it (Deleting), or a cleanup that succeeded after
// such a failure (Deleting: the resource may still wait for other
// finalizers).
var deletionPhases = []phase{
	{"writable", (*Reconciler).writablePhase},         // a fenced leader writes nothing
	{"holds finalizer", (*Reconciler).holdsFinalizer}, // nothing to clean up without stencil's finalizer
	{"clean up", (*Reconciler).cleanUpPhase},          // delete, or release, what no ownerReference reaches (orphan.go, graph.go, engine)
	{"release", (*Reconciler).removeFinalizerPhase},   // let the resource go
	{"report", (*Reconciler).cleanedUpPhase},          // say so, after a cleanup that failed before
}

// reconcileDeleted runs the deletion phases over cr.
func (r *Reconciler) reconcileDeleted(ctx context.Context, cr v1alpha1.Object) outcome {
	r.rollout.Forget(client.ObjectKeyFromObject(cr))
	s, err := r.begin(cr)
	if err != nil {
		return stopWith(err)
	}
	return r.run(ctx, s, deletionPhases, (*Reconciler).finishDeletion)
}

// writablePhase stops when this process may not write (the leader fence):
// nothing is said.
func (r *Reconciler) writablePhase(context.Context, *state) outcome {
	if err := r.writable(); err != nil {
		return quietly(err)
	}
	return goOn
}

// holdsFinalizer stops when the resource carries no cleanup finalizer of
// stencil's (its objects go with it through their ownerReferences), with
// what the report phase would say.
func (r *Reconciler) holdsFinalizer(ctx context.Context, s *state) outcome {
	if !controllerutil.ContainsFinalizer(s.cr, finalizer) {
		return r.cleanedUpPhase(ctx, s)
	}
	return goOn
}

// cleanUpPhase deletes the objects beyond the resource's namespace (those
// in it go with it through their ownerReference), a graph kind's stage by
// stage, or releases them when the resource is deleted as an orphan.
func (r *Reconciler) cleanUpPhase(ctx context.Context, s *state) outcome {
	pruned, err := r.cleanUpObjects(ctx, s.cr)
	s.res.pruned = pruned
	switch {
	case isStageLeft(err):
		// The deletions' events bring it back; this is the backstop (an
		// object of a type no longer declared has no informer).
		return failed(v1alpha1.ReasonDeleting, false, err).retryAfter(cacheBackstop)
	case err != nil:
		return r.cleanUpFailed(ctx, fmt.Errorf("cleaning up before deletion: %w", err))
	}
	return goOn
}

// removeFinalizerPhase removes the cleanup finalizer: the API server may
// let the resource go.
func (r *Reconciler) removeFinalizerPhase(ctx context.Context, s *state) outcome {
	patch := lockedMetadataPatch(s.cr)
	controllerutil.RemoveFinalizer(s.cr, finalizer)
	if err := r.client.Patch(ctx, s.cr, patch); err != nil && !apierrors.IsNotFound(err) {
		return r.cleanUpFailed(ctx, fmt.Errorf("removing finalizer: %w", err))
	}
	return goOn
}

// cleanedUpPhase tells, after a cleanup that failed before, that it is
// done; else there is nothing to tell. The news travels as a failure with
// reason Deleting: Ready=False, which a resource being deleted is.
func (r *Reconciler) cleanedUpPhase(_ context.Context, s *state) outcome {
	if ready := meta.FindStatusCondition(s.cr.StencilStatus().Conditions, v1alpha1.ConditionReady); ready != nil && ready.Reason == v1alpha1.ReasonCleanupFailed {
		return failed(v1alpha1.ReasonDeleting, false, errCleanedUp).retryAfter(0)
	}
	return quietly(nil)
}

// cleanUpFailed is the outcome of a failed cleanup: retried, and told
// (CleanupFailed), unless the resource changed under a write or the
// process stops: the retry reads it anew.
func (r *Reconciler) cleanUpFailed(ctx context.Context, err error) outcome {
	if apierrors.IsConflict(err) || errors.Is(err, fence.ErrFenced) || errors.Is(ctx.Err(), context.Canceled) {
		return quietly(err)
	}
	return failed(v1alpha1.ReasonCleanupFailed, false, err)
}

// finishDeletion writes the status of what the deletion phases saw, when
// they have something to tell, with a deadline of its own (the
// reconcile's may have passed): a cleanup that ran out of time is
// reported too.
func (r *Reconciler) finishDeletion(ctx context.Context, s *state, o outcome) outcome {
	if o.quiet || o.failure == nil || errors.Is(o.err, fence.ErrFenced) || errors.Is(ctx.Err(), context.Canceled) {
		// Nothing to tell: a status computed from no failure would call
		// the resource Ready, with an empty inventory.
		return o
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusWriteTimeout)
	defer cancel()
	o.err = errors.Join(o.err, r.writeStatus(wctx, s.cr, s.before, s.res))
	return o
}

// isStageLeft: a graph kind's resource still has objects to delete, in a
// later turn (their deletion events bring it back).
func isStageLeft(err error) bool {
	_, ok := errors.AsType[*stageLeft](err)
	return ok
}

var errCleanedUp = errors.New("stencil finished its cleanup and removed its finalizer")

// cleanUpObjects deletes the objects beyond the namespace of a custom
// resource being deleted, or releases them when it is deleted as an
// orphan. It returns what it deleted.
func (r *Reconciler) cleanUpObjects(ctx context.Context, cr v1alpha1.Object) ([]v1alpha1.InventoryEntry, error) {
	orphaning, err := r.orphaning(ctx, cr)
	if err != nil {
		return nil, err
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
	case r.kind().Graph() != nil:
		pruned, err = r.deleteInOrder(ctx, cr)
	default:
		pruned, err = r.applier.Prune(ctx, cr, nil, true)
	}
	return pruned, err
}
