package reconciler_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
)

// A write the leader fence refuses (this process may no longer be the
// leader) is no failure of the resource: its status is not touched, no
// reconcile error is counted (nor its backoff grown), no revert or fight is
// counted for a drift it could not revert, and once writes go again the
// change is applied and the drift reverted within its retry (2 s).
func TestFencedWriteIsNoFailure(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 2})
	waitReady(t, ns, "web")
	widget := map[string]string{"kind": "Widget"}
	errorsBefore := metric(t, "controller_runtime_reconcile_errors_total", map[string]string{"controller": "widget"})
	revertedBefore := metric(t, "stencil_drift_reverted_objects_total", widget)
	fightsBefore := metric(t, "stencil_fights_total", widget)
	// Only the applies are refused: the status write could go (a renewal
	// landed in between), and must not tell of a failure.
	unfenceConfigMaps := requests.inject(t, fault{path: "/namespaces/" + ns + "/configmaps", fenced: true})
	unfenceDeployments := requests.inject(t, fault{path: "/namespaces/" + ns + "/deployments", fenced: true})
	applies := func() int {
		return requests.countPath("PATCH", "/namespaces/"+ns+"/configmaps/web-config") + requests.countPath("PATCH", "/namespaces/"+ns+"/deployments/web")
	}
	before := applies()
	updateSpec(t, ns, "web", func(s *testv1alpha1.WidgetSpec) { s.Message = "n" })
	scale(t, ns, "web", 5, "kubectl-scale") // drift it may not revert now
	// Three retries or more, each refused: a fight would start at three.
	// A retry (2 s after a fenced try) is a try after a pause; the tries
	// that the changes' own events cause come at once.
	retries, tries, since := 0, before, time.Now()
	eventually(t, time.Minute, "three retries of the fenced apply", func() error {
		if n := applies(); n > tries {
			if time.Since(since) >= time.Second {
				retries++
			}
			tries, since = n, time.Now()
		}
		if retries < 3 {
			return fmt.Errorf("%d retries after a pause, %d applies tried", retries, tries-before)
		}
		return nil
	})
	if got := metric(t, "stencil_drift_reverted_objects_total", widget); got != revertedBefore {
		t.Errorf("stencil_drift_reverted_objects_total went from %v to %v while no revert could be written", revertedBefore, got)
	}
	if got := metric(t, "stencil_fights_total", widget); got != fightsBefore {
		t.Errorf("stencil_fights_total went from %v to %v while fenced", fightsBefore, got)
	}
	w := getWidget(t, ns, "web")
	if c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != "True" || c.Reason == v1alpha1.ReasonApplyFailed {
		t.Errorf("Ready while fenced: %+v, want it as it was (True)", c)
	}
	if got := metric(t, "controller_runtime_reconcile_errors_total", map[string]string{"controller": "widget"}); got != errorsBefore {
		t.Errorf("reconcile errors went from %v to %v while fenced, want none", errorsBefore, got)
	}
	unfenceConfigMaps()
	unfenceDeployments()
	unfenced := time.Now()
	eventually(t, 30*time.Second, "the change applied", func() error {
		cm, err := get(t, &corev1.ConfigMap{}, ns, "web-config")
		if err != nil {
			return err
		}
		if cm.Data["message"] != "n" {
			return fmt.Errorf("message %q", cm.Data["message"])
		}
		if got := replicas(t, ns); got != 2 {
			return fmt.Errorf("replicas %d, want 2 (the drift reverted)", got)
		}
		return readyErr(getWidget(t, ns, "web"))
	})
	if took := time.Since(unfenced); took > 5*time.Second {
		t.Errorf("applied %s after writes went again, want within %s", took, 5*time.Second)
	}
}
