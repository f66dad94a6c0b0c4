package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
)

// writeStatus computes the status from what this reconcile saw, keeps the
// unhealthy-resources gauge up to date and, when the status differs from
// the stored one, patches /status with what changed (a JSON merge patch,
// answered with metadata only) under its own field manager, and records an
// event per condition that changed. The kind's own fields come from its
// status template; after a failure they stay as they were.
func (r *Reconciler) writeStatus(ctx context.Context, cr v1alpha1.Object, current map[string]any, res *result) error {
	before := cr.StencilStatus()
	after := computeStatus(before, res, cr.StencilDriftPolicy())
	unhealthy.set(r.kind().GroupVersionKind().Kind, client.ObjectKeyFromObject(cr), after.Conditions)
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(after)
	if err != nil {
		return fmt.Errorf("encoding status: %w", err)
	}
	kindFields := res.kindStatus
	if !res.ok() || res.waiting != nil {
		kindFields = current
	}
	for key, value := range kindFields {
		if _, common := fields[key]; !common && !v1alpha1.IsSharedStatusField(key) {
			fields[key] = value
		}
	}
	status, err := r.normalize(fields)
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(current, status) {
		return nil
	}
	key := client.ObjectKeyFromObject(cr)
	if res.paced = r.healthPace(key, before, after); res.paced > 0 {
		return nil
	}
	patch, err := statusPatch(current, status)
	if err != nil {
		return err
	}
	// The answer we need is the new resourceVersion: metadata only.
	written := &metav1.PartialObjectMetadata{}
	written.SetGroupVersionKind(r.kind().GroupVersionKind())
	written.SetNamespace(cr.GetNamespace())
	written.SetName(cr.GetName())
	r.statusWrites.Begin(key)
	err = r.client.Status().Patch(ctx, written, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(StatusFieldManager))
	if err != nil {
		r.statusWrites.End(key, nil)
		return fmt.Errorf("writing status: %w", client.IgnoreNotFound(err))
	}
	r.memory.update(key, func(m *remembered) {
		m.written = &writtenStatus{resourceVersion: engine.ResourceVersion(written), status: status, at: time.Now()}
	})
	others, seen := r.statusWrites.End(key, written)
	if others {
		res.othersWrote = true
	}
	if seen {
		r.statusCached(key, engine.ResourceVersion(written))
	}
	r.recordTransitions(cr, before.Conditions, after.Conditions)
	return nil
}

// statusPatch is the JSON merge patch from status before to status after:
// changed fields, and null for removed ones.
func statusPatch(before, after map[string]any) ([]byte, error) {
	from, err := json.Marshal(map[string]any{"status": before})
	if err != nil {
		return nil, fmt.Errorf("encoding status: %w", err)
	}
	to, err := json.Marshal(map[string]any{"status": after})
	if err != nil {
		return nil, fmt.Errorf("encoding status: %w", err)
	}
	patch, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil {
		return nil, fmt.Errorf("computing the status patch: %w", err)
	}
	return patch, nil
}

// normalize passes a status through the kind's Go type, so that it compares
// equal to the stored one however the template wrote its numbers, zero
// values or empty lists.
func (r *Reconciler) normalize(status map[string]any) (map[string]any, error) {
	obj := r.kind().New()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"status": status}, obj); err != nil {
		return nil, fmt.Errorf("status does not fit %s's status type: %w", r.kind().GroupVersionKind().Kind, err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding status: %w", err)
	}
	out, _ := u["status"].(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	return out, nil
}

// writtenStatus is the status this process last wrote for a custom
// resource, until the cache has caught up with it; then only its version
// and when it was written.
type writtenStatus struct {
	resourceVersion uint64
	status          map[string]any
	at              time.Time
}

// statusCached records that the cache holds our status write of version rv:
// from then on only the version is kept (see notOwnStatusWrite). It
// reports whether rv is the last write remembered; one check and one
// change under the memory's lock, so that a newer write, or a resource
// forgotten meanwhile, is left as it is.
func (r *Reconciler) statusCached(key client.ObjectKey, rv uint64) bool {
	cached := false
	r.memory.updateKnown(key, func(m *remembered) {
		if m.written == nil || m.written.resourceVersion != rv {
			return // a newer write, or none: left as it is
		}
		m.written = &writtenStatus{resourceVersion: rv, at: m.written.at}
		cached = true
	})
	return cached
}

// statusPace is the least time between two status writes of a resource
// that only tell how its objects' health goes: a Deployment that an
// autoscaler scales every 100 ms would otherwise make its resource's Ready
// flip as fast.
const statusPace = time.Second

// healthPace is how long to put off a status write from before to after
// when it only tells of health (Ready was or becomes Progressing or
// HealthCheckFailed, and nothing but Ready, Reconciling and Stalled
// changes) and the last write was less than statusPace ago; else 0. The
// write then happens at the next reconcile, with what is true by then: the
// health of the objects and the kind's status fields are read anew, so
// nothing is lost by waiting (a drift report would be: it is never put off).
func (r *Reconciler) healthPace(key client.ObjectKey, before, after *v1alpha1.Status) time.Duration {
	if sameWait(before, after) {
		// The same nodes of a graph wait; only what they wait for moved.
		return r.paceLeft(key)
	}
	if !healthReason(before) && !healthReason(after) || !applied(before) || !applied(after) ||
		!equality.Semantic.DeepEqual(withoutProgress(before), withoutProgress(after)) {
		return 0
	}
	return r.paceLeft(key)
}

// paceLeft is how long from now until statusPace has passed since the
// last status write of key (0: it has, or there was none).
func (r *Reconciler) paceLeft(key client.ObjectKey) time.Duration {
	w := r.memory.get(key).written
	if w == nil {
		return 0
	}
	return max(statusPace-time.Since(w.at), 0)
}

// sameWait: before and after are both Waiting on the same nodes of a
// graph, and differ in nothing but Ready, Reconciling and Stalled.
func sameWait(before, after *v1alpha1.Status) bool {
	b := waitingNodes(meta.FindStatusCondition(before.Conditions, v1alpha1.ConditionReady))
	return b != "" && b == waitingNodes(meta.FindStatusCondition(after.Conditions, v1alpha1.ConditionReady)) &&
		equality.Semantic.DeepEqual(withoutProgress(before), withoutProgress(after))
}

// healthReason: Ready says the objects are applied and not all healthy.
func healthReason(s *v1alpha1.Status) bool {
	c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady)
	return c != nil && (c.Reason == v1alpha1.ReasonProgressing || c.Reason == v1alpha1.ReasonHealthCheckFailed)
}

// progressingReason: the objects are on their way, as far as stencil can
// tell (not healthy yet, or a graph's nodes wait for them).
func progressingReason(reason string) bool {
	return reason == v1alpha1.ReasonProgressing || reason == v1alpha1.ReasonWaiting
}

// withoutProgress is s without the conditions that tell of health.
func withoutProgress(s *v1alpha1.Status) *v1alpha1.Status {
	out := s.DeepCopy()
	for _, typ := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionReconciling, v1alpha1.ConditionStalled} {
		meta.RemoveStatusCondition(&out.Conditions, typ)
	}
	return out
}

// applied: Ready says every object is applied (healthy or not).
func applied(s *v1alpha1.Status) bool {
	c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady)
	return c != nil && (c.Status == metav1.ConditionTrue || healthReason(s))
}

// currentStatus is cr's status as stored, normalised: from cr, or, when the
// cache has not caught up with our last status write yet, what we wrote
// (without it a reconcile that reads a stale custom resource would write the
// same status again). It also sets cr's shared status to it.
func (r *Reconciler) currentStatus(cr v1alpha1.Object) (map[string]any, error) {
	key := client.ObjectKeyFromObject(cr)
	if w := r.memory.get(key).written; w != nil {
		if w.status != nil && engine.ResourceVersion(cr) >= w.resourceVersion {
			r.statusCached(key, w.resourceVersion) // a key is never reconciled twice at once
		}
		if engine.ResourceVersion(cr) < w.resourceVersion && w.status != nil {
			status := runtime.DeepCopyJSON(w.status)
			shared := v1alpha1.Status{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(status, &shared); err != nil {
				return nil, fmt.Errorf("decoding status: %w", err)
			}
			*cr.StencilStatus() = shared
			return status, nil
		}
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cr)
	if err != nil {
		return nil, fmt.Errorf("encoding status: %w", err)
	}
	if status, ok := u["status"].(map[string]any); ok {
		return status, nil // a typed object's encoding is already normalised
	}
	return r.normalize(nil)
}

// recordTransitions emits one event per condition whose status or reason
// changed; the event reason is the condition reason. Reconciling and Stalled
// repeat what Ready says, so they make no events. A condition that starts
// out healthy (Ready on the first reconcile, no drift found) is no news: the
// conditions say so, and an event per new resource would cost the API server
// a write each. Nor are objects that progress towards health, or get there;
// but progressing after a failure is (a Normal event: the failure is over).
func (r *Reconciler) recordTransitions(cr v1alpha1.Object, before, after []metav1.Condition) {
	for _, c := range after {
		if c.Type != v1alpha1.ConditionReady && c.Type != v1alpha1.ConditionDrifted {
			continue
		}
		old := meta.FindStatusCondition(before, c.Type)
		if old != nil && old.Status == c.Status && old.Reason == c.Reason {
			continue
		}
		if old == nil && healthy(c) && c.Reason != v1alpha1.ReasonDriftCorrected || notCheckedOnly(old, c) {
			continue
		}
		progressing := progressingReason(c.Reason)
		if progressing && (old == nil || old.Status == metav1.ConditionTrue || progressingReason(old.Reason)) || old != nil && progressingReason(old.Reason) && healthy(c) {
			continue // objects on their way to healthy, or there: the normal course, not news
		}
		eventType := corev1.EventTypeNormal
		if !healthy(c) && !progressing { // progressing after a failure: the failure is over
			eventType = corev1.EventTypeWarning
		}
		r.recorder.Eventf(cr, nil, eventType, c.Reason, "Reconcile", "%s", engine.Cut(c.Message, maxEventNote))
	}
}

// notCheckedOnly: Drifted goes to or from DriftNotChecked, with no drift on
// either side (nodes of a graph begin or stop waiting): the normal course
// of a graph, not news.
func notCheckedOnly(old *metav1.Condition, c metav1.Condition) bool {
	if c.Type != v1alpha1.ConditionDrifted || c.Status == metav1.ConditionTrue || old != nil && old.Status == metav1.ConditionTrue {
		return false
	}
	return c.Reason == v1alpha1.ReasonDriftNotChecked || old != nil && old.Reason == v1alpha1.ReasonDriftNotChecked
}

// maxEventNote is the API server's limit on an event's note.
const maxEventNote = 1024

// waitingNodes are the nodes a Waiting condition's message names, "" for
// another condition: a write that only changes what they wait for (a
// StatefulSet's ready count) is paced like health; one that changes which
// nodes wait is written at once.
func waitingNodes(c *metav1.Condition) string {
	if c == nil || c.Reason != v1alpha1.ReasonWaiting {
		return ""
	}
	_, rest, _ := strings.Cut(c.Message, " of the graph's nodes wait (")
	nodes, _, _ := strings.Cut(rest, "): ")
	return nodes
}
