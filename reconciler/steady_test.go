package reconciler_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	testv1alpha1 "github.com/stencil-operator/stencil/internal/testkind/v1alpha1"
)

// 5. With 50 CRs converged, a quiet minute costs the operator no request
// other than its watches.
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
	// Let the last status writes and the watch events they cause settle.
	time.Sleep(3 * time.Second)
	converge := requests.reset()
	t.Logf("converging %d CRs (3 objects each) took %d requests: %s", n, total(converge), summary(converge))

	time.Sleep(60 * time.Second)
	quiet := requests.reset()
	t.Logf("requests in 60 s of steady state: %d %s", total(quiet), summary(quiet))
	if total(quiet) != 0 {
		t.Errorf("the operator sent %d requests at rest, want 0: %s", total(quiet), summary(quiet))
	}
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
