package reconciler_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
)

// A tenant who may write objects in its own namespace can put any labels
// and annotations on them. An object that names another namespace's Widget
// as its owner (stencil.dev/owner), even with that Widget's UID, must not
// wake that Widget: before issue 32 each update of it did.
func TestForgedOwnerWakesNoOtherTenant(t *testing.T) {
	victim, tenant := newNamespace(t), newNamespace(t)
	createWidget(t, victim, "w", testv1alpha1.WidgetSpec{Message: "m"})
	w := waitReady(t, victim, "w")
	// The Deployment controller's status writes end once it says the
	// Deployment is complete; then what they woke ends.
	d := &appsv1.Deployment{}
	eventually(t, 30*time.Second, "the victim's Deployment complete", func() error {
		var err error
		if d, err = get(t, &appsv1.Deployment{}, victim, "w"); err != nil {
			return err
		}
		if c := deploymentCondition(d, appsv1.DeploymentProgressing); d.Status.ObservedGeneration != d.Generation || c == nil || c.Reason != "NewReplicaSetAvailable" {
			return fmt.Errorf("generation %d, status %+v", d.Generation, d.Status)
		}
		return nil
	})
	waitIdle(t, d, w)
	forged := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "forged",
		Labels:      map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByStencil, v1alpha1.LabelOwnerUID: string(w.UID)},
		Annotations: map[string]string{v1alpha1.AnnotationOwner: v1alpha1.OwnerAnnotation(testv1alpha1.GroupVersion.WithKind("Widget"), victim, "w")},
	}}
	if err := k8s.Create(t.Context(), forged); err != nil {
		t.Fatal(err)
	}
	before := widgetReconciles(t)
	const updates = 40
	for i := range updates {
		forged.Data = map[string]string{"n": fmt.Sprint(i)}
		if err := k8s.Update(t.Context(), forged); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitIdle(t, forged) // the last update has reached the operator, and what it woke has ended
	woken := widgetReconciles(t) - before
	t.Logf("%d updates of a forged ConfigMap in another namespace: %d Widget reconciles", updates, woken)
	if woken > updates/4 {
		t.Errorf("%d Widget reconciles during %d updates of another tenant's forged object; want it to wake no one", woken, updates)
	}
}

// An object that carries managed-by=stencil, a common label that anyone may
// set, but no owner UID is no object of stencil's: it is not cached. Before
// issue 32 every such object of a type cached whole (a Widget judges its
// Deployments' health) was held in memory whole: a tenant could fill the
// operator's memory for every tenant. The heap is measured before and after
// 48 such Deployments of about 900 KiB each.
func TestCommonLabelDoesNotFillTheCache(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "w", testv1alpha1.WidgetSpec{Message: "m"})
	waitReady(t, ns, "w")
	const n, size = 48, 900 << 10
	heapBefore := heapInUse()
	for i := range n {
		if err := k8s.Create(t.Context(), bigDeployment(ns, fmt.Sprintf("big-%02d", i), size)); err != nil {
			t.Fatal(err)
		}
	}
	// The operator's Deployment watch has passed every one of them (and
	// its informer has received what it selects) once it delivers a later
	// change: an annotation on the Widget's own Deployment.
	mark := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}}
	if err := k8s.Patch(t.Context(), mark, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"test.stencil.dev/mark":"after"}}}`))); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, mark)
	grown := heapInUse() - heapBefore
	t.Logf("heap in use grew by %d MiB after %d Deployments of %d KiB labelled managed-by=stencil (%d MiB in all)", grown>>20, n, size>>10, n*size>>20)
	if limit := int64(n * size / 4); grown > limit {
		t.Errorf("heap grew by %d MiB, over %d MiB: the objects are cached", grown>>20, limit>>20)
	}
}

// heapInUse is the test process's heap in use after a collection: the
// operator runs in this process.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// bigDeployment is a Deployment of no pods whose pod template carries an
// environment variable of size bytes, labelled as stencil labels its own
// objects but without an owner UID.
func bigDeployment(ns, name string, size int) *appsv1.Deployment {
	labels := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByStencil, "app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx",
					Env: []corev1.EnvVar{{Name: "FILL", Value: strings.Repeat("x", size)}}}}},
			},
		},
	}
}

// A resource marked stencil.dev/prune-pending (which a tenant can set on
// its own resource) lists its objects from the API server: in its own
// namespace, for namespaced types. Before issue 32 those lists had no
// namespace: each cost the API server every object of the type in the
// cluster.
func TestPruneListsStayInTheNamespace(t *testing.T) {
	ns := newNamespace(t)
	clusterWide := func() int {
		return requests.countPath("GET", "/api/v1/configmaps") + requests.countPath("GET", "/apis/apps/v1/deployments") +
			requests.countPath("GET", "/api/v1/services")
	}
	inNamespace := func() int {
		return requests.countPath("GET", "/api/v1/namespaces/"+ns+"/configmaps") + requests.countPath("GET", "/apis/apps/v1/namespaces/"+ns+"/deployments")
	}
	before, beforeNS := clusterWide(), inNamespace()
	w := &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w", Annotations: map[string]string{v1alpha1.AnnotationPrunePending: "true"}},
		Spec: testv1alpha1.WidgetSpec{Message: "m"}}
	if err := k8s.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the prune-pending mark cleared after the prune", func() error {
		if _, marked := getWidget(t, ns, "w").Annotations[v1alpha1.AnnotationPrunePending]; marked {
			return fmt.Errorf("still marked")
		}
		return nil
	})
	if n := clusterWide() - before; n != 0 {
		t.Errorf("%d LISTs of every namespace for one resource's prune; want them in its namespace", n)
	}
	if inNamespace() == beforeNS {
		t.Error("no LIST in the resource's namespace: the prune did not list from the API server")
	}
}

// An object the API server rejects as invalid (a label value it refuses,
// here) is no reason to leave the resource's other objects unapplied, and
// no retry fixes it: the others are applied, nothing is pruned, and the
// resource is Stalled with reason Rejected, naming the object. Before
// issue 32 the apply stopped at the Deployment (the ClusterRole, applied
// after it, was never created) and the resource said ApplyFailed,
// Reconciling, forever.
func TestRejectedObjectStallsAndTheRestIsApplied(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "w", testv1alpha1.WidgetSpec{Message: "m", ClusterRole: true, Track: "not a label value!"})
	t.Cleanup(func() { deleteWidgets(t, ns) }) // its ClusterRole goes with it
	eventually(t, 30*time.Second, "Stalled (Rejected) with the ClusterRole applied", func() error {
		if _, err := get(t, &rbacv1.ClusterRole{}, "", "widget-"+ns+"-w"); err != nil {
			return fmt.Errorf("ClusterRole: %w", err)
		}
		w := getWidget(t, ns, "w")
		stalled := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionStalled)
		if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != v1alpha1.ReasonRejected {
			return fmt.Errorf("Stalled = %+v", stalled)
		}
		if !strings.Contains(stalled.Message, `Deployment`) || !strings.Contains(stalled.Message, "fix the spec or the template") {
			return fmt.Errorf("Stalled message %q does not name the Deployment and what to do", stalled.Message)
		}
		if c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReconciling); c != nil && c.Status == metav1.ConditionTrue {
			return fmt.Errorf("Reconciling = %+v, want not True: a retry cannot help", c)
		}
		return nil
	})
	if _, err := get(t, &appsv1.Deployment{}, ns, "w"); err == nil {
		t.Error("the rejected Deployment exists")
	}
}
