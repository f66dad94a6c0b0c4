package engine

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// This file is the spine of an apply: read it top to bottom. For each
// desired object, applyObject takes the steps in order: decide what to do
// (decide.go), settle what needs no write and the drift (drift.go), make
// the body to send (body.go), write it (write.go), and record what the
// apply did (outcome.go). A create-first apply that fails takes the steps
// once more, deciding from one read. A refusal ends in immutable.go.

// Apply brings every desired object that is this resource's to its desired
// state and reports what it applied, the drift it found, the objects it
// left alone because they are someone else's, those whose apply would
// change an immutable field, and those the API server rejected as invalid.
// It stops at any other error. After conflicts, immutable fields,
// rejections or an error the caller must not prune.
func (a *Applier) Apply(ctx context.Context, cr v1alpha1.Object, desired []*unstructured.Unstructured) (ApplyOutcome, error) {
	var out ApplyOutcome
	report := cr.StencilDriftPolicy() == v1alpha1.DriftReport
	a.restoreBaselines(ctx, cr.StencilStatus().OwnedFields, desired)
	for _, d := range desired {
		err := a.applyObject(ctx, d, report || CreateOnly(d), &out)
		if err == nil {
			continue
		}
		if err := a.refusedApply(ctx, d, err, &out); err != nil {
			out.failed(d, err)
			return out, err
		}
	}
	return out, nil
}

// applyObject brings d to its desired state, adding to out. It turns at
// most twice: the first turn decides from the cache; a create-first apply
// that fails there (d exists, or admission refused it) takes a second
// turn, which decides from one read of the API server (check, given the
// failure).
func (a *Applier) applyObject(ctx context.Context, d *unstructured.Unstructured, report bool, out *ApplyOutcome) error {
	var createErr error
	firstApply := false // this resource's first apply of d is under way (FirstApplies)
	defer func() {
		if firstApply {
			a.firstApplies.end(IDOf(d))
		}
	}()
	for {
		v, err := a.check(ctx, d, createErr)
		firstApply = firstApply || v.firstApply
		if err != nil {
			return err
		}
		stale, err := a.settle(ctx, d, v, report, out)
		if err != nil || !stale {
			return err
		}
		body, leftOut, err := sendable(d, v, report)
		if err != nil {
			return err
		}
		live, err := a.write(ctx, d, body, v, leftOut, out)
		if err != nil && v.decision == create && createErr == nil {
			createErr = err // the second turn
			continue
		}
		if err != nil {
			return err
		}
		out.applied(d, v, live, a.types.Whole[d.GroupVersionKind()])
		return a.reportLeftOut(ctx, d, leftOut, out)
	}
}
