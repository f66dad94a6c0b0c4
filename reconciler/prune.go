package reconciler

import (
	"context"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/shard"
)

// prunePhase deletes the objects the render no longer holds. While nodes
// of a graph wait, nothing is pruned: their objects stay as they are,
// whatever they carry (an object from before the kind had a graph has no
// node annotation).
func (r *Reconciler) prunePhase(ctx context.Context, s *state) outcome {
	if len(s.res.graphWaiting) > 0 {
		return goOn
	}
	pruned, err := r.pruneAfterClaim(s.writes(ctx), s.cr, s.res.desired)
	s.res.pruned = pruned
	if err != nil {
		return stopWith(s.res.fail(v1alpha1.ReasonPruneFailed, false, err))
	}
	return goOn
}

// pruneAfterClaim prunes cr's objects that desired no longer holds. A
// resource just claimed may have come from another shard, whose cache held
// its objects: objects it no longer renders still carry the old shard's
// label, which this shard's cache does not hold, so the first prune after
// the claim lists them from the API server. The claim's prune-pending mark
// says so to a leader that did not make the claim (this process may have
// failed over in between); the prune clears it once done.
func (r *Reconciler) pruneAfterClaim(ctx context.Context, cr v1alpha1.Object, desired []*unstructured.Unstructured) ([]v1alpha1.InventoryEntry, error) {
	key := client.ObjectKeyFromObject(cr)
	marked := cr.GetAnnotations()[v1alpha1.AnnotationPrunePending] != ""
	var claimedWith *bool
	r.memory.update(key, func(m *remembered) { claimedWith, m.claimedWith = m.claimedWith, nil })
	if claimedWith != nil {
		// The cache's copy may not show the claim's mark yet.
		marked = marked || *claimedWith || len(cr.StencilStatus().Inventory) > 0
	}
	pruned, err := r.applier.PruneFrom(ctx, cr, desired, marked, false)
	if err == nil && marked {
		err = r.clearPrunePending(ctx, cr)
	}
	if err != nil && marked {
		r.memory.update(key, func(m *remembered) { m.claimedWith = new(true) })
	}
	return pruned, err
}

// clearPrunePending removes cr's prune-pending mark, read afresh: only
// while this shard still holds the claim (a newer claim's mark is that
// claim's), with an optimistic lock, and on the fresh copy: cr stays the
// version the reconcile read.
func (r *Reconciler) clearPrunePending(ctx context.Context, cr v1alpha1.Object) error {
	fresh := r.kind().New()
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(cr), fresh); err != nil {
		return fmt.Errorf("reading %s to remove %s: %w", client.ObjectKeyFromObject(cr), v1alpha1.AnnotationPrunePending, err)
	}
	if _, marked := fresh.GetAnnotations()[v1alpha1.AnnotationPrunePending]; !marked {
		return nil
	}
	if r.shards != nil && fresh.GetLabels()[v1alpha1.LabelClaim] != shard.ClaimName(r.shards) {
		return nil
	}
	before := fresh.DeepCopyObject().(client.Object)
	marks := maps.Clone(fresh.GetAnnotations())
	delete(marks, v1alpha1.AnnotationPrunePending)
	fresh.SetAnnotations(marks)
	err := r.client.Patch(ctx, fresh, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		// Changed since the read: the mark stays, and the reconcile that
		// change brings prunes from the API server again and clears it.
		ctrl.LoggerFrom(ctx).V(1).Info("The resource changed as its prune-pending mark was cleared; it stays for the next reconcile")
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing %s after the prune that lists from the API server: %w", v1alpha1.AnnotationPrunePending, err)
	}
	return nil
}
