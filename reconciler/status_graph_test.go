package reconciler

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/render"
)

// TestDriftWhileNodesWait: while nodes of a graph wait, the objects they
// rendered before are neither checked nor corrected. status.drift keeps
// what was last seen of them, Drifted stays True when that was drift left
// as it is, and is Unknown otherwise: never False with "every field has
// the value they set".
func TestDriftWhileNodesWait(t *testing.T) {
	applied := configMap("first") // rendered now: checked
	entry := func(name string) v1alpha1.InventoryEntry {
		return v1alpha1.InventoryEntry{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: name}
	}
	drift := func(name string, reverted bool) v1alpha1.ObjectDrift {
		return v1alpha1.ObjectDrift{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: name,
			Fields: []v1alpha1.FieldDrift{{Path: ".data.x"}}, Reverted: reverted}
	}
	// late's object, rendered before its node began to wait.
	both := []v1alpha1.InventoryEntry{entry("first"), entry("late")}
	waiting := []render.Waiting{{Node: "late", Stage: 1, For: "gate: ConfigMap gate: readyWhen[0]"}}
	tests := []struct {
		name   string
		policy v1alpha1.DriftPolicy
		// before is the status as stored: the inventory and drift of the
		// last reconcile.
		inventory []v1alpha1.InventoryEntry
		drift     []v1alpha1.ObjectDrift
		// now is the drift this reconcile's apply found; waits, whether
		// nodes of the graph wait.
		now   []v1alpha1.ObjectDrift
		waits bool
		// wantStatus and wantReason are Drifted's; wantDrift names the
		// objects status.drift holds, in order.
		wantStatus metav1.ConditionStatus
		wantReason string
		wantDrift  []string
	}{
		{name: "report keeps the drift it reported of a waiting node's object", policy: v1alpha1.DriftReport,
			inventory: both, drift: []v1alpha1.ObjectDrift{drift("late", false)}, waits: true,
			wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.ReasonDriftDetected, wantDrift: []string{"late"}},
		{name: "correct keeps the drift it left (create only) of a waiting node's object", policy: v1alpha1.DriftCorrect,
			inventory: both, drift: []v1alpha1.ObjectDrift{drift("late", false)}, waits: true,
			wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.ReasonDriftDetected, wantDrift: []string{"late"}},
		{name: "new drift of an applied object beside the kept one", policy: v1alpha1.DriftReport,
			inventory: both, drift: []v1alpha1.ObjectDrift{drift("late", false)}, now: []v1alpha1.ObjectDrift{drift("first", false)}, waits: true,
			wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.ReasonDriftDetected, wantDrift: []string{"first", "late"}},
		{name: "nothing seen of the waiting objects: unknown, not in sync", policy: v1alpha1.DriftCorrect,
			inventory: both, waits: true,
			wantStatus: metav1.ConditionUnknown, wantReason: v1alpha1.ReasonDriftNotChecked},
		{name: "report, nothing seen: unknown, not in sync", policy: v1alpha1.DriftReport,
			inventory: both, waits: true,
			wantStatus: metav1.ConditionUnknown, wantReason: v1alpha1.ReasonDriftNotChecked},
		{name: "drift reported of an applied object, gone now: dropped", policy: v1alpha1.DriftReport,
			inventory: both, drift: []v1alpha1.ObjectDrift{drift("first", false)}, waits: true,
			wantStatus: metav1.ConditionUnknown, wantReason: v1alpha1.ReasonDriftNotChecked},
		{name: "reverted drift of an applied object while nodes wait", policy: v1alpha1.DriftCorrect,
			inventory: both, now: []v1alpha1.ObjectDrift{drift("first", true)}, waits: true,
			wantStatus: metav1.ConditionUnknown, wantReason: v1alpha1.ReasonDriftNotChecked, wantDrift: []string{"first"}},
		{name: "the record of a waiting object's last correction is kept", policy: v1alpha1.DriftCorrect,
			inventory: both, drift: []v1alpha1.ObjectDrift{drift("late", true)}, waits: true,
			wantStatus: metav1.ConditionUnknown, wantReason: v1alpha1.ReasonDriftNotChecked, wantDrift: []string{"late"}},
		{name: "waiting nodes without objects yet: every object checked", policy: v1alpha1.DriftReport,
			inventory: []v1alpha1.InventoryEntry{entry("first")}, waits: true,
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonInSync},
		{name: "no node waits: report drops the drift of an object no longer rendered", policy: v1alpha1.DriftReport,
			inventory: both, drift: []v1alpha1.ObjectDrift{drift("late", false)},
			wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonInSync},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := &v1alpha1.Status{Inventory: tt.inventory, Drift: tt.drift}
			res := &result{generation: 2, desired: objs(applied), drift: tt.now}
			if tt.waits {
				res.graphWaiting = waiting
			}
			got := computeStatus(before, res, tt.policy)
			c := meta.FindStatusCondition(got.Conditions, v1alpha1.ConditionDrifted)
			if c == nil || c.Status != tt.wantStatus || c.Reason != tt.wantReason {
				t.Fatalf("Drifted = %+v, want %s %s", c, tt.wantStatus, tt.wantReason)
			}
			if c.Status != metav1.ConditionFalse && strings.Contains(c.Message, "Every field") {
				t.Errorf("Drifted %s says %q", c.Status, c.Message)
			}
			if c.Reason == v1alpha1.ReasonDriftNotChecked && !strings.Contains(c.Message, "ConfigMap late") {
				t.Errorf("Drifted's message %q does not name the object it did not check", c.Message)
			}
			var names []string
			for _, d := range got.Drift {
				names = append(names, d.Name)
			}
			if !slices.Equal(names, tt.wantDrift) {
				t.Errorf("status.drift holds %q, want %q", names, tt.wantDrift)
			}
		})
	}
}

func configMap(name string) *unstructured.Unstructured {
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetNamespace("ns")
	cm.SetName(name)
	return cm
}
