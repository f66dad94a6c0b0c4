package reconciler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/render"
)

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
	gen, kept, err := r.generatedFor(ctx, cr)
	if err != nil {
		return nil, err
	}
	plan, err := r.renderWith(ctx, cr, gen)
	if err != nil {
		if gen != nil && gen.Made() > 0 {
			// What a failed render made is kept too (never applied): the
			// next one goes on from there, rather than make it again.
			_ = r.keepGenerated(ctx, cr, gen, kept)
		}
		return nil, err
	}
	if err := r.keepGenerated(ctx, cr, gen, kept); err != nil {
		return nil, err
	}
	return plan, nil
}

// renderWith renders cr with the generated values gen (nil: the kind
// generates none) and, a graph kind, the live state it reads.
func (r *Reconciler) renderWith(ctx context.Context, cr v1alpha1.Object, gen *render.Generated) (*render.Plan, error) {
	if r.kind().Graph() == nil {
		// A chart kind's lookup reads the resource's own objects.
		live := cachedSnapshot{ctx: ctx, c: r.client, types: r.applier.Types()}
		return r.renderKind().RenderGraph(cr, render.GraphInput{Live: live, Generated: gen})
	}
	nn := client.ObjectKeyFromObject(cr)
	live := &readLog{Snapshot: cachedSnapshot{ctx: ctx, c: r.client, types: r.applier.Types()}}
	inputs := &readLog{
		Snapshot: readSnapshot{ctx: ctx, c: r.inputReader(cr), who: r.inputIdentity(cr), meta: r.inputCache, memo: r.inputMemo},
		watch:    func(read render.Read) { r.inputs.add(nn, read) },
	}
	plan, err := r.renderKind().RenderGraph(cr, render.GraphInput{Live: live, Inputs: inputs, Generated: gen})
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

// renderDigest is a digest of a render: every object's identity and desired
// hash, in order.
func renderDigest(objs []*unstructured.Unstructured) string {
	h := sha256.New()
	for _, o := range objs {
		hash := o.GetAnnotations()[v1alpha1.AnnotationDesiredHash]
		if engine.CreateOnly(o) {
			hash = "" // never applied again: its render (a generated value) may differ every time
		}
		_, _ = fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\n", o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName(), hash)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:12]
}
