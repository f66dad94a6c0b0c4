package stenciltest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/pkg/stencil"
	"github.com/stencil-operator/stencil/pkg/stenciltest"
	"github.com/stencil-operator/stencil/templates"
)

// TestOperatorsRunInParallel: two operators of one project run at once in
// one test process (parallel subtests, each its own Project.Run), on one
// local control plane, each in its own namespace (--watch-namespaces):
// each makes its own FlightTicket's ConfigMap. RunOperator sets nothing
// of the process's (no KUBECONFIG, no second global logger, no controller
// name kept from the other run).
func TestOperatorsRunInParallel(t *testing.T) {
	var flights []stencil.Kind
	for _, k := range templates.Kinds {
		if k.GroupVersionKind.Kind == "FlightTicket" {
			flights = append(flights, k)
		}
	}
	project := stencil.Project{Name: "flights", Kinds: flights}
	cluster := stenciltest.StartCluster(t)
	cluster.InstallCRDs(t, "../../config/crd/bases")
	cl, err := client.New(cluster.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"east", "west"} {
		t.Run(ns, func(t *testing.T) {
			t.Parallel()
			if err := cl.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			cluster.RunOperator(t, project, "--watch-namespaces="+ns)
			ticket := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "flights.com/v1", "kind": "FlightTicket",
				"metadata": map[string]any{"name": "trip", "namespace": ns},
				"spec":     map[string]any{"from": "Mumbai", "to": ns, "number": int64(1)},
			}}
			if err := cl.Create(t.Context(), ticket); err != nil {
				t.Fatal(err)
			}
			want := "1 ticket(s) from Mumbai to " + ns
			var last string
			err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				cm := &corev1.ConfigMap{}
				if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "trip-booking"}, cm); err != nil {
					last = err.Error()
					return false, client.IgnoreNotFound(err)
				}
				last = fmt.Sprintf("summary %q", cm.Data["summary"])
				return cm.Data["summary"] == want, nil
			})
			if err != nil {
				t.Fatalf("the ConfigMap trip-booking in %s with summary %q: %v (last: %s)", ns, want, err, last)
			}
		})
	}
}
