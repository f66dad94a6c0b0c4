package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// rejected: the API server refused the object itself as invalid (422) or
// too large (413): the same render is refused again, whatever the retry.
// Not an address already allocated (a Service's node port or cluster IP,
// which another object may give up), nor a webhook's denial (its own
// rules, which may change): those are retried as any failure.
func rejected(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsRequestEntityTooLargeError(err) {
		return true
	}
	msg := err.Error()
	return apierrors.IsInvalid(err) && !strings.Contains(msg, "already allocated") && !strings.Contains(msg, "admission webhook")
}

// exists: a create-first apply of d was refused because d exists: a
// conflict that names d (a quota's admission also answers with a conflict,
// naming the quota).
func exists(err error, d *unstructured.Unstructured) bool {
	var status apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	return details != nil && details.Name == d.GetName() && details.Group == d.GroupVersionKind().Group
}

// refusesVersionOnCreate: the API server takes no version on a create (some
// older ones did so for Services, kubernetes#106745, and said so).
func refusesVersionOnCreate(err error) bool {
	return apierrors.IsInternalError(err) && strings.Contains(err.Error(), "resourceVersion should not be set")
}

// write applies body, the form of d that sendable made, and returns the
// API server's answer. It tells a refusal that a read before it explains
// (ErrChangedWhileRead, ErrAdoptionRaced), and notes in out when another
// writer changed the object while the apply was in flight.
func (a *Applier) write(ctx context.Context, d, body *unstructured.Unstructured, v verdict, leftOut *fieldpath.Set, out *ApplyOutcome) (client.Object, error) {
	key := KeyOf(d)
	a.writes.Begin(key)
	live, err := a.applyOne(ctx, body, false, leftOut)
	if others := a.writes.endAwaited(key, live, v.cachedVersion(), d.GetAnnotations()[v1alpha1.AnnotationOwner]); others {
		out.OthersWrote = true
	}
	if err != nil && v.decision == adopt && apierrors.IsConflict(err) {
		return nil, fmt.Errorf("%w: %w", ErrAdoptionRaced, err)
	}
	if err != nil && (v.decision == create && exists(err, d) || v.resourceVersion != "" && apierrors.IsConflict(err)) {
		return nil, fmt.Errorf("%w: %w", ErrChangedWhileRead, err)
	}
	if err != nil {
		return nil, err
	}
	if v.decision == create || v.resourceVersion != "" { // only a read-then-apply can follow a refusal
		a.refused.Delete(IDOf(d))
	}
	return live, nil
}

// ErrChangedWhileRead says that an object that stencil read before
// applying it (it was not in the cache) changed, or was created, after the
// read, and the API server refused the apply; the next reconcile looks at
// it again.
var ErrChangedWhileRead = errors.New("the object changed while stencil read it")

// ErrAdoptionRaced says that an object being adopted changed after
// stencil read it (its adopt annotation withdrawn, say), and the API
// server refused the apply; the next reconcile looks at it again.
var ErrAdoptionRaced = errors.New("the object changed while stencil adopted it")

// applyOne server-side-applies d with force, or dry-runs it, records the
// fields our manager owns afterwards (and leftOut, the fields left out for
// other managers) as d's baseline, and returns the API server's answer: the
// whole object for types cached whole, else only its metadata (the API
// server sends no more, and there is less to decode).
func (a *Applier) applyOne(ctx context.Context, d *unstructured.Unstructured, dryRun bool, leftOut *fieldpath.Set) (client.Object, error) {
	body, err := d.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	}
	live := a.types.NewObject(d.GroupVersionKind())
	live.SetNamespace(d.GetNamespace())
	live.SetName(d.GetName())
	opts := []client.PatchOption{client.FieldOwner(FieldManager), client.ForceOwnership}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := writer(ctx, a.client).Patch(ctx, live, client.RawPatch(types.ApplyPatchType, body), opts...); err != nil {
		return nil, fmt.Errorf("applying %s %s: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	}
	b := baseline{hash: d.GetAnnotations()[v1alpha1.AnnotationDesiredHash], leftOut: leftOut}
	if !dryRun {
		b.resourceVersion, b.appliedAt = ResourceVersion(live), time.Now()
	}
	b.owned = OwnedRecord(live.GetManagedFields(), FieldManager)
	a.baselines.Store(KeyOf(d), b)
	return live, nil
}
