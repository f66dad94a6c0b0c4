package reconciler

import (
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/render"
)

// result is what one reconcile saw and did; status is computed from it.
type result struct {
	generation int64
	desired    []*unstructured.Unstructured
	applied    []*unstructured.Unstructured
	live       map[engine.ObjectID]client.Object
	// othersWrote: another writer changed an object (or the custom
	// resource) while we wrote it.
	othersWrote bool
	pruned      []v1alpha1.InventoryEntry
	drift       []v1alpha1.ObjectDrift
	// failure is why the phase that stopped the reconcile failed (from its
	// outcome, recorded by the runner alone); nil when none failed.
	failure *failure
	// kindStatus holds the fields of the kind's status template.
	kindStatus map[string]any
	// unhealthy are the applied objects that kstatus does not call
	// current yet, failed ones first.
	unhealthy []engine.ObjectHealth
	// paced: a status write that only told of health was put off until
	// this much later (see statusPace).
	paced time.Duration
	// maps are the live objects of types cached whole that this reconcile
	// read, by engine.ObjectID, as maps (nil: not in the cache).
	maps map[engine.ObjectID]map[string]any
	// fights are the corrections that wait because another writer keeps
	// changing the fields back.
	fights []engine.DeferredCorrection
	// templates and renderDigest: the version of the templates and the
	// render this reconcile applied in full (empty otherwise).
	templates, renderDigest string
	// ownedFields is the digest of the applied objects' baselines (see
	// restoreBaselines); empty when one is not known.
	ownedFields string
	// rollout: a paced rollout of new templates reached the resource now.
	rollout *v1alpha1.RolloutStatus
	// driftUnknown: the resource waits for the rollout, and what its
	// objects' field records say differs from status.ownedFields: fields
	// may have drifted before stencil began to keep them (see hold).
	driftUnknown bool
	// waiting: the change the new templates bring waits for its turn; the
	// reconcile applied nothing.
	waiting *pending
	// graphWaiting are the nodes of a graph kind that this render did not
	// render: their turn has not come.
	graphWaiting []render.Waiting
	// rendered: the render succeeded (once and done say what it saw).
	rendered bool
	// once are the nodes declared once that the render saw done, with
	// their objects' digest (status.once); done are the objects of such
	// nodes that are gone since, not made again.
	once []v1alpha1.OnceApplied
	done []*unstructured.Unstructured
}

// pending is why a resource waits for a paced rollout.
type pending struct {
	reason, message, templates string
}

// failure is why a reconcile did not reach the desired state.
type failure struct {
	// reason is the condition reason (v1alpha1.Reason*).
	reason string
	err    error
	// stalled: retrying cannot help until someone changes the spec, the
	// templates or the object in the way (kstatus Stalled).
	stalled bool
}

// and is f with another failure of the same phase added (f nil: that one
// alone): every object a phase had to leave is told, and one that a retry
// cannot fix makes the whole Stalled. It records nothing: a phase returns
// its failure in its outcome (failed), and the runner records it.
func (f *failure) and(reason string, stalled bool, err error) *failure {
	if f == nil {
		return &failure{reason: reason, err: err, stalled: stalled}
	}
	return &failure{reason: f.reason, err: errors.Join(f.err, err), stalled: f.stalled || stalled}
}

// ok is true when every phase succeeded.
func (res *result) ok() bool {
	return res.failure == nil
}
