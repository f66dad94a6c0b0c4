package reconciler_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
)

func createWidget(t *testing.T, ns, name string, spec testv1alpha1.WidgetSpec) *testv1alpha1.Widget {
	t.Helper()
	cluster.Get(t)
	w := &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := k8s.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	return w
}

func updateSpec(t *testing.T, ns, name string, change func(*testv1alpha1.WidgetSpec)) {
	t.Helper()
	// stencil writes the status meanwhile: read again on a conflict, as
	// any client that updates must.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w := getWidget(t, ns, name)
		change(&w.Spec)
		return k8s.Update(t.Context(), w)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func get[T client.Object](t *testing.T, obj T, ns, name string) (T, error) {
	t.Helper()
	err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	return obj, err
}

// 1. A CR is created: every rendered object exists with our labels and
// ownerReference; Ready=True with observedGeneration = generation.
func TestCreateAppliesEveryObject(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "hi", Replicas: 2, Service: true})
	w := waitReady(t, ns, "web")
	objs := []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}}
	names := []string{"web-config", "web", "web"}
	for i, obj := range objs {
		if _, err := get(t, obj, ns, names[i]); err != nil {
			t.Fatalf("%T %s: %v", obj, names[i], err)
		}
		if l := obj.GetLabels(); l[v1alpha1.LabelManagedBy] != "stencil" || l[v1alpha1.LabelOwnerUID] != string(w.UID) {
			t.Errorf("%T %s labels = %v", obj, names[i], l)
		}
		if ref := metav1.GetControllerOf(obj); ref == nil || ref.UID != w.UID {
			t.Errorf("%T %s controller = %v, want the Widget", obj, names[i], ref)
		}
	}
	if len(w.Status.Inventory) != 3 {
		t.Errorf("inventory = %v, want 3 entries", w.Status.Inventory)
	}
}

// 2. A spec change updates the objects; a field a template stops setting
// disappears from the live object.
func TestSpecChangeUpdatesAndRemovesFields(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "one", Replicas: 1, Extra: "gone-soon"})
	waitReady(t, ns, "web")
	cm, _ := get(t, &corev1.ConfigMap{}, ns, "web-config")
	if cm.Data["extra"] != "gone-soon" {
		t.Fatalf("data = %v, want extra", cm.Data)
	}
	updateSpec(t, ns, "web", func(s *testv1alpha1.WidgetSpec) { s.Message, s.Replicas, s.Extra = "two", 3, "" })
	waitReady(t, ns, "web")
	eventually(t, 30*time.Second, "ConfigMap updated", func() error {
		cm, _ := get(t, &corev1.ConfigMap{}, ns, "web-config")
		if _, has := cm.Data["extra"]; has || cm.Data["message"] != "two" {
			return fmt.Errorf("data = %v", cm.Data)
		}
		return nil
	})
	d, _ := get(t, &appsv1.Deployment{}, ns, "web")
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas = %d, want 3", *d.Spec.Replicas)
	}
}

// scale changes the Deployment's replicas through the scale subresource
// under another field manager, as `kubectl scale` does.
func scale(t *testing.T, ns, name string, replicas int, manager string) {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas))
	if err := k8s.SubResource("scale").Patch(t.Context(), d, patch, client.FieldOwner(manager)); err != nil {
		t.Fatal(err)
	}
}

// replicas is the spec.replicas of the Deployment web of ns.
func replicas(t *testing.T, ns string) int32 {
	t.Helper()
	d, err := get(t, &appsv1.Deployment{}, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}

func findField(w *testv1alpha1.Widget, kind, path string) *v1alpha1.FieldDrift {
	for _, o := range w.Status.Drift {
		if o.Kind != kind {
			continue
		}
		for i := range o.Fields {
			if o.Fields[i].Path == path {
				return &o.Fields[i]
			}
		}
	}
	return nil
}

// 3a. Under Correct, another manager's change is reported and reverted.
func TestDriftIsCorrected(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 2})
	waitReady(t, ns, "web")
	widget := map[string]string{"kind": "Widget"}
	reverted := metric(t, "stencil_drift_reverted_objects_total", widget)
	applied := metric(t, "stencil_applied_objects_total", widget)
	scale(t, ns, "web", 5, "kubectl-scale")
	eventually(t, 30*time.Second, "drift recorded and reverted", func() error {
		w := getWidget(t, ns, "web")
		f := findField(w, "Deployment", ".spec.replicas")
		if f == nil {
			return fmt.Errorf("no drift of .spec.replicas in %+v", w.Status.Drift)
		}
		// The API server records no time for updates through /scale.
		if f.Manager != "kubectl-scale" || f.Desired != "2" || f.Live != "5" {
			return fmt.Errorf("drift = %+v, want manager kubectl-scale, desired 2, live 5", f)
		}
		if got := replicas(t, ns); got != 2 {
			return fmt.Errorf("replicas = %d, want 2 (reverted)", got)
		}
		c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionDrifted)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonDriftCorrected {
			return fmt.Errorf("Drifted = %+v, want False/%s", c, v1alpha1.ReasonDriftCorrected)
		}
		if !strings.Contains(w.Status.Drift[0].Diff, "-.spec.replicas: 2") || !strings.Contains(w.Status.Drift[0].Diff, "+.spec.replicas: 5") {
			return fmt.Errorf("diff = %q", w.Status.Drift[0].Diff)
		}
		return nil
	})
	if got := metric(t, "stencil_drift_reverted_objects_total", widget); got < reverted+1 {
		t.Errorf("stencil_drift_reverted_objects_total = %v, want at least %v", got, reverted+1)
	}
	if got := metric(t, "stencil_applied_objects_total", widget); got < applied+1 {
		t.Errorf("stencil_applied_objects_total = %v, want at least %v (the re-apply)", got, applied+1)
	}
}

// 3b. Under Report, the change stays and Drifted=True. A change to a field we
// do not own is not drift, and neither is a value the API server normalises.
func TestDriftIsReported(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 2, CPU: "0.5", DriftPolicy: v1alpha1.DriftReport})
	waitReady(t, ns, "web")
	driftedGauge := map[string]string{"kind": "Widget", "condition": v1alpha1.ConditionDrifted}
	drifted := metric(t, "stencil_unhealthy_resources", driftedGauge)
	reverted := metric(t, "stencil_drift_reverted_objects_total", map[string]string{"kind": "Widget"})
	d, _ := get(t, &appsv1.Deployment{}, ns, "web")
	if got := d.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String(); got != "500m" {
		t.Fatalf("live cpu = %s, want the normalised 500m", got)
	}
	// A field nobody in our templates sets, changed by someone else.
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"team":"blue"}},"spec":{"minReadySeconds":3}}`))
	if err := k8s.Patch(t.Context(), d, patch, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, d.DeepCopy()) // stencil has seen the change, and looked at it
	assertNotDrifted(t, ns, "web", 3*time.Second)

	scale(t, ns, "web", 4, "kubectl-scale")
	edit := client.RawPatch(types.StrategicMergePatchType, []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:edited"}]}}}}`))
	if err := k8s.Patch(t.Context(), d, edit, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	image := `.spec.template.spec.containers[name="web"].image`
	eventually(t, 30*time.Second, "drift reported", func() error {
		w := getWidget(t, ns, "web")
		c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionDrifted)
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Drifted = %+v, want True", c)
		}
		f := findField(w, "Deployment", ".spec.replicas")
		if f == nil || f.Manager != "kubectl-scale" || f.Desired != "2" || f.Live != "4" {
			return fmt.Errorf("drift = %+v", w.Status.Drift)
		}
		f = findField(w, "Deployment", image)
		if f == nil || f.Manager != "kubectl-edit" || f.Desired != `"nginx:1.27"` || f.Live != `"nginx:edited"` || f.Time == nil {
			return fmt.Errorf("drift = %+v, want the image taken by kubectl-edit, with a time", w.Status.Drift)
		}
		if len(w.Status.Drift[0].Fields) != 2 {
			return fmt.Errorf("drift has %d fields, want only replicas and image: %+v", len(w.Status.Drift[0].Fields), w.Status.Drift[0].Fields)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if got := replicas(t, ns); got != 4 {
		t.Errorf("replicas = %d, want 4 (Report leaves drift alone)", got)
	}
	if got := metric(t, "stencil_unhealthy_resources", driftedGauge); got != drifted+1 {
		t.Errorf("stencil_unhealthy_resources{condition=Drifted} = %v, want %v", got, drifted+1)
	}
	if got := metric(t, "stencil_drift_reverted_objects_total", map[string]string{"kind": "Widget"}); got != reverted {
		t.Errorf("stencil_drift_reverted_objects_total = %v, want %v (Report reverts nothing)", got, reverted)
	}
	if err := k8s.Delete(t.Context(), getWidget(t, ns, "web")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the deleted Widget no longer counted", func() error {
		if got := metric(t, "stencil_unhealthy_resources", driftedGauge); got != drifted {
			return fmt.Errorf("stencil_unhealthy_resources{condition=Drifted} = %v, want %v", got, drifted)
		}
		return nil
	})
}

func assertNotDrifted(t *testing.T, ns, name string, during time.Duration) {
	t.Helper()
	deadline := time.Now().Add(during)
	for time.Now().Before(deadline) {
		w := getWidget(t, ns, name)
		c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionDrifted)
		if c == nil || c.Status != metav1.ConditionFalse || len(w.Status.Drift) > 0 {
			t.Fatalf("Drifted = %+v, drift = %+v; want no drift", c, w.Status.Drift)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// 4. A resource whose template the spec turns off is pruned; an object with
// our owner label that was not created for the CR survives; a render failure
// deletes nothing and names the template file and line.
func TestPrune(t *testing.T) {
	ns := newNamespace(t)
	w := createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, Service: true})
	waitReady(t, ns, "web")
	if _, err := get(t, &corev1.Service{}, ns, "web"); err != nil {
		t.Fatal(err)
	}
	impostor := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "impostor", Labels: map[string]string{
		v1alpha1.LabelManagedBy: "stencil", v1alpha1.LabelOwnerUID: string(w.UID),
	}}}
	if err := k8s.Create(t.Context(), impostor); err != nil {
		t.Fatal(err)
	}

	// A render failure, in the same change that turns the Service off.
	updateSpec(t, ns, "web", func(s *testv1alpha1.WidgetSpec) { s.Service, s.Fail = false, true })
	eventually(t, 30*time.Second, "RenderFailed condition", func() error {
		c := meta.FindStatusCondition(getWidget(t, ns, "web").Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Reason != v1alpha1.ReasonRenderFailed || !strings.Contains(c.Message, "deployment.yaml:1:") {
			return fmt.Errorf("Ready = %+v, want RenderFailed naming deployment.yaml:1", c)
		}
		return nil
	})
	time.Sleep(time.Second)
	if _, err := get(t, &corev1.Service{}, ns, "web"); err != nil {
		t.Fatalf("Service after a failed render: %v; want it kept", err)
	}
	eventually(t, 30*time.Second, "a RenderFailed event", func() error {
		events := &eventsv1.EventList{}
		if err := k8s.List(t.Context(), events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == "web" && e.Reason == v1alpha1.ReasonRenderFailed && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no Warning event with reason RenderFailed among %d events", len(events.Items))
	})

	updateSpec(t, ns, "web", func(s *testv1alpha1.WidgetSpec) { s.Fail = false })
	waitReady(t, ns, "web")
	eventually(t, 30*time.Second, "Service pruned", func() error {
		if _, err := get(t, &corev1.Service{}, ns, "web"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Service: %w", err)
		}
		return nil
	})
	if _, err := get(t, &corev1.ConfigMap{}, ns, "impostor"); err != nil {
		t.Errorf("impostor ConfigMap: %v; want it to survive", err)
	}
	if _, err := get(t, &corev1.ConfigMap{}, ns, "web-config"); err != nil {
		t.Errorf("web-config: %v; want it kept", err)
	}
}

// 6. Deleting a CR removes all its objects.
func TestDeleteRemovesObjects(t *testing.T) {
	waitGarbageCollector(t) // it deletes the namespaced objects
	ns := newNamespace(t)
	w := createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, Service: true})
	waitReady(t, ns, "web")
	if err := k8s.Delete(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "objects garbage-collected", func() error {
		var errs []error
		for _, obj := range []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}} {
			list := &metav1.PartialObjectMetadataList{}
			gvk, _ := k8s.GroupVersionKindFor(obj)
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := k8s.List(t.Context(), list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelOwnerUID: string(w.UID)}); err != nil {
				return err
			}
			if len(list.Items) > 0 {
				errs = append(errs, fmt.Errorf("%d %s left", len(list.Items), gvk.Kind))
			}
		}
		return errors.Join(errs...)
	})
}

// Cluster-scoped objects carry no ownerReference: a finalizer removes them
// when the CR is deleted, and a prune finds them by label and annotation.
func TestClusterScopedObjectsUseTheFinalizer(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, ClusterRole: true})
	w := waitReady(t, ns, "web")
	if !slices.Contains(w.Finalizers, "stencil.dev/cleanup") {
		t.Fatalf("finalizers = %v, want stencil.dev/cleanup", w.Finalizers)
	}
	name := "widget-" + ns + "-web"
	role, err := get(t, &rbacv1.ClusterRole{}, "", name)
	if err != nil {
		t.Fatal(err)
	}
	if len(role.OwnerReferences) != 0 || role.Annotations[v1alpha1.AnnotationOwner] != "Widget.test.stencil.dev/"+ns+"/web" {
		t.Errorf("ClusterRole ownerReferences = %v, annotations = %v", role.OwnerReferences, role.Annotations)
	}
	if err := k8s.Delete(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "ClusterRole and Widget gone", func() error {
		if _, err := get(t, &rbacv1.ClusterRole{}, "", name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("ClusterRole: %w", err)
		}
		if _, err := get(t, &testv1alpha1.Widget{}, ns, "web"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Widget: %w", err)
		}
		return nil
	})
}
