package reconciler

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// A resource moved from one shard to another (its label changed) must be
// reconciled by one of them at a time: the old shard may be in the middle of
// a reconcile of it when the new one first sees it. So a sharded process
// writes nothing for a resource before it holds the resource's claim (the
// label v1alpha1.LabelClaim, set with an optimistic lock), and the old shard
// gives the claim up only once the resource has left its view, which its
// workqueue tells it after any reconcile of that resource in flight.
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
		r.claims.Store(nn, true)
		claimedResources.WithLabelValues(r.kind.GroupVersionKind().Kind, claimName(r.shards)).Inc()
	case !held && had:
		r.claims.Delete(nn)
		claimedResources.WithLabelValues(r.kind.GroupVersionKind().Kind, claimName(r.shards)).Dec()
	}
}

// claimName is a shard's value of the claim label.
func claimName(s *Shards) string {
	if s.Name == "" {
		return "default"
	}
	return s.Name
}

// claimed reports whether this shard holds cr's claim, taking it when no
// shard does. false: another shard holds it and will give it up; the
// reconcile waits, writing nothing.
func (r *Reconciler) claimed(ctx context.Context, cr client.Object) (bool, error) {
	if r.shards == nil {
		return true, nil
	}
	mine := claimName(r.shards)
	if cr.GetLabels()[v1alpha1.LabelClaim] == mine {
		r.noteClaim(client.ObjectKeyFromObject(cr), true)
		return true, nil
	}
	fresh := r.kind.New()
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(cr), fresh); err != nil {
		return false, err
	}
	switch holder := fresh.GetLabels()[v1alpha1.LabelClaim]; holder {
	case mine:
		r.noteClaim(client.ObjectKeyFromObject(cr), true)
		return true, nil
	case "":
	default:
		ctrl.LoggerFrom(ctx).Info("Waiting: another shard holds this resource's claim", "shard", holder)
		return false, nil
	}
	if err := r.writable(); err != nil {
		return false, err
	}
	before := fresh.DeepCopyObject().(client.Object)
	set := maps.Clone(fresh.GetLabels())
	if set == nil {
		set = map[string]string{}
	}
	set[v1alpha1.LabelClaim] = mine
	fresh.SetLabels(set)
	err := r.client.Patch(ctx, fresh, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		return false, nil // changed meanwhile: judged again
	}
	if err != nil {
		return false, fmt.Errorf("claiming %s for shard %s: %w", client.ObjectKeyFromObject(cr), mine, err)
	}
	// Whether it has objects elsewhere, from this fresh read (the cache's
	// copy may lag): the first prune lists them from the API server.
	r.justClaimed.Store(client.ObjectKeyFromObject(cr), len(fresh.StencilStatus().Inventory) > 0)
	r.noteClaim(client.ObjectKeyFromObject(cr), true)
	return true, nil
}

// release gives up the claim of a resource that left this shard's view and
// still exists, held by this shard, labelled for another.
func (r *Reconciler) release(ctx context.Context, nn types.NamespacedName) error {
	if r.shards == nil {
		return nil
	}
	r.noteClaim(nn, false) // gone from this shard's view: no longer counted, whatever follows
	fresh := r.kind.New()
	if err := r.reader.Get(ctx, nn, fresh); err != nil {
		return client.IgnoreNotFound(err)
	}
	sel, err := r.shards.Selector()
	if err != nil {
		return err
	}
	if fresh.GetLabels()[v1alpha1.LabelClaim] != claimName(r.shards) || sel.Matches(labels.Set(fresh.GetLabels())) {
		return nil
	}
	if err := r.writable(); err != nil {
		return err
	}
	before := fresh.DeepCopyObject().(client.Object)
	set := maps.Clone(fresh.GetLabels())
	delete(set, v1alpha1.LabelClaim)
	fresh.SetLabels(set)
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
	resources, err := ListResources(ctx, r.reader, r.scheme, r.kind.GroupVersionKind(), client.MatchingLabels{v1alpha1.LabelClaim: claimName(r.shards)})
	if err != nil {
		return fmt.Errorf("listing the %s this shard claims: %w", r.kind.GroupVersionKind().Kind, err)
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
