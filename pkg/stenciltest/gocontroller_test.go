package stenciltest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/stencil-operator/stencil/pkg/stencil"
	"github.com/stencil-operator/stencil/pkg/stenciltest"
	"github.com/stencil-operator/stencil/templates"
)

// audited is the annotation the example's Go controller writes.
const audited = "example.com/audited"

// auditConfigMaps is a project's own Go controller, run beside its
// template kinds through Project.Setup: it marks with an annotation (their
// data's summary) the ConfigMaps of namespace default that the FlightTicket
// templates make and those labelled example.com/audit=yes, which nobody
// renders. The manager's cache holds only stencil's own objects, so the
// controller watches and reads through a cache of its own, added to the
// manager.
func auditConfigMaps(mgr manager.Manager) error {
	own, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{"default": {}},
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(own); err != nil {
		return err
	}
	cl := mgr.GetClient() // writes go to the API server
	return ctrl.NewControllerManagedBy(mgr).Named("configmap-audit").
		WatchesRawSource(source.Kind(own, &corev1.ConfigMap{}, &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{},
			predicate.NewTypedPredicateFuncs(func(cm *corev1.ConfigMap) bool {
				return cm.Labels["app.kubernetes.io/name"] == "flightticket" || cm.Labels["example.com/audit"] == "yes"
			}))).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			cm := &corev1.ConfigMap{}
			if err := own.Get(ctx, req.NamespacedName, cm); err != nil {
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
			return reconcile.Result{}, cl.Patch(ctx, cm, patch, client.FieldOwner("configmap-audit"))
		}))
}

// TestAGoControllerBesideTheTemplates: a project with a template kind
// (FlightTicket) and one Go controller of its own (Project.Setup) runs
// both in one manager on the local control plane: the template makes a
// ConfigMap and the Go controller annotates it, as it does a ConfigMap
// nobody renders (outside the manager's cache of stencil's objects); a
// change of the resource reaches both.
func TestAGoControllerBesideTheTemplates(t *testing.T) {
	var flights []stencil.Kind
	for _, k := range templates.Kinds {
		if k.GroupVersionKind.Kind == "FlightTicket" {
			flights = append(flights, k)
		}
	}
	cluster := stenciltest.StartCluster(t)
	cluster.InstallCRDs(t, "../../config/crd/bases")
	cluster.RunOperator(t, stencil.Project{Name: "flights", Kinds: flights, Setup: auditConfigMaps})

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
	waitAudited(t, cl, "trip-booking", "2 ticket(s) from Mumbai to London")
	plain := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "default", Labels: map[string]string{"example.com/audit": "yes"}}, Data: map[string]string{"summary": "by hand"}}
	if err := cl.Create(t.Context(), plain); err != nil {
		t.Fatal(err)
	}
	waitAudited(t, cl, "plain", "by hand")
	patch := []byte(`{"spec":{"number":3}}`)
	if err := cl.Patch(t.Context(), ticket, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	waitAudited(t, cl, "trip-booking", "3 ticket(s) from Mumbai to London")
}

// waitAudited waits until ConfigMap name holds summary and the Go
// controller's annotation of it.
func waitAudited(t *testing.T, cl client.Client, name, summary string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, cm); err != nil {
			last = err.Error()
			return false, client.IgnoreNotFound(err) // not made yet: wait
		}
		last = fmt.Sprintf("summary %q, annotation %q", cm.Data["summary"], cm.Annotations[audited])
		return cm.Data["summary"] == summary && cm.Annotations[audited] == summary, nil
	})
	if err != nil {
		t.Fatalf("ConfigMap %s with summary %q, audited: %v (last: %s)", name, summary, err, last)
	}
}
