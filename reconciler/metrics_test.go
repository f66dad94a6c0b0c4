package reconciler

import (
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	stenciltestutil "github.com/stencil-operator/stencil/internal/testing/testutil"
)

func TestUnhealthyResources(t *testing.T) {
	ready := func(s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.ConditionReady, Status: s}
	}
	drifted := func(s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.ConditionDrifted, Status: s}
	}
	a, b := types.NamespacedName{Namespace: "n", Name: "a"}, types.NamespacedName{Namespace: "n", Name: "b"}
	tests := []struct {
		name        string
		change      func(u *unhealthyResources)
		notReady    int
		driftedOnes int
	}{
		{"tracked, none yet", func(*unhealthyResources) {}, 0, 0},
		{"one not ready", func(u *unhealthyResources) {
			u.set("Web", a, []metav1.Condition{ready(metav1.ConditionFalse)})
		}, 1, 0},
		{"one drifted, one not ready", func(u *unhealthyResources) {
			u.set("Web", a, []metav1.Condition{ready(metav1.ConditionFalse)})
			u.set("Web", b, []metav1.Condition{ready(metav1.ConditionTrue), drifted(metav1.ConditionTrue)})
		}, 1, 1},
		{"recovered", func(u *unhealthyResources) {
			u.set("Web", a, []metav1.Condition{ready(metav1.ConditionFalse)})
			u.set("Web", a, []metav1.Condition{ready(metav1.ConditionTrue), drifted(metav1.ConditionFalse)})
		}, 0, 0},
		{"set twice counts once", func(u *unhealthyResources) {
			u.set("Web", a, []metav1.Condition{drifted(metav1.ConditionTrue)})
			u.set("Web", a, []metav1.Condition{drifted(metav1.ConditionTrue)})
		}, 0, 1},
		{"deleted", func(u *unhealthyResources) {
			u.set("Web", a, []metav1.Condition{ready(metav1.ConditionFalse), drifted(metav1.ConditionTrue)})
			u.forget("Web", a)
		}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUnhealthyResources()
			u.track("Web")
			tt.change(u)
			want := `
# HELP stencil_unhealthy_resources Custom resources whose last reconcile left Ready False, or Drifted True.
# TYPE stencil_unhealthy_resources gauge
stencil_unhealthy_resources{condition="Drifted",kind="Web"} ` + strconv.Itoa(tt.driftedOnes) + `
stencil_unhealthy_resources{condition="Ready",kind="Web"} ` + strconv.Itoa(tt.notReady) + `
`
			if err := testutil.CollectAndCompare(u, strings.NewReader(want)); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestCountObjects(t *testing.T) {
	tests := []struct {
		name         string
		drift        []v1alpha1.ObjectDrift
		wantReverted float64
	}{
		{"Reverted", []v1alpha1.ObjectDrift{{Kind: "Deployment", Name: "web", Reverted: true}}, 1},
		{"Left", []v1alpha1.ObjectDrift{{Kind: "Deployment", Name: "web"}}, 0}, // found, left alone
		{"Both", []v1alpha1.ObjectDrift{{Kind: "Deployment", Name: "web", Reverted: true}, {Kind: "ConfigMap", Name: "web"}}, 1},
	}
	for _, tt := range tests {
		kind := "Count" + tt.name
		countObjects(kind, &result{applied: objs(nil, nil), pruned: []v1alpha1.InventoryEntry{{Kind: "Service", Name: "web"}}, drift: tt.drift})
		got := []float64{
			stenciltestutil.Metric(t, "stencil_applied_objects_total", map[string]string{"kind": kind}),
			stenciltestutil.Metric(t, "stencil_pruned_objects_total", map[string]string{"kind": kind}),
			stenciltestutil.Metric(t, "stencil_drift_reverted_objects_total", map[string]string{"kind": kind}),
		}
		if got[0] != 2 || got[1] != 1 || got[2] != tt.wantReverted {
			t.Errorf("%s: applied, pruned, reverted = %v; want 2, 1, %v", tt.name, got, tt.wantReverted)
		}
	}
}
