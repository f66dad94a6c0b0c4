package reconciler_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
)

// 5. With 50 CRs converged, a quiet minute costs the operator no request
// other than its watches, and no reconcile of them: once the cache has shown
// a resource's applies, nothing looks at it again until something changes.
func TestSteadyStateSendsNoRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a minute; run without -short")
	}
	ns := newNamespace(t)
	requests.reset() // count only this test's requests
	const n = 50
	for i := range n {
		createWidget(t, ns, fmt.Sprintf("w%02d", i), testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, Service: true})
	}
	for i := range n {
		waitReady(t, ns, fmt.Sprintf("w%02d", i))
	}
	// A new message re-applies only each ConfigMap, which no controller
	// writes afterwards (the Deployment controller's status updates would
	// wake a Widget anyway): nothing should look at these Widgets again.
	for i := range n {
		updateSpec(t, ns, fmt.Sprintf("w%02d", i), func(s *testv1alpha1.WidgetSpec) { s.Message = "m2" })
	}
	for i := range n {
		waitReady(t, ns, fmt.Sprintf("w%02d", i))
	}
	// The last status writes' events reach the operator, and what they
	// wake ends.
	widgets := make([]client.Object, n)
	for i := range n {
		widgets[i] = &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("w%02d", i)}}
	}
	waitIdle(t, widgets...)
	converge := requests.reset()
	t.Logf("converging %d CRs (3 objects each), then a new message for each, took %d requests: %s", n, total(converge), summary(converge))

	before := widgetReconciles(t)
	time.Sleep(60 * time.Second)
	quiet := requests.reset()
	reconciles := widgetReconciles(t) - before
	t.Logf("in 60 s of steady state: %d requests %s; %d Widget reconciles", total(quiet), summary(quiet), reconciles)
	if total(quiet) != 0 {
		t.Errorf("the operator sent %d requests at rest, want 0: %s", total(quiet), summary(quiet))
	}
	// The counter is the controller's: resources earlier tests left may add
	// a few. About one per Widget is a backstop that looks again at every
	// resource after an apply, whatever the cache has shown since.
	if reconciles > n/5 {
		t.Errorf("%d Widget reconciles at rest for %d converged Widgets, want none of them looked at again", reconciles, n)
	}
}

// widgetReconciles is the number of Widget reconciles so far, whatever
// their result.
func widgetReconciles(t *testing.T) int {
	t.Helper()
	n := 0.0
	for _, result := range []string{"success", "error", "requeue", "requeue_after"} {
		n += metric(t, "controller_runtime_reconcile_total", map[string]string{"controller": "widget", "result": result})
	}
	return int(n)
}

func total(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

func summary(counts map[string]int) string {
	var lines []string
	for k, v := range counts {
		lines = append(lines, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(lines)
	if len(lines) > 20 {
		lines = append(lines[:20], "...")
	}
	return strings.Join(lines, ", ")
}
