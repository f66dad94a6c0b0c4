package reconciler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/rollout"
)

// awaitTurn asks the rollout gate whether this reconcile may apply a change
// that the templates alone bring. When it may not, res records why and the
// reconcile leaves the objects as they are.
func (r *Reconciler) awaitTurn(ctx context.Context, cr v1alpha1.Object, res *result, digest string) (bool, error) {
	change := r.rollout.TemplateChange(cr, digest)
	if change {
		intact, err := r.intact(ctx, cr)
		if err != nil {
			return false, err
		}
		change = intact
	}
	v, err := r.rollout.Admit(ctx, client.ObjectKeyFromObject(cr), cr.GetGeneration(), change)
	if err != nil {
		return false, err
	}
	if !v.Since.IsZero() {
		res.rollout = &v1alpha1.RolloutStatus{Templates: r.kind().Templates(), Started: metav1.NewTime(v.Since)}
	}
	switch {
	case v.Started:
		ctrl.LoggerFrom(ctx).Info("Rolling out a change of the templates", "templates", r.kind().Templates(), "from", cr.StencilStatus().Templates)
		r.recorder.Eventf(cr, nil, corev1.EventTypeNormal, "RollingOut", "Apply",
			"Applying version %s of the templates, which changes this resource's objects; stencil rolls such changes out to at most %d %s resources at a time",
			r.kind().Templates(), r.rollout.Opts.Batch, r.kind().GroupVersionKind().Kind)
	case v.Halted:
		res.waiting = &pending{reason: v1alpha1.ReasonRolloutHalted, message: r.rollout.WaitMessage(v), templates: r.kind().Templates()}
	case v.Wait:
		res.waiting = &pending{reason: v1alpha1.ReasonRolloutWaiting, message: r.rollout.WaitMessage(v), templates: r.kind().Templates()}
	}
	return v.Wait, nil
}

// intact reports whether the objects a resource was last applied with (its
// inventory, of the kind's declared types) are all in the cache and, of the
// types the kind judges, healthy: only such a resource's change waits for
// its turn. One that lost an object, or whose objects are not healthy, has
// nothing a paced rollout would protect, and is applied at once.
func (r *Reconciler) intact(ctx context.Context, cr v1alpha1.Object) (bool, error) {
	probe := &result{}
	for _, e := range cr.StencilStatus().Inventory {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion(e.APIVersion)
		o.SetKind(e.Kind)
		o.SetNamespace(e.Namespace)
		o.SetName(e.Name)
		gvk := o.GroupVersionKind()
		if !r.applier.Types().Declared(gvk) {
			continue // no informer for it; prune reads such types itself
		}
		if r.kind().JudgesHealth(gvk) {
			h, err := r.judgeLive(ctx, o, probe)
			if err != nil || !h.Current {
				return false, err
			}
			continue
		}
		err := r.client.Get(ctx, client.ObjectKeyFromObject(o), r.applier.Types().NewObject(gvk))
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("reading %s %s: %w", e.Kind, e.Name, err)
		}
	}
	return true, nil
}

// settleRollout tells the rollout gate how the reconcile of a resource
// ended, once its status says so, and reports a halt it causes.
func (r *Reconciler) settleRollout(ctx context.Context, cr v1alpha1.Object, res *result) {
	f := res.healthFailure()
	failed := ""
	if f != nil && f.stalled {
		failed = rollout.DescribeFailure(f.reason, f.err.Error())
	}
	why, halted := r.rollout.Settle(client.ObjectKeyFromObject(cr), res.generation, f == nil, failed)
	if !halted {
		return
	}
	ctrl.LoggerFrom(ctx).Info("The rollout of a change of the templates halted", "templates", r.kind().Templates(), "why", why)
	r.recorder.Eventf(cr, nil, corev1.EventTypeWarning, v1alpha1.ReasonRolloutHalted, "Rollout",
		"Version %s of the templates reached this resource and %s; stencil halted its rollout to the other %s resources until this one is Ready or deleted. Fix it, or roll stencil back to the previous templates",
		r.kind().Templates(), why, r.kind().GroupVersionKind().Kind)
}
