package reconciler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
)

// deploymentCondition is the Deployment's condition of type typ, or nil.
func deploymentCondition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == typ {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// A Deployment that cannot become available (its pods fit no node) keeps
// its resource Ready=False, Progressing, with a message that names it, and
// stencil sends nothing while it waits (no polling: the Deployment's own
// status events bring it back). Past the Deployment's progress deadline the
// resource is Stalled (HealthCheckFailed), with a Warning event; once the
// pods can run, Ready turns True.
func TestUnavailableDeploymentKeepsReadyFalse(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, Unschedulable: true})
	w := waitCondition(t, ns, "web", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProgressing)
	ready := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
	if !strings.Contains(ready.Message, "Deployment web") || w.Status.ObservedGeneration != w.Generation {
		t.Errorf("Ready = %q, observedGeneration %d of %d; want the Deployment named, applied for this generation",
			ready.Message, w.Status.ObservedGeneration, w.Generation)
	}
	if c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReconciling); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Reconciling = %+v, want True", c)
	}
	// The Deployment controller's status writes end once the Deployment
	// says its pod is unavailable; then what they woke ends.
	d := &appsv1.Deployment{}
	eventually(t, 30*time.Second, "the Deployment's status settled: unavailable", func() error {
		var err error
		if d, err = get(t, &appsv1.Deployment{}, ns, "web"); err != nil {
			return err
		}
		progressing := deploymentCondition(d, appsv1.DeploymentProgressing)
		if s := d.Status; s.ObservedGeneration != d.Generation || s.Replicas != 1 || s.UpdatedReplicas != 1 || s.UnavailableReplicas != 1 ||
			progressing == nil || progressing.Reason != "ReplicaSetUpdated" {
			return fmt.Errorf("generation %d, status %+v", d.Generation, s)
		}
		return nil
	})
	waitSeen(t, requests, d, getWidget(t, ns, "web"))
	testutil.Settle(t, time.Minute, time.Second, "the operator's requests in "+ns, func() int { return requests.countIn("", ns) })
	before := requests.countIn("", ns)
	time.Sleep(5 * time.Second)
	if n := requests.countIn("", ns) - before; n > 0 {
		t.Errorf("stencil sent %d requests in 5 s while the Deployment stayed unavailable; want none (no polling)", n)
	}
	if err := readyErr(getWidget(t, ns, "web")); err == nil {
		t.Errorf("Widget Ready while its Deployment is unavailable")
	}

	updateSpec(t, ns, "web", func(s *testv1alpha1.WidgetSpec) { s.ProgressDeadlineSeconds = 1 })
	w = waitCondition(t, ns, "web", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonHealthCheckFailed)
	if c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady); c.Reason != v1alpha1.ReasonHealthCheckFailed ||
		!strings.Contains(c.Message, "kubectl describe deployment.apps web -n "+ns) {
		t.Errorf("Ready = %+v; want HealthCheckFailed and how to see why", c)
	}
	waitEvent(t, ns, "web", v1alpha1.ReasonHealthCheckFailed)

	updateSpec(t, ns, "web", func(s *testv1alpha1.WidgetSpec) { s.Unschedulable, s.ProgressDeadlineSeconds = false, 0 })
	w = waitReady(t, ns, "web")
	for _, typ := range []string{v1alpha1.ConditionReconciling, v1alpha1.ConditionStalled} {
		if c := meta.FindStatusCondition(w.Status.Conditions, typ); c != nil {
			t.Errorf("%s = %+v once healthy; want none", typ, c)
		}
	}
}
