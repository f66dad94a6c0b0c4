package reconciler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/shard"
)

// A resource moved from one shard to another (its label changed) must be
// reconciled by one of them at a time: the old shard may be in the middle of
// a reconcile of it when the new one first sees it. So a sharded process
// writes nothing for a resource before it holds the resource's claim (the
// label v1alpha1.LabelClaim, set with an optimistic lock), and the old shard
// gives the claim up only once the resource has left its view, which its
// workqueue tells it after any reconcile of that resource in flight (or,
// when it no longer runs, the new shard takes the claim over: reconciler/shard/takeover.go).
// Unsharded (Options.Shards nil) nothing of this happens.

// claimedResources counts, per kind, the resources this shard holds.
var claimedResources = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "stencil_claimed_resources",
	Help: "Custom resources whose claim this process's shard holds (sharded processes only; label shard: the shard's name, default for the default shard).",
}, []string{"kind", "shard"})

func init() { metrics.Registry.MustRegister(claimedResources) }

// noteClaim adds or removes a resource from this shard's claimed set and
// sets the gauge.
func (r *Reconciler) noteClaim(nn types.NamespacedName, held bool) {
	if r.shards == nil {
		return
	}
	_, had := r.claims.Load(nn)
	switch {
	case held && !had:
		r.claims.Store(nn, struct{}{})
		claimedResources.WithLabelValues(r.kind().GroupVersionKind().Kind, shard.ClaimName(r.shards)).Inc()
	case !held && had:
		r.claims.Delete(nn)
		claimedResources.WithLabelValues(r.kind().GroupVersionKind().Kind, shard.ClaimName(r.shards)).Dec()
	}
}

// claimed reports whether this shard holds cr's claim, taking it when no
// shard does, or when the shard that does no longer runs (reconciler/shard/takeover.go).
// false: another shard holds it and will give it up; the reconcile waits,
// writing nothing.
func (r *Reconciler) claimed(ctx context.Context, cr client.Object) (bool, error) {
	if r.shards == nil {
		return true, nil
	}
	mine := shard.ClaimName(r.shards)
	if cr.GetLabels()[v1alpha1.LabelClaim] == mine {
		r.noteClaim(client.ObjectKeyFromObject(cr), true)
		return true, nil
	}
	fresh := r.kind().New()
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(cr), fresh); err != nil {
		return false, err
	}
	holder := fresh.GetLabels()[v1alpha1.LabelClaim]
	switch holder {
	case mine:
		r.noteClaim(client.ObjectKeyFromObject(cr), true)
		return true, nil
	case "":
	default:
		if err := r.writable(); err != nil {
			return false, err // a takeover writes the holder's Lease
		}
		gone, why, err := r.holderGone(ctx, fresh, holder)
		if err != nil {
			return false, err
		}
		if !gone {
			ctrl.LoggerFrom(ctx).Info("Waiting: another shard holds this resource's claim", "shard", holder, "why", why)
			return false, nil
		}
	}
	if err := r.writable(); err != nil {
		return false, err
	}
	if err := r.takeClaim(ctx, fresh, mine); err != nil {
		if errors.Is(err, errClaimRaced) {
			return false, nil // judged again
		}
		return false, err
	}
	if holder != "" {
		ctrl.LoggerFrom(ctx).Info("Took over the claim of a shard that has had no leader", "shard", holder, "lease", r.leases.Leases.LeaseFor(holder).String())
		r.recorder.Eventf(cr, nil, corev1.EventTypeWarning, "ClaimTakenOver", "Claim",
			"Shard %s took this resource over from shard %s, whose leader Lease %s showed no leader for at least %s: that shard no longer runs (the Lease now names %s, so a paused leader of it cannot come back)",
			mine, holder, r.leases.Leases.LeaseFor(holder), r.leases.Leases.Wait, shard.TakeoverHolder(mine))
	}
	// Whether it has objects elsewhere, from this fresh read (the cache's
	// copy may lag): the first prune lists them from the API server.
	r.memory.update(client.ObjectKeyFromObject(cr), func(m *remembered) { m.claimedWith = new(len(fresh.StencilStatus().Inventory) > 0) })
	r.noteClaim(client.ObjectKeyFromObject(cr), true)
	return true, nil
}

// errClaimRaced: the resource changed between the read of its claim and
// the claim's patch; the claim is judged again.
var errClaimRaced = errors.New("the resource changed while it was claimed")

// takeClaim sets fresh's claim to mine, with an optimistic lock on fresh's
// resourceVersion. A resource with objects also gets the prune-pending
// mark, in the same patch: they may carry another shard's label, and the
// mark outlives this process until the prune that lists them is done.
func (r *Reconciler) takeClaim(ctx context.Context, fresh v1alpha1.Object, mine string) error {
	before := fresh.DeepCopyObject().(client.Object)
	set := maps.Clone(fresh.GetLabels())
	if set == nil {
		set = map[string]string{}
	}
	set[v1alpha1.LabelClaim] = mine
	fresh.SetLabels(set)
	marks := maps.Clone(fresh.GetAnnotations())
	if marks == nil {
		marks = map[string]string{}
	}
	if len(fresh.StencilStatus().Inventory) > 0 {
		marks[v1alpha1.AnnotationPrunePending] = "true"
	}
	delete(marks, v1alpha1.AnnotationClaimLease)
	if r.leases != nil {
		marks[v1alpha1.AnnotationClaimLease] = r.leases.Leases.LeaseFor(mine).Name
	}
	fresh.SetAnnotations(marks)
	err := r.client.Patch(ctx, fresh, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		return errClaimRaced
	}
	if err != nil {
		return fmt.Errorf("claiming %s for shard %s: %w", client.ObjectKeyFromObject(fresh), mine, err)
	}
	return nil
}

// release gives up the claim of a resource that left this shard's view and
// still exists, held by this shard, labelled for another.
func (r *Reconciler) release(ctx context.Context, nn types.NamespacedName) error {
	if r.shards == nil {
		return nil
	}
	r.noteClaim(nn, false) // gone from this shard's view: no longer counted, whatever follows
	fresh := r.kind().New()
	if err := r.reader.Get(ctx, nn, fresh); err != nil {
		return client.IgnoreNotFound(err)
	}
	sel, err := r.shards.Selector()
	if err != nil {
		return err
	}
	if fresh.GetLabels()[v1alpha1.LabelClaim] != shard.ClaimName(r.shards) || sel.Matches(labels.Set(fresh.GetLabels())) {
		return nil
	}
	if err := r.writable(); err != nil {
		return err
	}
	before := fresh.DeepCopyObject().(client.Object)
	set := maps.Clone(fresh.GetLabels())
	delete(set, v1alpha1.LabelClaim)
	fresh.SetLabels(set)
	marks := maps.Clone(fresh.GetAnnotations())
	delete(marks, v1alpha1.AnnotationClaimLease)
	fresh.SetAnnotations(marks)
	if err := r.client.Patch(ctx, fresh, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("giving up the claim of %s: %w", nn, err)
	}
	ctrl.LoggerFrom(ctx).Info("Gave up the claim: the resource moved to another shard", "shard", fresh.GetLabels()[v1alpha1.LabelShard])
	return nil
}

// releaseMoved gives up, when this process starts leading its shard, the
// claims it holds on resources that moved to another shard while no
// process of this shard ran (no event would tell it).
func (r *Reconciler) releaseMoved(ctx context.Context) error {
	if r.shards == nil {
		return nil
	}
	resources, err := ListResources(ctx, r.reader, r.scheme, r.kind().GroupVersionKind(), client.MatchingLabels{v1alpha1.LabelClaim: shard.ClaimName(r.shards)})
	if err != nil {
		return fmt.Errorf("listing the %s this shard claims: %w", r.kind().GroupVersionKind().Kind, err)
	}
	for _, cr := range resources {
		// No event will bring a resource outside this shard's view back:
		// tried again until it is released or the process stops.
		for err := r.release(ctx, client.ObjectKeyFromObject(cr)); err != nil; err = r.release(ctx, client.ObjectKeyFromObject(cr)) {
			ctrl.LoggerFrom(ctx).Error(err, "Could not give up the claim of a resource that moved to another shard; trying again", "resource", client.ObjectKeyFromObject(cr))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(releaseRetry):
			}
		}
	}
	return nil
}

// releaseRetry is the pause between attempts to give up a claim at start.
const releaseRetry = 2 * time.Second

// holderGone reports whether the shard holder, whose claim on cr this shard
// waits for, has had no leader for the leases' Wait (and cannot come back).
// When it has not, why says so.
func (r *Reconciler) holderGone(ctx context.Context, cr client.Object, holder string) (bool, string, error) {
	if r.leases == nil {
		return false, "this process runs without leader election, so it takes no claim over", nil
	}
	switch under := cr.GetAnnotations()[v1alpha1.AnnotationClaimLease]; under {
	case "":
		return false, fmt.Sprintf("shard %s took the claim without leader election, so nothing tells whether it runs", holder), nil
	case r.leases.Leases.LeaseFor(holder).Name:
	default:
		return false, fmt.Sprintf("shard %s took the claim under the Lease %s, not %s, which this process would watch", holder, under, r.leases.Leases.LeaseFor(holder)), nil
	}
	return r.leases.Gone(ctx, holder, shard.ClaimName(r.shards))
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
