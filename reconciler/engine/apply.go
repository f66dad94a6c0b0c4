package engine

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// This file is the spine of an apply: read it top to bottom. For each
// desired object it asks decide.go what to do (check), fields.go what to
// send (sendable) and write.go to write it; each step fills in the
// object's Change (outcome.go).

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

// refusedApply handles an apply of d that failed with err: an immutable
// field recreates d when its template allows it; an object the API server
// rejected as invalid is reported, and the others applied still. Any other
// error stops the apply.
func (a *Applier) refusedApply(ctx context.Context, d *unstructured.Unstructured, err error, out *ApplyOutcome) error {
	if fields := immutableFields(err); len(fields) > 0 {
		return a.recreate(ctx, d, fields, err, out)
	}
	if rejected(err) {
		c := out.of(d)
		c.Action, c.Err = Refused, err
		return nil
	}
	return err
}

// applyObject checks d and applies it when it needs it, adding to out.
func (a *Applier) applyObject(ctx context.Context, d *unstructured.Unstructured, report bool, out *ApplyOutcome) error {
	v, err := a.check(ctx, d)
	if v.firstApply {
		defer a.firstApplies.end(IDOf(d))
	}
	if err != nil {
		return err
	}
	if v.decision == create {
		next, err := a.createFirstApply(ctx, d, v, report, out)
		if next == nil || err != nil {
			return err
		}
		v = *next
	}
	return a.applyChecked(ctx, d, v, report, out)
}

// createFirstApply applies d, which the cache does not hold, only if it
// does not exist. If it exists, or the apply failed for another reason
// (which an existing object, someone else's, may also cause: admission sees
// it), one read tells whose it is, and the verdict it returns is checked as
// any other: next, nil when there is nothing more to do (applied, or
// failed with the error).
func (a *Applier) createFirstApply(ctx context.Context, d *unstructured.Unstructured, v verdict, report bool, out *ApplyOutcome) (next *verdict, err error) {
	applyErr := a.applyStale(ctx, d, v, report, out)
	if applyErr == nil {
		return nil, nil
	}
	refused := errors.Is(applyErr, ErrChangedWhileRead) // it exists (write says so of a create)
	if refused {
		a.refused.Store(IDOf(d), struct{}{})
	}
	if refusesVersionOnCreate(applyErr) {
		a.noVersionOnCreate.Store(d.GroupVersionKind(), struct{}{})
		refused = true
	}
	v, err = a.checkUnseen(ctx, d)
	switch {
	case err != nil:
		return nil, err
	case !refused && v.decision != leave:
		return nil, applyErr
	}
	return &v, nil
}

// applyChecked acts on d's verdict: it leaves a conflict alone, reports and
// corrects drift, and applies d when it is stale.
func (a *Applier) applyChecked(ctx context.Context, d *unstructured.Unstructured, v verdict, report bool, out *ApplyOutcome) error {
	if v.decision == leave {
		c := out.of(d)
		c.Action, c.Conflict = Skipped, v.conflict
		return nil //nolint:nilerr // a conflict is reported in status, and the other objects are still applied
	}
	stale, deferred, err := a.onDrift(ctx, d, v, report, out)
	switch {
	case err != nil:
		return err
	case deferred:
		out.change(d, Deferred)
	case v.decision == wait:
		out.change(d, Waiting)
	case v.decision == relabeled:
		out.change(d, Configured)
	case !stale:
		out.change(d, Unchanged)
	default:
		return a.applyStale(ctx, d, v, report, out)
	}
	return nil
}

// applyStale applies d, in three steps read in order: the body to send
// (sendable), the write, and what the apply did, with the drift in the
// fields it left out for other managers (policy Report).
func (a *Applier) applyStale(ctx context.Context, d *unstructured.Unstructured, v verdict, report bool, out *ApplyOutcome) error {
	body, leftOut, err := sendable(d, v, report)
	if err != nil {
		return err
	}
	live, err := a.write(ctx, d, body, v, leftOut, out)
	if err != nil {
		return err
	}
	out.applied(d, v, live, a.types.Whole[d.GroupVersionKind()])
	return a.reportLeftOut(ctx, d, leftOut, out)
}
