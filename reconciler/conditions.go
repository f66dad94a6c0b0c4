package reconciler

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/render"
)

// The status a reconcile writes, computed from what it saw: pure functions
// of the stored status and the result (status.go writes it).

// computeStatus is the status after a reconcile with result res. It is pure:
// everything it needs is in its arguments.
func computeStatus(before *v1alpha1.Status, res *result, policy v1alpha1.DriftPolicy) *v1alpha1.Status {
	if res.waiting != nil {
		return waitingStatus(before, res, policy)
	}
	after := before.DeepCopy()
	setReadyCondition(after, res)
	setProgressConditions(after, res)
	if res.templates != "" {
		after.Templates, after.RenderDigest = res.templates, res.renderDigest
	}
	after.Rollout = rolloutStatus(before, res)
	if res.ok() {
		after.ObservedGeneration = res.generation
		after.Inventory = inventory(res.desired)
		if len(res.graphWaiting) > 0 {
			// The waiting nodes' objects were kept: what prune left stays.
			after.Inventory = mergeInventory(before.Inventory, res.desired, res.pruned)
		}
		after.OwnedFields = res.ownedFields
		setDriftedCondition(after, res, policy, uncheckedObjects(before.Inventory, res))
	} else {
		after.Inventory = mergeInventory(before.Inventory, res.applied, res.pruned)
	}
	if res.rendered {
		// What the render saw done is so whatever the rest of the
		// reconcile did.
		after.Once = onceDone(before.Once, res.once, res.graphWaiting)
	}
	return after
}

// onceDone is status.once after a render: the once nodes it saw done,
// with their digests, and the records of the nodes that wait (not
// rendered) as they were. A node rendered and not done, or no longer in
// the graph, has none.
func onceDone(before, done []v1alpha1.OnceApplied, waiting []render.Waiting) []v1alpha1.OnceApplied {
	after := slices.Clone(done)
	for _, b := range before {
		if slices.ContainsFunc(waiting, func(w render.Waiting) bool { return w.Node == b.Node }) {
			after = append(after, b)
		}
	}
	slices.SortFunc(after, func(a, b v1alpha1.OnceApplied) int { return strings.Compare(a.Node, b.Node) })
	return after
}

// rolloutStatus is status.rollout after the reconcile: the paced rollout
// that reached the resource, until it is Ready.
func rolloutStatus(before *v1alpha1.Status, res *result) *v1alpha1.RolloutStatus {
	switch {
	case res.healthFailure() == nil:
		return nil // Ready: the rollout is through with it
	case res.ok():
		// The gate's word: nil when the rollout does not count the
		// resource (its spec changed since the rollout reached it).
		return res.rollout
	case res.rollout != nil:
		return res.rollout
	case res.generation != before.ObservedGeneration:
		return nil // a failed reconcile of a new spec: out of the rollout
	}
	return before.Rollout.DeepCopy() // as it was
}

// waitingStatus is the status of a resource whose change waits for its
// turn in a paced rollout: what it was, Ready still True (its objects are
// as they were, and healthy), with Reconciling=True saying why stencil has
// not applied the new templates yet. Drift that hold found in the objects
// meanwhile is told as any other; without any, Drifted stays as it was
// (hold has not seen every field: only those stencil still owned when the
// resource began to wait).
func waitingStatus(before *v1alpha1.Status, res *result, policy v1alpha1.DriftPolicy) *v1alpha1.Status {
	after := before.DeepCopy()
	if ready := meta.FindStatusCondition(after.Conditions, v1alpha1.ConditionReady); ready != nil && ready.Status == metav1.ConditionTrue {
		ready.Message = engine.Cut("The objects applied with version "+before.Templates+" of the templates are healthy; version "+
			res.waiting.templates+" changes them and waits for its turn (see the Reconciling condition).", v1alpha1.MaxMessageBytes)
	}
	meta.RemoveStatusCondition(&after.Conditions, v1alpha1.ConditionStalled)
	meta.SetStatusCondition(&after.Conditions, metav1.Condition{Type: v1alpha1.ConditionReconciling, Status: metav1.ConditionTrue,
		Reason: res.waiting.reason, Message: engine.Cut(res.waiting.message, v1alpha1.MaxMessageBytes), ObservedGeneration: res.generation})
	switch {
	case len(res.drift) > 0:
		setDriftedCondition(after, res, policy, nil)
	case res.driftUnknown:
		meta.SetStatusCondition(&after.Conditions, metav1.Condition{Type: v1alpha1.ConditionDrifted, Status: metav1.ConditionUnknown,
			Reason: v1alpha1.ReasonDriftUnknown, ObservedGeneration: res.generation,
			Message: "The objects' field records differ from those of stencil's last apply (status.ownedFields): a field may have changed before stencil began to keep the objects for the rollout. stencil reverts what changes from now on; the rollout's apply, when this resource's turn comes, sets every field."})
	}
	return after
}

func setReadyCondition(s *v1alpha1.Status, res *result) {
	c := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: res.generation,
		Reason: v1alpha1.ReasonReconciled, Message: "All " + strconv.Itoa(len(res.desired)) + " rendered objects are applied and healthy."}
	if f := res.healthFailure(); f != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, f.reason, engine.Cut(failureMessage(s, f), v1alpha1.MaxMessageBytes)
	}
	meta.SetStatusCondition(&s.Conditions, c)
}

// failureMessage says what failed, what stencil did and did not do, and
// what to do.
func failureMessage(s *v1alpha1.Status, f *failure) string {
	switch f.reason {
	case v1alpha1.ReasonRenderFailed:
		if _, ok := errors.AsType[*readFailure](f.err); ok {
			return "Render failed: " + f.err.Error() + ". Nothing was applied or pruned; fix the input, the spec or the template."
		}
		return "Render failed: " + f.err.Error() + ". Nothing was applied or pruned; fix the spec or the template."
	case v1alpha1.ReasonLimitExceeded:
		return "Render stopped: " + f.err.Error() + ". Nothing was applied or pruned; ask less of the templates in the spec, or raise the operator's limit (--render-max-steps, --render-timeout, --render-max-bytes, --render-max-objects)."
	case v1alpha1.ReasonEmptyRender:
		return "The templates rendered no objects, but " + strconv.Itoa(len(s.Inventory)) + " were applied before; stencil did not prune them. Check the spec, or delete the resource to remove them."
	case v1alpha1.ReasonOwnershipConflict, v1alpha1.ReasonImmutableField:
		return f.err.Error() + ". The resource's other objects are applied; nothing was pruned."
	case v1alpha1.ReasonForbidden:
		return f.err.Error() + ". Nothing was applied or pruned; grant it (a Role and RoleBinding in the namespace), and stencil looks again within 30 s."
	case v1alpha1.ReasonRejected:
		return "The API server rejected: " + f.err.Error() + ". A retry cannot fix this: fix the spec or the template. The resource's other objects are applied; nothing was pruned."
	case v1alpha1.ReasonRecreating:
		return "Recreating: stencil " + f.err.Error() + ". Nothing was pruned meanwhile."
	case v1alpha1.ReasonFinalizerFailed:
		return "Adding the cleanup finalizer failed: " + f.err.Error() + ". Nothing was applied or pruned; stencil retries with backoff."
	case v1alpha1.ReasonInputReadFailed:
		return "Reading an input failed: " + f.err.Error() + ". Nothing was applied or pruned; stencil retries with backoff."
	case v1alpha1.ReasonGeneratedValuesFailed:
		return "Keeping the generated values failed: " + f.err.Error() + ". Nothing was applied or pruned; stencil retries with backoff."
	case v1alpha1.ReasonApplyFailed:
		return "Apply failed: " + f.err.Error() + ". Nothing was pruned; stencil retries with backoff."
	case v1alpha1.ReasonPruneFailed:
		return "Prune failed: " + f.err.Error() + ". stencil retries with backoff."
	case v1alpha1.ReasonCleanupFailed:
		return "The resource is being deleted, and deleting its cluster-scoped objects failed: " + f.err.Error() + ". Its finalizer stays until they are gone; stencil retries with backoff."
	case v1alpha1.ReasonDeleting:
		return "The resource is being deleted: " + f.err.Error() + ". It may still wait for other finalizers."
	case v1alpha1.ReasonProgressing, v1alpha1.ReasonHealthCheckFailed, v1alpha1.ReasonWaiting:
		return f.err.Error()
	case v1alpha1.ReasonStatusTemplateFailed:
		if _, ok := errors.AsType[*render.LimitError](f.err); ok {
			return "Status failed: " + f.err.Error() + ". The objects are applied and pruned; the status template's fields are not updated. Raise --status-max-bytes, or make the template write less."
		}
		return "Status failed: " + f.err.Error() + ". The objects are applied; fix the status template."
	}
	return f.err.Error() + ". This is a bug in stencil; it retries with backoff. Please report it with the operator's log."
}

// setProgressConditions sets the conditions kstatus reads: Stalled=True
// when a retry cannot help until someone acts, Reconciling=True when stencil
// retries on its own; neither when the reconcile succeeded.
func setProgressConditions(s *v1alpha1.Status, res *result) {
	f := res.healthFailure()
	if f == nil {
		meta.RemoveStatusCondition(&s.Conditions, v1alpha1.ConditionReconciling)
		meta.RemoveStatusCondition(&s.Conditions, v1alpha1.ConditionStalled)
		return
	}
	c := metav1.Condition{Type: v1alpha1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: f.reason, ObservedGeneration: res.generation,
		Message: engine.Cut(failureMessage(s, f), v1alpha1.MaxMessageBytes)}
	other := v1alpha1.ConditionStalled
	if f.stalled {
		c.Type, other = other, c.Type
	}
	meta.RemoveStatusCondition(&s.Conditions, other)
	meta.SetStatusCondition(&s.Conditions, c) // keeps its lastTransitionTime while it stays True
}

// setDriftedCondition: Drifted is True while any field is held by another
// manager and left as it is (policy Report, or a create-only object), and
// status.drift shows what differs now. When every drift was reverted
// (policy Correct), Drifted stays False and status.drift keeps what was last
// reverted. The unchecked objects (those of a graph's nodes that wait) were
// neither checked nor corrected: status.drift keeps what was last seen of
// them, Drifted stays True when that is drift left as it is, and is Unknown
// otherwise, never False.
func setDriftedCondition(s *v1alpha1.Status, res *result, policy v1alpha1.DriftPolicy, unchecked []v1alpha1.InventoryEntry) {
	c := metav1.Condition{Type: v1alpha1.ConditionDrifted, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonInSync,
		Message: "Every field the templates set has the value they set.", ObservedGeneration: res.generation}
	kept := keptDrift(s.Drift, unchecked)
	drift := append(slices.Clone(res.drift), kept...)
	left := 0
	for _, d := range drift {
		if !d.Reverted {
			left++
		}
	}
	switch {
	case len(res.fights) > 0:
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonFieldFight
		c.Message = res.fights[0].Describe() + "."
		if len(res.fights) > 1 {
			c.Message += " And " + strconv.Itoa(len(res.fights)-1) + " more objects (see status.drift)."
		}
		s.Drift = boundDrift(drift)
	case left > 0:
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonDriftDetected
		c.Message = strconv.Itoa(left) + " objects have fields that another manager changed (see status.drift). stencil leaves them: policy Report, or objects their template creates only (stencil.dev/ssa: IfNotPresent)."
		if policy == v1alpha1.DriftReport {
			c.Message += " Set spec.driftPolicy to Correct to revert them."
		}
		if len(kept) > 0 {
			c.Message += " Of the objects of the graph's nodes that wait, status.drift shows what stencil saw before they began to wait; it checks them again when the nodes render."
		}
		s.Drift = boundDrift(drift)
	case len(unchecked) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, v1alpha1.ReasonDriftNotChecked, notCheckedMessage(res, unchecked)
		s.Drift = boundDrift(drift)
	case policy == v1alpha1.DriftReport:
		s.Drift = nil
	case len(res.drift) > 0:
		c.Reason = v1alpha1.ReasonDriftCorrected
		c.Message = "stencil reverted fields that another manager changed in " + strconv.Itoa(len(res.drift)) + " objects (see status.drift)."
		s.Drift = boundDrift(res.drift)
	default:
		if old := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionDrifted); old != nil && old.Reason == v1alpha1.ReasonDriftCorrected {
			c.Reason, c.Message = old.Reason, old.Message // keep the record of the last correction
		}
	}
	meta.SetStatusCondition(&s.Conditions, c)
}

// notCheckedMessage says that the unchecked objects were neither checked
// nor corrected, and how the applied ones are.
func notCheckedMessage(res *result, unchecked []v1alpha1.InventoryEntry) string {
	msg := "While nodes of the graph wait, stencil neither checks nor corrects the objects they rendered before (" +
		firstFew(len(unchecked), func(i int) string { return unchecked[i].Kind + " " + unchecked[i].Name }, ", ", " ") +
		"); it does when the nodes render again."
	switch {
	case len(res.drift) > 0:
		msg += " It reverted fields that another manager changed in " + strconv.Itoa(len(res.drift)) + " of the objects it applied (see status.drift)."
	case len(res.desired) > 0:
		msg += " The " + strconv.Itoa(len(res.desired)) + " objects it applied have the values their templates set."
	}
	return msg
}

// uncheckedObjects are the objects of the inventory inv that the reconcile
// of res neither applied nor checked: while nodes of a graph wait, the
// objects they rendered before are kept as they are (and nothing is
// pruned).
func uncheckedObjects(inv []v1alpha1.InventoryEntry, res *result) []v1alpha1.InventoryEntry {
	if len(res.graphWaiting) == 0 {
		return nil
	}
	rendered := make(map[v1alpha1.InventoryEntry]bool, len(res.desired))
	for _, d := range res.desired {
		rendered[entryOf(d)] = true
	}
	var out []v1alpha1.InventoryEntry
	for _, e := range inv {
		if !rendered[e] {
			out = append(out, e)
		}
	}
	return out
}

// keptDrift are the entries of drift about the unchecked objects: what was
// last seen of them.
func keptDrift(drift []v1alpha1.ObjectDrift, unchecked []v1alpha1.InventoryEntry) []v1alpha1.ObjectDrift {
	var out []v1alpha1.ObjectDrift
	for _, d := range drift {
		e := v1alpha1.InventoryEntry{APIVersion: d.APIVersion, Kind: d.Kind, Namespace: d.Namespace, Name: d.Name}
		if slices.Contains(unchecked, e) {
			out = append(out, d)
		}
	}
	return out
}

func boundDrift(d []v1alpha1.ObjectDrift) []v1alpha1.ObjectDrift {
	return d[:min(len(d), v1alpha1.MaxDriftObjects)]
}

func inventory(objs []*unstructured.Unstructured) []v1alpha1.InventoryEntry {
	var inv []v1alpha1.InventoryEntry
	for _, o := range objs[:min(len(objs), v1alpha1.MaxInventory)] {
		inv = append(inv, entryOf(o))
	}
	return inv
}

func entryOf(o *unstructured.Unstructured) v1alpha1.InventoryEntry {
	return v1alpha1.InventoryEntry{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
}

// mergeInventory adds what a failed reconcile applied to the inventory, so a
// later prune still finds it, and drops what it pruned.
func mergeInventory(inv []v1alpha1.InventoryEntry, applied []*unstructured.Unstructured, pruned []v1alpha1.InventoryEntry) []v1alpha1.InventoryEntry {
	out := slices.DeleteFunc(slices.Clone(inv), func(e v1alpha1.InventoryEntry) bool { return slices.Contains(pruned, e) })
	for _, o := range applied {
		e := entryOf(o)
		if !slices.Contains(out, e) && len(out) < v1alpha1.MaxInventory {
			out = append(out, e)
		}
	}
	return out
}

// healthy: Ready is True, or Drifted is False.
func healthy(c metav1.Condition) bool {
	return (c.Type == v1alpha1.ConditionReady) == (c.Status == metav1.ConditionTrue)
}

// healthFailure is why the resource is not Ready (nil: it is): the first
// of readyRules that finds a reason.
func (res *result) healthFailure() *failure {
	for _, rule := range readyRules {
		if f := rule(res); f != nil {
			return f
		}
	}
	return nil
}

// readyRules decide, in order, why a resource is not Ready; each is a pure
// rule over what the reconcile saw.
var readyRules = []func(res *result) *failure{
	phaseFailed,      // a phase of the reconcile failed: its reason
	nodesWait,        // nodes of a graph wait: Waiting, or HealthCheckFailed when what they wait for failed
	objectsUnhealthy, // kstatus does not call every applied object current: Progressing, or HealthCheckFailed
}

// phaseFailed is the reconcile's failure.
func phaseFailed(res *result) *failure { return res.failure }

// nodesWait: nodes of a graph kind wait for their turn (Waiting); when what
// a node waits for failed, waiting will not help (HealthCheckFailed,
// Stalled).
func nodesWait(res *result) *failure {
	if len(res.graphWaiting) == 0 {
		return nil
	}
	f := &failure{reason: v1alpha1.ReasonWaiting, err: errors.New(waitMessage(len(res.desired), res.graphWaiting))}
	if slices.ContainsFunc(res.graphWaiting, func(w render.Waiting) bool { return w.Failed }) {
		f.reason, f.stalled = v1alpha1.ReasonHealthCheckFailed, true
	}
	return f
}

// objectsUnhealthy: applied objects that kstatus does not call current yet
// (Progressing, which kstatus expects them to get over), or that it says
// failed (HealthCheckFailed, Stalled).
func objectsUnhealthy(res *result) *failure {
	if len(res.unhealthy) == 0 {
		return nil
	}
	f := &failure{reason: v1alpha1.ReasonProgressing, err: errors.New(healthMessage(len(res.desired), res.unhealthy))}
	if res.unhealthy[0].Failed {
		f.reason, f.stalled = v1alpha1.ReasonHealthCheckFailed, true
	}
	return f
}
