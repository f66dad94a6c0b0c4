package reconciler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
)

// waitCondition waits until the Widget's condition typ has status and
// reason, and returns the Widget.
func waitCondition(t *testing.T, ns, name, typ string, status metav1.ConditionStatus, reason string) *testv1alpha1.Widget {
	t.Helper()
	var w *testv1alpha1.Widget
	eventually(t, 30*time.Second, fmt.Sprintf("Widget %s %s=%s (%s)", name, typ, status, reason), func() error {
		w = getWidget(t, ns, name)
		c := meta.FindStatusCondition(w.Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("%s = %+v", typ, c)
		}
		return nil
	})
	return w
}

// waitEvent waits for a Warning event with reason about the Widget.
func waitEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	eventually(t, 30*time.Second, "a "+reason+" event", func() error {
		events := &eventsv1.EventList{}
		if err := k8s.List(t.Context(), events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no Warning event %s among %d events", reason, len(events.Items))
	})
}

// waitGone waits until every object (namespace and name set) is gone.
func waitGone(t *testing.T, timeout time.Duration, what string, objs ...client.Object) {
	t.Helper()
	eventually(t, timeout, what, func() error {
		for _, o := range objs {
			switch err := k8s.Get(t.Context(), client.ObjectKeyFromObject(o), o); {
			case err == nil:
				return fmt.Errorf("%T %s is still there", o, o.GetName())
			case !apierrors.IsNotFound(err):
				return fmt.Errorf("%T %s: %w", o, o.GetName(), err)
			}
		}
		return nil
	})
}

// touch changes an annotation of the Widget web of ns, which makes stencil
// reconcile it.
func touch(t *testing.T, ns string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"test/touched":%q}}}`, time.Now().String())
	w := &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	if err := k8s.Patch(t.Context(), w, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// The first apply of an object the cache does not hold is a create-first
// apply: no read of the object before it (the read is only for objects that
// turn out to exist, as in TestForeignObjectIsNotAdopted).
func TestFirstApplyReadsNothing(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, Service: true})
	waitReady(t, ns, "web")
	if gets, patches := requests.countIn("GET", ns), requests.countIn("PATCH", ns); gets != 0 || patches < 4 {
		t.Errorf("converging one Widget (3 objects) sent %d GETs and %d PATCHes in its namespace; want no GET, and an apply per object and a status write", gets, patches)
	}
}

// An object that exists under a rendered name and is not stencil's is left
// untouched; the resource says so; an adopt annotation hands it over.
func TestForeignObjectIsNotAdopted(t *testing.T) {
	ns := newNamespace(t)
	mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-config"}, Data: map[string]string{"message": "mine"}}
	if err := k8s.Create(t.Context(), mine, client.FieldOwner("kubectl-create")); err != nil {
		t.Fatal(err)
	}
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1})
	w := waitCondition(t, ns, "web", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonOwnershipConflict)
	ready := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
	owner := "Widget.test.stencil.dev/" + ns + "/web"
	for _, want := range []string{`ConfigMap "web-config"`, "kubectl-create", "stencil.dev/adopt=" + owner} {
		if !strings.Contains(ready.Message, want) {
			t.Errorf("Ready message %q does not contain %q", ready.Message, want)
		}
	}
	applied := []v1alpha1.InventoryEntry{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"}}
	if !meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.ConditionStalled) || w.Status.ObservedGeneration != 0 || !slices.Equal(w.Status.Inventory, applied) {
		t.Errorf("Stalled = %v, observedGeneration = %d, inventory = %v; want Stalled, 0, only the Deployment that was applied",
			meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionStalled), w.Status.ObservedGeneration, w.Status.Inventory)
	}
	waitEvent(t, ns, "web", v1alpha1.ReasonOwnershipConflict)
	if _, err := get(t, &appsv1.Deployment{}, ns, "web"); err != nil {
		t.Errorf("Deployment: %v; want the resource's other objects applied", err)
	}
	touch(t, ns) // another reconcile must not take it either
	waitIdle(t, &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	cm, _ := get(t, &corev1.ConfigMap{}, ns, "web-config")
	// One create-first apply, refused; later looks only read it.
	if n := requests.countPath("PATCH", "/namespaces/"+ns+"/configmaps/web-config"); n != 1 {
		t.Errorf("%d applies of the user's ConfigMap; want 1, the create-first apply that the API server refused", n)
	}
	if cm.ResourceVersion != mine.ResourceVersion {
		t.Errorf("the user's ConfigMap has version %s, created as %s: it was written", cm.ResourceVersion, mine.ResourceVersion)
	}
	if cm.Data["message"] != "mine" || len(cm.Labels) != 0 || len(cm.OwnerReferences) != 0 {
		t.Fatalf("the user's ConfigMap was changed: data %v, labels %v, ownerReferences %v", cm.Data, cm.Labels, cm.OwnerReferences)
	}
	for _, e := range cm.ManagedFields {
		if e.Manager == "stencil" {
			t.Fatalf("stencil wrote the user's ConfigMap: %+v", e)
		}
	}

	// A merge patch, as kubectl annotate sends: it needs no resourceVersion.
	adopt, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.AnnotationAdopt: owner}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Patch(t.Context(), cm, client.RawPatch(types.MergePatchType, adopt)); err != nil {
		t.Fatal(err)
	}
	touch(t, ns)
	w = waitReady(t, ns, "web")
	cm, _ = get(t, &corev1.ConfigMap{}, ns, "web-config")
	if cm.Data["message"] != "m" || cm.Labels[v1alpha1.LabelOwnerUID] != string(w.UID) || metav1.GetControllerOf(cm) == nil {
		t.Errorf("adopted ConfigMap: data %v, labels %v, ownerReferences %v; want the template's", cm.Data, cm.Labels, cm.OwnerReferences)
	}
	if meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionStalled) != nil {
		t.Errorf("Stalled still set after the conflict is gone: %+v", w.Status.Conditions)
	}
}

// Two resources that render one name never trade the object; deleting the
// one that does not own it leaves it; when the owner lets go, the other
// takes it.
func TestTwoResourcesNeverShareAnObject(t *testing.T) {
	waitGarbageCollector(t) // it deletes the objects of the Widgets deleted here
	ns := newNamespace(t)
	shared := testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, ConfigName: "shared"}
	a := createWidget(t, ns, "a", shared)
	waitReady(t, ns, "a")
	createWidget(t, ns, "b", shared)
	c := createWidget(t, ns, "c", shared)
	for _, name := range []string{"b", "c"} {
		w := waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonOwnershipConflict)
		if msg := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "Widget "+ns+"/a") {
			t.Errorf("%s: Ready message %q does not name Widget %s/a", name, msg, ns)
		}
	}
	ownedBy := func(want *testv1alpha1.Widget) error {
		cm, err := get(t, &corev1.ConfigMap{}, ns, "shared")
		if err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(cm); cm.Labels[v1alpha1.LabelOwnerUID] != string(want.UID) || ref == nil || ref.UID != want.UID || len(cm.OwnerReferences) != 1 {
			return fmt.Errorf("ConfigMap shared: owner label %s, ownerReferences %v; want only %s's", cm.Labels[v1alpha1.LabelOwnerUID], cm.OwnerReferences, want.Name)
		}
		return nil
	}
	if err := ownedBy(a); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	waitGone(t, 60*time.Second, "Widget c and its Deployment gone", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}})
	if err := ownedBy(a); err != nil {
		t.Fatalf("after deleting c: %v", err)
	}

	if err := k8s.Delete(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	b := waitReady(t, ns, "b")
	eventually(t, 30*time.Second, "b owns the ConfigMap", func() error { return ownedBy(b) })
}

// denyWidgets makes the API server refuse operation on the Widgets of ns
// when expression is false, until the test ends.
func denyWidgets(t *testing.T, ns string, operation admissionregistrationv1.OperationType, expression string) {
	t.Helper()
	name := "deny-" + strings.ToLower(string(operation)) + "-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: new(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{operation},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"test.stencil.dev"}, APIVersions: []string{"*"}, Resources: []string{"widgets"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: expression, Message: "refused by a test"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := k8s.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.WithoutCancel(t.Context()), obj) })
	}
}

// waitDenied waits until the policy of denyWidgets refuses the dry-run
// request that try makes.
func waitDenied(t *testing.T, try func() error) {
	t.Helper()
	eventually(t, 30*time.Second, "the admission policy in force", func() error {
		if err := try(); !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
			return fmt.Errorf("dry-run request: %w", err)
		}
		return nil
	})
}

// A finalizer that cannot be added stops the reconcile before any apply,
// and status says so: not Ready, no inventory, nothing applied.
func TestFinalizerFailureIsReported(t *testing.T) {
	ns := newNamespace(t)
	denyWidgets(t, ns, admissionregistrationv1.Update, `!has(object.metadata.finalizers) || !object.metadata.finalizers.exists(f, f == "stencil.dev/cleanup")`)
	createWidget(t, ns, "probe", testv1alpha1.WidgetSpec{Message: "p", Replicas: 1})
	waitDenied(t, func() error {
		w := getWidget(t, ns, "probe")
		w.Finalizers = []string{"stencil.dev/cleanup"}
		return k8s.Update(t.Context(), w, client.DryRunAll)
	})

	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, ClusterRole: true})
	w := waitCondition(t, ns, "web", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonFinalizerFailed)
	if c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReconciling); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Reconciling = %+v, want True", c)
	}
	if len(w.Status.Inventory) != 0 || w.Status.ObservedGeneration != 0 {
		t.Errorf("inventory = %v, observedGeneration = %d; want nothing claimed", w.Status.Inventory, w.Status.ObservedGeneration)
	}
	if _, err := get(t, &rbacv1.ClusterRole{}, "", "widget-"+ns+"-web"); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRole: %v; want none without the finalizer", err)
	}
}

// A panic in the middle of an apply is reported as such, not as success.
func TestPanicIsReported(t *testing.T) {
	ns := newNamespace(t)
	requests.inject(t, fault{method: "PATCH", path: "/namespaces/" + ns + "/configmaps/", panic: true})
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1})
	w := waitCondition(t, ns, "web", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonReconcilePanicked)
	if !meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.ConditionReconciling) || len(w.Status.Inventory) != 0 {
		t.Errorf("conditions = %+v, inventory = %v; want Reconciling and nothing claimed", w.Status.Conditions, w.Status.Inventory)
	}
}

// A drifted value near the 1 MiB object limit (made of quotes, which JSON
// escapes twice on the way to status) still leaves a status that can be
// written: every value is cut.
func TestHugeDriftedValueKeepsStatusWritable(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, DriftPolicy: v1alpha1.DriftReport})
	waitReady(t, ns, "web")
	huge, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": ns, "name": "web-config"},
		"data":     map[string]string{"message": strings.Repeat(`"`, 900<<10)},
	})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-config"}}
	if err := k8s.Patch(t.Context(), cm, client.RawPatch(types.ApplyPatchType, huge), client.FieldOwner("big-writer"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	w := waitCondition(t, ns, "web", v1alpha1.ConditionDrifted, metav1.ConditionTrue, v1alpha1.ReasonDriftDetected)
	f := findField(w, "ConfigMap", ".data.message")
	if f == nil || f.Manager != "big-writer" {
		t.Fatalf("drift = %+v, want .data.message held by big-writer", w.Status.Drift)
	}
	if len(f.Live) > v1alpha1.MaxValueBytes || len(w.Status.Drift[0].Diff) > v1alpha1.MaxDiffBytes {
		t.Errorf("live value %d bytes, diff %d bytes; want at most %d and %d", len(f.Live), len(w.Status.Drift[0].Diff), v1alpha1.MaxValueBytes, v1alpha1.MaxDiffBytes)
	}
}

// Types known only from the inventory are pruned without an informer, and a
// type the API server does not serve is nothing to prune.
func TestRemovedTypesInTheInventory(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1})
	w := waitReady(t, ns, "web")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: "left-over",
		Labels:          map[string]string{v1alpha1.LabelManagedBy: "stencil", v1alpha1.LabelOwnerUID: string(w.UID)},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "test.stencil.dev/v1alpha1", Kind: "Widget", Name: "web", UID: w.UID, Controller: new(true)}},
	}}
	if err := k8s.Create(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	inventory := append(slices.Clone(w.Status.Inventory),
		v1alpha1.InventoryEntry{APIVersion: "v1", Kind: "Secret", Namespace: ns, Name: "left-over"},
		v1alpha1.InventoryEntry{APIVersion: "gone.example.com/v1", Kind: "Gadget", Namespace: ns, Name: "x"})
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"inventory": inventory}})
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Status().Patch(t.Context(), w, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "Secret pruned and the inventory back to the render", func() error {
		if _, err := get(t, &corev1.Secret{}, ns, "left-over"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Secret: %w", err)
		}
		w := getWidget(t, ns, "web")
		if err := readyErr(w); err != nil {
			return err
		}
		if len(w.Status.Inventory) != 2 {
			return fmt.Errorf("inventory = %v", w.Status.Inventory)
		}
		return nil
	})
}

// Under Report, a new render leaves the fields another manager took as they
// are, and keeps reporting them.
func TestReportSurvivesARerender(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 2, DriftPolicy: v1alpha1.DriftReport})
	waitReady(t, ns, "web")
	scale(t, ns, "web", 5, "autoscaler")
	waitCondition(t, ns, "web", v1alpha1.ConditionDrifted, metav1.ConditionTrue, v1alpha1.ReasonDriftDetected)

	updateSpec(t, ns, "web", func(s *testv1alpha1.WidgetSpec) { s.CPU = "0.5" })
	w := waitReady(t, ns, "web")
	d, _ := get(t, &appsv1.Deployment{}, ns, "web")
	if cpu := d.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String(); cpu != "500m" {
		t.Fatalf("cpu request = %s, want the new render applied", cpu)
	}
	if *d.Spec.Replicas != 5 {
		t.Errorf("replicas = %d after a new render under Report, want the autoscaler's 5", *d.Spec.Replicas)
	}
	if f := findField(w, "Deployment", ".spec.replicas"); f == nil || f.Manager != "autoscaler" || f.Live != "5" {
		t.Errorf("drift = %+v, want .spec.replicas held by autoscaler at 5", w.Status.Drift)
	}
	if !meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.ConditionDrifted) {
		t.Errorf("Drifted = %+v, want True", meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionDrifted))
	}
}

// A cluster-scoped object whose events have not reached the cache when its
// resource is deleted is still cleaned up.
func TestDeletedRightAfterApply(t *testing.T) {
	ns := newNamespace(t)
	role := "widget-" + ns + "-web"
	requests.inject(t, fault{path: "/clusterroles", drop: role})
	w := createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, ClusterRole: true})
	waitReady(t, ns, "web")
	if _, err := get(t, &rbacv1.ClusterRole{}, "", role); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	waitGone(t, 30*time.Second, "Widget and ClusterRole gone",
		&testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}})
}

// An object deleted before the cache saw it (its events lost) is still
// re-created: the watch never shows the apply, so recheckUnseen wakes the
// resource, whose reconcile looks past the cache.
func TestObjectDeletedUnseenIsRecreated(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	requests.inject(t, fault{path: "/configmaps", drop: "unseen-config"})
	createWidget(t, ns, "unseen", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1})
	waitReady(t, ns, "unseen")
	cm, err := get(t, &corev1.ConfigMap{}, ns, "unseen-config")
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "ConfigMap re-created", func() error {
		again, err := get(t, &corev1.ConfigMap{}, ns, "unseen-config")
		if err == nil && again.UID == cm.UID {
			return fmt.Errorf("still the old one")
		}
		return err
	})
}

// A spec fix that arrives while stencil writes the status of a failed
// render is not dropped.
func TestSpecFixDuringStatusWriteIsApplied(t *testing.T) {
	ns := newNamespace(t)
	statusPath := "/namespaces/" + ns + "/widgets/web/status"
	requests.inject(t, fault{method: "PATCH", path: statusPath, delay: 3 * time.Second})
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, Fail: true})
	eventually(t, 30*time.Second, "the failed render's status write in flight", func() error {
		if sent, done := requests.countPath("PATCH", statusPath), requests.countDone("PATCH", statusPath); sent == 0 || done == sent {
			return fmt.Errorf("%d status writes sent, %d of them ended", sent, done)
		}
		return nil
	})
	updateSpec(t, ns, "web", func(s *testv1alpha1.WidgetSpec) { s.Fail = false })
	waitReady(t, ns, "web")
}

// While its namespace is being deleted, a resource is left alone: the
// children the namespace controller removes are not re-applied in a loop.
func TestNamespaceDeletionIsQuiet(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, Service: true})
	waitReady(t, ns, "web")
	// Keep the Widget from going, so the namespace stays terminating.
	denyWidgets(t, ns, admissionregistrationv1.Delete, "false")
	waitDenied(t, func() error { return k8s.Delete(t.Context(), getWidget(t, ns, "web"), client.DryRunAll) })
	before := requests.countIn("PATCH", ns)
	if err := k8s.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Widget's children deleted", func() error {
		if _, err := get(t, &corev1.ConfigMap{}, ns, "web-config"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("ConfigMap: %w", err)
		}
		return nil
	})
	time.Sleep(10 * time.Second)
	if n := requests.countIn("PATCH", ns) - before; n > 6 {
		t.Errorf("the operator sent %d PATCH requests in the terminating namespace, want at most one apply per deleted child", n)
	}
}

// A resource deleted and created again under its name finds its
// predecessor's objects still there until the garbage collector deletes
// them: that resolves itself, so it is Reconciling, not Stalled, and the
// new resource takes the names as soon as they are gone.
func TestRecreatedResourceWaitsForItsPredecessor(t *testing.T) {
	waitGarbageCollector(t)
	ns := newNamespace(t)
	old := createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1})
	waitReady(t, ns, "web")
	// A finalizer of the test's holds the old ConfigMap after the garbage
	// collector deleted it (stencil may apply the ConfigMap meanwhile, the
	// garbage collector deletes it: setHold reads it again on a conflict).
	setHold(t, ns, "web-config", true)
	if err := k8s.Delete(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	waitGone(t, 30*time.Second, "the old Widget gone", &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})

	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1})
	w := waitCondition(t, ns, "web", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonOwnershipConflict)
	if c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionStalled); c != nil {
		t.Errorf("Stalled = %+v; want none, the conflict resolves itself", c)
	}
	if msg := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "deleted resource of the same name") || strings.Contains(msg, "kubectl annotate") {
		t.Errorf("Ready message %q; want it to say the predecessor's object goes by itself", msg)
	}
	setHold(t, ns, "web-config", false)
	w = waitReady(t, ns, "web")
	cm, err := get(t, &corev1.ConfigMap{}, ns, "web-config")
	if err != nil || cm.Labels[v1alpha1.LabelOwnerUID] != string(w.UID) {
		t.Fatalf("ConfigMap web-config: %v, owner label %q; want the new Widget's %s", err, cm.Labels[v1alpha1.LabelOwnerUID], w.UID)
	}
}

// An object that carries the resource's owner label and annotation, but
// whose controller is someone else, is not the resource's: labels are
// easily copied. And stencil never takes over an object that another
// controller holds, even when asked to.
func TestCopiedLabelsDoNotMakeAnObjectOurs(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1})
	w := waitReady(t, ns, "web")
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "parent"}}
	if err := k8s.Create(t.Context(), parent); err != nil {
		t.Fatal(err)
	}
	owner := "Widget.test.stencil.dev/" + ns + "/web"
	copied := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "copied",
			Labels:          map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByStencil, v1alpha1.LabelOwnerUID: string(w.UID)},
			Annotations:     map[string]string{v1alpha1.AnnotationOwner: owner, v1alpha1.AnnotationAdopt: owner},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "parent", UID: parent.UID, Controller: new(true)}},
		},
		Data: map[string]string{"message": "the parent's"},
	}
	if err := k8s.Create(t.Context(), copied, client.FieldOwner("parent-controller")); err != nil {
		t.Fatal(err)
	}
	updateSpec(t, ns, "web", func(s *testv1alpha1.WidgetSpec) { s.ConfigName = "copied" })
	w = waitCondition(t, ns, "web", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonOwnershipConflict)
	msg := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady).Message
	if !strings.Contains(msg, "controlled by ConfigMap parent") || strings.Contains(msg, "kubectl annotate") {
		t.Errorf("Ready message %q; want it to name the controller and offer no adoption", msg)
	}
	touch(t, ns)
	waitIdle(t, &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	cm, _ := get(t, &corev1.ConfigMap{}, ns, "copied")
	if cm.Data["message"] != "the parent's" || len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != parent.UID {
		t.Fatalf("the parent's ConfigMap was changed: data %v, ownerReferences %v", cm.Data, cm.OwnerReferences)
	}
	for _, e := range cm.ManagedFields {
		if e.Manager == "stencil" {
			t.Fatalf("stencil wrote the parent's ConfigMap: %+v", e)
		}
	}
	if _, err := get(t, &corev1.ConfigMap{}, ns, "web-config"); err != nil {
		t.Errorf("ConfigMap web-config: %v; want it kept (nothing is pruned during a conflict)", err)
	}
}

// An adoption applies the object only as it was when stencil read the
// adopt annotation: withdrawn before the apply lands, it is not adopted.
func TestWithdrawnAdoptionIsNotApplied(t *testing.T) {
	ns := newNamespace(t)
	mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-config"}, Data: map[string]string{"message": "mine"}}
	if err := k8s.Create(t.Context(), mine, client.FieldOwner("kubectl-create")); err != nil {
		t.Fatal(err)
	}
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1})
	waitCondition(t, ns, "web", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonOwnershipConflict)

	// stencil's apply of the ConfigMap waits 4 s before it is sent; the
	// annotation is withdrawn meanwhile.
	undelay := requests.inject(t, fault{method: "PATCH", path: "/namespaces/" + ns + "/configmaps/web-config", delay: 4 * time.Second})
	cmPath := "/namespaces/" + ns + "/configmaps/web-config"
	patches := requests.countPath("PATCH", cmPath)
	setAdopt := func(value *string) {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationAdopt: value}}})
		if err := k8s.Patch(t.Context(), mine, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	owner := "Widget.test.stencil.dev/" + ns + "/web"
	setAdopt(&owner)
	touch(t, ns)
	eventually(t, 30*time.Second, "stencil's apply of the ConfigMap under way", func() error {
		if requests.countPath("PATCH", cmPath) == patches {
			return fmt.Errorf("no PATCH of %s yet", cmPath)
		}
		return nil
	})
	setAdopt(nil)
	eventually(t, 30*time.Second, "stencil's held applies of the ConfigMap ended", func() error {
		if sent, done := requests.countPath("PATCH", cmPath), requests.countDone("PATCH", cmPath); done < sent {
			return fmt.Errorf("%d of %d applies ended", done, sent)
		}
		return nil
	})
	undelay()
	touch(t, ns)
	waitIdle(t, &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	waitCondition(t, ns, "web", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonOwnershipConflict)
	cm, _ := get(t, &corev1.ConfigMap{}, ns, "web-config")
	if cm.Data["message"] != "mine" || len(cm.Labels) != 0 || len(cm.OwnerReferences) != 0 {
		t.Fatalf("the ConfigMap was adopted after the request was withdrawn: data %v, labels %v, ownerReferences %v", cm.Data, cm.Labels, cm.OwnerReferences)
	}
}

// A resource being deleted whose cleanup fails says so in its status, and
// finishes once the cleanup can go on.
func TestCleanupFailureIsReported(t *testing.T) {
	ns := newNamespace(t)
	w := createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, ClusterRole: true})
	waitReady(t, ns, "web")
	role := "widget-" + ns + "-web"
	restore := requests.inject(t, fault{method: "DELETE", path: "/clusterroles/" + role, fail: true})
	if err := k8s.Delete(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	w = waitCondition(t, ns, "web", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonCleanupFailed)
	if !meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.ConditionReconciling) {
		t.Errorf("conditions = %+v; want Reconciling", w.Status.Conditions)
	}
	if msg := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, role) || strings.Contains(msg, "bug") {
		t.Errorf("Ready message %q; want it to name the ClusterRole, and not call this a bug", msg)
	}
	if _, err := get(t, &rbacv1.ClusterRole{}, "", role); err != nil {
		t.Errorf("ClusterRole: %v; want it still there", err)
	}
	restore()
	waitGone(t, 60*time.Second, "the Widget and its ClusterRole gone",
		&testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}})
}

// Under Report, a field another manager holds with the very value the
// template sets is not drift.
func TestHeldFieldWithTheDesiredValueIsNotDrift(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 2, DriftPolicy: v1alpha1.DriftReport})
	waitReady(t, ns, "web")
	scale(t, ns, "web", 4, "autoscaler")
	waitCondition(t, ns, "web", v1alpha1.ConditionDrifted, metav1.ConditionTrue, v1alpha1.ReasonDriftDetected)
	scale(t, ns, "web", 2, "autoscaler")
	waitCondition(t, ns, "web", v1alpha1.ConditionDrifted, metav1.ConditionFalse, v1alpha1.ReasonInSync)
	assertNotDrifted(t, ns, "web", 2*time.Second)
}

// A render that changes a field the API server does not let change (a
// Deployment's selector) leaves the object as it is: the resource is
// Stalled with a message naming the object and the field, its other
// objects are applied, and nothing is pruned. Deleting the object lets
// stencil create it anew, and the resource converges.
func TestImmutableFieldChangeStalls(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, Track: "stable", Service: true})
	waitReady(t, ns, "web")
	updateSpec(t, ns, "web", func(s *testv1alpha1.WidgetSpec) { s.Track, s.Message, s.Service = "canary", "m2", false })
	w := waitCondition(t, ns, "web", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonImmutableField)
	msg := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady).Message
	for _, want := range []string{`Deployment "web"`, "spec.selector", "kubectl delete deployment.apps web -n " + ns} {
		if !strings.Contains(msg, want) {
			t.Errorf("Ready message %q does not contain %q", msg, want)
		}
	}
	if w.Status.ObservedGeneration == w.Generation {
		t.Errorf("observedGeneration = %d: the refused generation is claimed", w.Status.ObservedGeneration)
	}
	if cm, _ := get(t, &corev1.ConfigMap{}, ns, "web-config"); cm.Data["message"] != "m2" {
		t.Errorf("ConfigMap message = %q, want m2: the other objects are applied", cm.Data["message"])
	}
	if _, err := get(t, &corev1.Service{}, ns, "web"); err != nil {
		t.Errorf("Service: %v; want it kept, nothing is pruned while the resource is stalled", err)
	}

	if err := k8s.Delete(t.Context(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, "web")
	eventually(t, 30*time.Second, "the Deployment created anew, and the Service pruned", func() error {
		d, err := get(t, &appsv1.Deployment{}, ns, "web")
		if err != nil {
			return fmt.Errorf("Deployment: %w", err)
		}
		if d.Spec.Selector.MatchLabels["track"] != "canary" {
			return fmt.Errorf("Deployment selector %v, want track canary", d.Spec.Selector.MatchLabels)
		}
		if _, err := get(t, &corev1.Service{}, ns, "web"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Service: %w", err)
		}
		return nil
	})
}

// fight scales the Deployment every 100 ms for d as an autoscaler does
// (through the scale subresource, manager "autoscaler"), between 3 and 4
// replicas, and returns the operator's requests in ns meanwhile.
func fight(t *testing.T, ns, name string, d time.Duration) int {
	t.Helper()
	before := requests.countIn("", ns)
	for i := 0; i*100 < int(d.Milliseconds()); i++ {
		scale(t, ns, name, 3+i%2, "autoscaler")
		time.Sleep(100 * time.Millisecond)
	}
	return requests.countIn("", ns) - before
}

// A field the template hands over (stencil.dev/hand-over) is left to the
// manager that takes it: an autoscaler scaling every 100 ms for 10 s gets
// no apply, only status writes that tell how the scaling Deployment's
// health goes, at most one a second; the value stays the autoscaler's and
// is not drift, and a later render (a spec change) leaves it too.
func TestHandedOverFieldIsLeftToItsNewManager(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 2, HandOverReplicas: true})
	waitReady(t, ns, "web")
	statusWrites := requests.countPath("PATCH", "/widgets/web/status")
	began := time.Now()
	n := fight(t, ns, "web", 10*time.Second)
	lasted := time.Since(began)
	statusWrites = requests.countPath("PATCH", "/widgets/web/status") - statusWrites
	t.Logf("stencil sent %d requests during a 10 s fight over a handed-over field (%s with the scale requests), %d of them status writes",
		n, lasted.Round(100*time.Millisecond), statusWrites)
	if n != statusWrites {
		t.Errorf("stencil sent %d requests other than status writes while the autoscaler scaled; want none", n-statusWrites)
	}
	if bound := int(lasted/time.Second) + 2; statusWrites > bound { // status writes that only tell of health: one a second
		t.Errorf("stencil wrote status %d times in %s while the autoscaler scaled; want at most once a second (%d)", statusWrites, lasted, bound)
	}
	if got := replicas(t, ns); got != 4 {
		t.Errorf("replicas = %d, want the autoscaler's 4", got)
	}
	updateSpec(t, ns, "web", func(s *testv1alpha1.WidgetSpec) { s.Message, s.Replicas = "m2", 5 })
	eventually(t, 30*time.Second, "the new render applied", func() error {
		if cm, _ := get(t, &corev1.ConfigMap{}, ns, "web-config"); cm.Data["message"] != "m2" {
			return fmt.Errorf("ConfigMap message %q", cm.Data["message"])
		}
		return nil
	})
	w := waitReady(t, ns, "web")
	if got := replicas(t, ns); got != 4 {
		t.Errorf("replicas = %d after a new render, want the autoscaler's 4", got)
	}
	if c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionDrifted); c == nil || c.Status != metav1.ConditionFalse || len(w.Status.Drift) > 0 {
		t.Errorf("Drifted = %+v, drift = %+v; want none", c, w.Status.Drift)
	}
}

// An object whose template disables its pruning (stencil.dev/prune:
// disabled) carries no ownerReference, and survives both a render that no
// longer holds it and the deletion of its custom resource.
func TestKeptObjectSurvivesPruneAndDeletion(t *testing.T) {
	waitGarbageCollector(t) // it deletes the Widget's Deployment
	ns := newNamespace(t)
	w := createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, KeepConfig: true, ConfigName: "first"})
	waitReady(t, ns, "web")
	cm, err := get(t, &corev1.ConfigMap{}, ns, "first")
	if err != nil || len(cm.OwnerReferences) != 0 || cm.Labels[v1alpha1.LabelOwnerUID] != string(w.UID) {
		t.Fatalf("ConfigMap first: %v, ownerReferences %v, labels %v; want ours, without ownerReference", err, cm.OwnerReferences, cm.Labels)
	}
	updateSpec(t, ns, "web", func(s *testv1alpha1.WidgetSpec) { s.ConfigName = "second" })
	eventually(t, 30*time.Second, "ConfigMap second applied", func() error {
		_, err := get(t, &corev1.ConfigMap{}, ns, "second")
		return err
	})
	waitReady(t, ns, "web")
	if _, err := get(t, &corev1.ConfigMap{}, ns, "first"); err != nil {
		t.Errorf("ConfigMap first: %v; want it kept on prune", err)
	}
	if err := k8s.Delete(t.Context(), getWidget(t, ns, "web")); err != nil {
		t.Fatal(err)
	}
	waitGone(t, 90*time.Second, "the Deployment garbage-collected", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	for _, name := range []string{"first", "second"} {
		if _, err := get(t, &corev1.ConfigMap{}, ns, name); err != nil {
			t.Errorf("ConfigMap %s: %v; want it kept after the Widget's deletion", name, err)
		}
	}
}

// A create-only object (stencil.dev/ssa: IfNotPresent) is created when
// missing and never updated: a user's edit is reported as drift, not
// reverted, and a new render leaves the object as it is.
func TestCreateOnlyObjectIsNeverUpdated(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, CreateOnlyConfig: true})
	waitReady(t, ns, "web")
	cm, _ := get(t, &corev1.ConfigMap{}, ns, "web-config")
	patch := client.RawPatch(types.MergePatchType, []byte(`{"data":{"message":"edited"}}`))
	if err := k8s.Patch(t.Context(), cm, patch, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	w := waitCondition(t, ns, "web", v1alpha1.ConditionDrifted, metav1.ConditionTrue, v1alpha1.ReasonDriftDetected)
	if f := findField(w, "ConfigMap", ".data.message"); f == nil || f.Live != `"edited"` || f.Manager != "kubectl-edit" {
		t.Errorf("drift = %+v; want .data.message edited by kubectl-edit", w.Status.Drift)
	}
	updateSpec(t, ns, "web", func(s *testv1alpha1.WidgetSpec) { s.Message = "m2" })
	eventually(t, 30*time.Second, "the new generation reconciled", func() error {
		w := getWidget(t, ns, "web")
		if w.Status.ObservedGeneration != w.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", w.Status.ObservedGeneration, w.Generation)
		}
		return nil
	})
	time.Sleep(time.Second)
	if cm, _ := get(t, &corev1.ConfigMap{}, ns, "web-config"); cm.Data["message"] != "edited" {
		t.Errorf("ConfigMap message = %q, want the user's edit kept", cm.Data["message"])
	}
	if err := k8s.Delete(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the ConfigMap created anew from the new render", func() error {
		cm, err := get(t, &corev1.ConfigMap{}, ns, "web-config")
		if err != nil || cm.Data["message"] != "m2" {
			return fmt.Errorf("ConfigMap: %w, message %q", err, cm.Data["message"])
		}
		return nil
	})
}

// A writer that keeps taking a field back (an autoscaler scaling every
// 100 ms for 10 s, with no hand-over rule) does not get a fight at API
// speed: stencil paces its corrections, says who it fights with over what
// in Drifted (reason FieldFight) and an event, counts the fight, and
// corrects the field once the writer stops.
func TestFightIsPaced(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 2})
	waitReady(t, ns, "web")
	fightsBefore := metric(t, "stencil_fights_total", map[string]string{"kind": "Widget"})
	n := fight(t, ns, "web", 10*time.Second)
	t.Logf("stencil sent %d requests during a 10 s fight with a writer that scales every 100 ms", n)
	if n > 40 {
		t.Errorf("stencil sent %d requests during a 10 s fight; want at most 40 (a few a second)", n)
	}
	w := waitCondition(t, ns, "web", v1alpha1.ConditionDrifted, metav1.ConditionTrue, v1alpha1.ReasonFieldFight)
	if msg := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionDrifted).Message; !strings.Contains(msg, "autoscaler") || !strings.Contains(msg, ".spec.replicas") || !strings.Contains(msg, "stencil.dev/hand-over") {
		t.Errorf("Drifted message %q; want the other manager, the field and the hand-over rule", msg)
	}
	waitEvent(t, ns, "web", v1alpha1.ReasonFieldFight)
	if got := metric(t, "stencil_fights_total", map[string]string{"kind": "Widget"}); got != fightsBefore+1 {
		t.Errorf("stencil_fights_total = %v, want %v", got, fightsBefore+1)
	}
	eventually(t, 60*time.Second, "replicas corrected once the writer stopped", func() error {
		if got := replicas(t, ns); got != 2 {
			return fmt.Errorf("replicas = %d", got)
		}
		return nil
	})
}

// With stencil.dev/force: enabled, a render that changes an immutable field
// deletes the object and creates it anew, with a Normal event Recreated.
func TestImmutableFieldChangeRecreates(t *testing.T) {
	ns := newNamespace(t)
	createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", Replicas: 1, Track: "stable", RecreateDeployment: true})
	waitReady(t, ns, "web")
	old, _ := get(t, &appsv1.Deployment{}, ns, "web")
	updateSpec(t, ns, "web", func(s *testv1alpha1.WidgetSpec) { s.Track = "canary" })
	eventually(t, 30*time.Second, "the Deployment created anew with the new selector", func() error {
		d, err := get(t, &appsv1.Deployment{}, ns, "web")
		if err != nil {
			return fmt.Errorf("Deployment: %w", err)
		}
		if d.UID == old.UID || d.Spec.Selector.MatchLabels["track"] != "canary" {
			return fmt.Errorf("Deployment UID %s (old %s), selector %v", d.UID, old.UID, d.Spec.Selector.MatchLabels)
		}
		return nil
	})
	w := waitReady(t, ns, "web")
	if w.Status.ObservedGeneration != w.Generation {
		t.Errorf("observedGeneration %d, generation %d", w.Status.ObservedGeneration, w.Generation)
	}
	eventually(t, 30*time.Second, "a Recreated event", func() error {
		events := &eventsv1.EventList{}
		if err := k8s.List(t.Context(), events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == "web" && e.Reason == "Recreated" && strings.Contains(e.Note, "spec.selector") {
				return nil
			}
		}
		return fmt.Errorf("no Recreated event among %d", len(events.Items))
	})
}

// A StatefulSet whose template lets stencil recreate it (stencil.dev/force:
// enabled) is recreated only when its live claim retention policy keeps its
// claims: the delete happens under the live policy, not the render's. A
// render that changes volumeClaimTemplates (immutable) and, in the same
// apply, sets whenDeleted: Retain is refused as a whole, so a StatefulSet
// whose live policy is Delete still has it: the resource is Stalled with a
// message that the object holds data, and the StatefulSet and its claim
// stay. Where the live policy is Retain, the same render recreates the
// StatefulSet and the claim survives. Before issue 32 the guard read the
// render's Retain, deleted the StatefulSet under its live Delete, and the
// garbage collector took the claim with it: LiveDelete failed.
func TestImmutableFieldChangeDecidesDataOnTheLiveObject(t *testing.T) {
	for _, tt := range []struct {
		name, liveWhenDeleted string
		recreated             bool
	}{
		{"LiveDelete", "Delete", false},
		{"LiveRetain", "Retain", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := newNamespace(t)
			createWidget(t, ns, "web", testv1alpha1.WidgetSpec{Message: "m", StatefulSet: &testv1alpha1.WidgetStatefulSet{Storage: "1Gi", WhenDeleted: tt.liveWhenDeleted}})
			var sts *appsv1.StatefulSet
			var pvc *corev1.PersistentVolumeClaim
			eventually(t, 30*time.Second, "the StatefulSet and its claim", func() error {
				var err error
				if sts, err = get(t, &appsv1.StatefulSet{}, ns, "web"); err != nil {
					return fmt.Errorf("StatefulSet: %w", err)
				}
				if pvc, err = get(t, &corev1.PersistentVolumeClaim{}, ns, "data-web-0"); err != nil {
					return fmt.Errorf("claim: %w", err)
				}
				// Under Delete, the StatefulSet controller makes the
				// StatefulSet the claim's controller: the garbage
				// collector deletes the claim with it.
				if owned := metav1.IsControlledBy(pvc, sts); owned != (tt.liveWhenDeleted == "Delete") {
					return fmt.Errorf("claim controlled by the StatefulSet: %v", owned)
				}
				return nil
			})
			updateSpec(t, ns, "web", func(s *testv1alpha1.WidgetSpec) {
				s.StatefulSet = &testv1alpha1.WidgetStatefulSet{Storage: "2Gi", WhenDeleted: "Retain"}
			})

			if !tt.recreated {
				var w *testv1alpha1.Widget
				eventually(t, 30*time.Second, "Widget web Stalled (ImmutableField)", func() error {
					assertKept(t, sts, pvc)
					w = getWidget(t, ns, "web")
					if c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonImmutableField {
						return fmt.Errorf("Stalled = %+v", c)
					}
					return nil
				})
				msg := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady).Message
				for _, want := range []string{`StatefulSet "web"`, "spec.volumeClaimTemplates", "holds data", "stencil.dev/force: enabled-data-loss"} {
					if !strings.Contains(msg, want) {
						t.Errorf("Ready message %q does not contain %q", msg, want)
					}
				}
				for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
					assertKept(t, sts, pvc)
				}
				return
			}

			eventually(t, 30*time.Second, "the StatefulSet created anew with the new claim template", func() error {
				s, err := get(t, &appsv1.StatefulSet{}, ns, "web")
				if err != nil {
					return fmt.Errorf("StatefulSet: %w", err)
				}
				if storage := s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage(); s.UID == sts.UID || storage.String() != "2Gi" {
					return fmt.Errorf("StatefulSet UID %s (old %s), storage %s", s.UID, sts.UID, storage)
				}
				return nil
			})
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				assertKept(t, pvc)
			}
		})
	}
}

// assertKept fails the test unless each object is still the very one
// given (same UID), and not being deleted.
func assertKept(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		live, err := get(t, o.DeepCopyObject().(client.Object), o.GetNamespace(), o.GetName())
		if err != nil || live.GetUID() != o.GetUID() || live.GetDeletionTimestamp() != nil {
			t.Fatalf("%T %s: %v, UID %s (was %s), deletionTimestamp %v; want it kept", o, o.GetName(), err, live.GetUID(), o.GetUID(), live.GetDeletionTimestamp())
		}
	}
}
