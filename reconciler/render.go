package reconciler

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/render"
)

// renderPhase renders the resource's spec into its desired objects (a
// graph kind: only the nodes whose turn came). A failed or empty render
// stops the reconcile: nothing is applied or pruned after it.
func (r *Reconciler) renderPhase(ctx context.Context, s *state) outcome {
	plan, err := r.renderPlan(ctx, s.cr)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("Render failed", "error", err.Error())
		return renderFailed(s.res, err)
	}
	s.res.desired, s.res.graphWaiting = plan.Objects, plan.Waiting
	if len(s.res.graphWaiting) == 0 && engine.EmptyRender(s.cr, s.res.desired) {
		s.res.record(v1alpha1.ReasonEmptyRender, true, errEmptyRender)
		return lookAgain(0)
	}
	return goOn
}

// renderFailed records a failed render with its reason and says when to
// try again: a template's error waits for a change of the spec or of the
// templates; what may pass by itself is retried.
func renderFailed(res *result, err error) outcome {
	if apierrors.IsForbidden(err) {
		// An input stencil (or the resource's ServiceAccount) may not
		// read: no event tells of a new RoleBinding.
		res.record(v1alpha1.ReasonForbidden, true, err)
		return lookAgain(forbiddenRetry)
	}
	if _, ok := errors.AsType[*render.ReadError](err); ok {
		// Reading an input failed (a timeout, a throttled API server):
		// retried with backoff, unlike a template's error.
		return stopWith(res.fail(v1alpha1.ReasonInputReadFailed, false, err))
	}
	if overTime(err) {
		// The clock, not the spec, may be to blame (a loaded node):
		// retried with backoff.
		return stopWith(res.fail(v1alpha1.ReasonLimitExceeded, true, err))
	}
	if _, ok := errors.AsType[*readFailure](err); ok {
		// The template may have failed on what it read: a change of an
		// input or of a node's object renders it again (the watch holds
		// what it read); this is the backstop.
		res.record(renderFailure(err), true, err)
		return lookAgain(wait.Jitter(readFailureRetry, 0.2))
	}
	// A retry cannot fix a template error; a spec change triggers a new reconcile.
	return stopWith(reconcile.TerminalError(res.fail(renderFailure(err), true, err)))
}

// readFailureRetry: a graph kind's render that failed after it read inputs
// or live objects is tried again this late, should the watch of what it
// read miss the change that fixes it.
const readFailureRetry = 5 * time.Minute

var errEmptyRender = errors.New("the templates rendered no objects")

// overTime: a render stopped by its time limit.
func overTime(err error) bool {
	limit, ok := errors.AsType[*render.LimitError](err)
	return ok && limit.Limit == "render time"
}

// renderFailure is the reason of a failed render: LimitExceeded when one of
// the render limits stopped it, else RenderFailed.
func renderFailure(err error) string {
	if _, ok := errors.AsType[*render.LimitError](err); ok {
		return v1alpha1.ReasonLimitExceeded
	}
	return v1alpha1.ReasonRenderFailed
}

// renderPlan renders cr with the live state its graph reads: its objects
// from the cache, its inputs from the API server.
func (r *Reconciler) renderPlan(ctx context.Context, cr v1alpha1.Object) (*render.Plan, error) {
	if !r.kind().HasGraph() {
		objs, err := r.renderKind().Render(cr)
		if err != nil {
			return nil, err
		}
		return &render.Plan{Objects: objs}, nil
	}
	nn := client.ObjectKeyFromObject(cr)
	live := &readLog{Snapshot: cachedSnapshot{ctx: ctx, c: r.client, types: r.applier.Types()}}
	inputs := &readLog{
		Snapshot: readSnapshot{ctx: ctx, c: r.inputReader(cr), who: r.inputIdentity(cr), meta: r.inputCache, memo: r.inputMemo},
		watch:    func(read render.Read) { r.inputs.add(nn, read) },
	}
	plan, err := r.renderKind().RenderGraph(cr, render.GraphInput{Live: live, Inputs: inputs})
	// What a failed render read is watched too: a change of it may be the fix.
	r.inputs.set(nn, inputs.reads)
	if err == nil {
		return plan, nil
	}
	if reads := r.failedNodeReads(cr, err, inputs.reads); len(reads) > 0 || live.n > 0 {
		return nil, &readFailure{err: err, inputs: reads}
	}
	return nil, err
}
