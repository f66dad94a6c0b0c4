package stenciltest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stencil-operator/stencil/pkg/stencil"
	"github.com/stencil-operator/stencil/pkg/stenciltest"
	"github.com/stencil-operator/stencil/templates"
)

// audited is the annotation the example's Go controller writes.
const audited = "example.com/audited"

// auditBookings is a project's own Go controller, run beside its template
// kinds through Project.Setup: it marks every ConfigMap that the
// FlightTicket templates make (label app.kubernetes.io/name=flightticket)
// with an annotation, through the manager's client and cache.
func auditBookings(mgr manager.Manager) error {
	bookings := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()["app.kubernetes.io/name"] == "flightticket"
	})
	cl := mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).Named("booking-audit").
		For(&corev1.ConfigMap{}, builder.WithPredicates(bookings)).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			cm := &corev1.ConfigMap{}
			if err := cl.Get(ctx, req.NamespacedName, cm); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			if cm.Annotations[audited] == cm.Data["summary"] {
				return reconcile.Result{}, nil
			}
			patch := client.MergeFrom(cm.DeepCopy())
			if cm.Annotations == nil {
				cm.Annotations = map[string]string{}
			}
			cm.Annotations[audited] = cm.Data["summary"]
			return reconcile.Result{}, cl.Patch(ctx, cm, patch)
		}))
}

// TestAGoControllerBesideTheTemplates: a project with a template kind
// (FlightTicket) and one Go controller of its own (Project.Setup) runs
// both in one manager on the local control plane: the template makes the
// ConfigMap, the Go controller annotates it, and a change of the resource
// reaches both.
func TestAGoControllerBesideTheTemplates(t *testing.T) {
	var flights []stencil.Kind
	for _, k := range templates.Kinds {
		if k.GroupVersionKind.Kind == "FlightTicket" {
			flights = append(flights, k)
		}
	}
	cluster := stenciltest.StartCluster(t)
	cluster.InstallCRDs(t, "../../config/crd/bases")
	cluster.RunOperator(t, stencil.Project{Name: "flights", Kinds: flights, AddToScheme: templates.AddToScheme, Setup: auditBookings})

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ticket := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "flights.com/v1", "kind": "FlightTicket",
		"metadata": map[string]any{"name": "trip", "namespace": "default"},
		"spec":     map[string]any{"from": "Mumbai", "to": "London", "number": int64(2)},
	}}
	if err := cl.Create(t.Context(), ticket); err != nil {
		t.Fatal(err)
	}
	waitAudited(t, cl, "2 ticket(s) from Mumbai to London")
	patch := []byte(`{"spec":{"number":3}}`)
	if err := cl.Patch(t.Context(), ticket, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	waitAudited(t, cl, "3 ticket(s) from Mumbai to London")
}

// waitAudited waits until the booking ConfigMap holds summary (the
// template's) and the Go controller's annotation of it.
func waitAudited(t *testing.T, cl client.Client, summary string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: "default", Name: "trip-booking"}, cm); err != nil {
			last = err.Error()
			return false, client.IgnoreNotFound(err) // not made yet: wait
		}
		last = fmt.Sprintf("summary %q, annotation %q", cm.Data["summary"], cm.Annotations[audited])
		return cm.Data["summary"] == summary && cm.Annotations[audited] == summary, nil
	})
	if err != nil {
		t.Fatalf("the ConfigMap rendered and audited with %q: %v (last: %s)", summary, err, last)
	}
}
