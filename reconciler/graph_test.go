package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testkind"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/internal/testing/testutil/testop"
	"github.com/stencil-operator/stencil/render"
)

// startGadgets runs an operator for the Gadget graph kind until the test
// ends, after the test's Gadgets are gone (a graph kind's resources carry a
// finalizer that only a running operator removes). It returns the counter
// of its requests.
func startGadgets(t *testing.T) (*counter, context.CancelFunc) {
	t.Helper()
	return startGadgetKind(t, testkind.Gadget())
}

// startGadgetKind is startGadgets with the Gadget kind's templates of def.
func startGadgetKind(t *testing.T, def render.Definition) (*counter, context.CancelFunc) {
	t.Helper()
	cluster.Get(t)
	kind, err := render.Load(def)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	c := &counter{}
	if err := testop.StartOperator(ctx, cluster.Get(t).Config, k8s.Scheme(), []*render.Kind{kind}, c.wrap); err != nil {
		t.Fatal(err)
	}
	return c, stop
}

// newGadgetNamespace is newNamespace, whose Gadgets are deleted (and gone)
// before the operator stops.
func newGadgetNamespace(t *testing.T) string {
	t.Helper()
	ns := newNamespace(t)
	t.Cleanup(func() { deleteGadgets(t, ns) })
	return ns
}

// deleteGadgets deletes the Gadgets of ns and waits until they are gone.
func deleteGadgets(t *testing.T, ns string) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	eventually(t, 30*time.Second, "the test's Gadgets deleted", func() error {
		if err := k8s.DeleteAllOf(ctx, &testv1alpha1.Gadget{}, client.InNamespace(ns)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		list := &testv1alpha1.GadgetList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d Gadgets left", len(list.Items))
		}
		return nil
	})
}

func createGadget(t *testing.T, ns, name string, spec testv1alpha1.GadgetSpec) {
	t.Helper()
	cluster.Get(t)
	g := &testv1alpha1.Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := k8s.Create(t.Context(), g); err != nil {
		t.Fatal(err)
	}
}

func createSettings(t *testing.T, ns, name, greeting string) {
	t.Helper()
	cluster.Get(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"greeting": greeting}}
	if err := k8s.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
}

// gadgetCondition is nil when the Gadget's condition typ has status and
// reason, and its message holds every one of messages.
func gadgetCondition(t *testing.T, ns, name, typ string, status metav1.ConditionStatus, reason string, messages ...string) error {
	t.Helper()
	g := &testv1alpha1.Gadget{}
	if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, g); err != nil {
		return err
	}
	c := meta.FindStatusCondition(g.Status.Conditions, typ)
	if c == nil || c.Status != status || c.Reason != reason {
		return fmt.Errorf("%s is %+v", typ, c)
	}
	for _, m := range messages {
		if !strings.Contains(c.Message, m) {
			return fmt.Errorf("%s's message %q does not say %q", typ, c.Message, m)
		}
	}
	return nil
}

func exists(t *testing.T, obj client.Object, ns, name string) bool {
	t.Helper()
	err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func openGate(t *testing.T, ns, gadget string) {
	t.Helper()
	gate := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gadget + "-gate"}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"test.stencil.dev/open":"yes"}}}`))
	if err := k8s.Patch(t.Context(), gate, patch); err != nil {
		t.Fatal(err)
	}
}

// TestGraphGateWaitsWithoutRequests: a node whose gate is closed is not
// rendered; the resource says, Reconciling, what it waits for; and while it
// waits the operator sends no request at all. Opening the gate (an event of
// the gate's object) renders the node.
func TestGraphGateWaitsWithoutRequests(t *testing.T) {
	requests, _ := startGadgets(t)
	ns := newGadgetNamespace(t)
	createSettings(t, ns, "settings", "hi")
	createGadget(t, ns, "g", testv1alpha1.GadgetSpec{Value: "v", Settings: "settings"})
	eventually(t, 30*time.Second, "the Gadget waiting for its gate", func() error {
		return errors.Join(
			gadgetCondition(t, ns, "g", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonWaiting, "after-gate waits for gate: ConfigMap g-gate: readyWhen[0]"),
			gadgetCondition(t, ns, "g", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonWaiting))
	})
	for _, name := range []string{"g-gate", "g-value", "g-settings"} {
		if !exists(t, &corev1.ConfigMap{}, ns, name) {
			t.Errorf("ConfigMap %s: not applied; every node whose turn has come is", name)
		}
	}
	if exists(t, &corev1.ConfigMap{}, ns, "g-after-gate") {
		t.Fatal("ConfigMap g-after-gate applied while its gate is closed")
	}
	// A closed gate is not a loop: nothing is sent while it stays closed,
	// once the last writes' own events have reached the operator and what
	// they woke has ended.
	waitSeen(t, requests, stencilObjects(t, ns, &testv1alpha1.Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"}})...)
	testutil.Settle(t, time.Minute, time.Second, "the operator's requests in "+ns, func() int { return requests.countIn("", ns) })
	before := requests.countIn("", ns)
	time.Sleep(3 * time.Second)
	if sent := requests.countIn("", ns) - before; sent != 0 {
		t.Fatalf("the operator sent %d requests in 3 s while the gate stayed closed; want 0", sent)
	}
	t.Logf("a closed gate: 0 requests in 3 s")
	openGate(t, ns, "g")
	eventually(t, 30*time.Second, "the Gadget Ready once its gate opened", func() error {
		return gadgetCondition(t, ns, "g", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
	})
	late := &corev1.ConfigMap{}
	if !exists(t, late, ns, "g-after-gate") {
		t.Fatal("the Gadget is Ready and g-after-gate is not applied")
	}
	// The gate closes again: the node after it waits, and keeps its object.
	gate := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g-gate"}}
	if err := k8s.Patch(t.Context(), gate, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"test.stencil.dev/open":null}}}`))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Gadget waiting again", func() error {
		return gadgetCondition(t, ns, "g", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonWaiting, "after-gate waits for gate")
	})
	kept := &corev1.ConfigMap{}
	if !exists(t, kept, ns, "g-after-gate") || kept.UID != late.UID || kept.DeletionTimestamp != nil {
		t.Fatal("g-after-gate was pruned while its node waits: a node that waits keeps its objects")
	}
}

// TestGraphWaitsForValuesAndInputs: a node that needs a value that is not
// there yet, or an input that does not exist, is not rendered (never with an
// empty value); status says what it waits for. The input's creation and
// change reach the resource through the watch.
func TestGraphWaitsForValuesAndInputs(t *testing.T) {
	startGadgets(t)
	ns := newGadgetNamespace(t)
	createGadget(t, ns, "m", testv1alpha1.GadgetSpec{Settings: "later"})
	eventually(t, 30*time.Second, "the Gadget waiting for a value and an input", func() error {
		return gadgetCondition(t, ns, "m", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonWaiting,
			"copy waits for ConfigMap m-value to have data.value", "settings waits for ConfigMap "+ns+"/later to exist")
	})
	if exists(t, &corev1.Secret{}, ns, "m-copy") || exists(t, &corev1.ConfigMap{}, ns, "m-settings") {
		t.Fatal("a node that waits for a value or an input was applied")
	}
	createSettings(t, ns, "later", "hello")
	eventually(t, 30*time.Second, "the input's creation rendering the node that reads it", func() error {
		cm := &corev1.ConfigMap{}
		if !exists(t, cm, ns, "m-settings") || cm.Data["greeting"] != "hello" {
			return fmt.Errorf("m-settings: %v", cm.Data)
		}
		return nil
	})
	input := &corev1.ConfigMap{}
	exists(t, input, ns, "later")
	input.Data["greeting"] = "bye"
	if err := k8s.Update(t.Context(), input); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the input's change reaching the node that reads it", func() error {
		cm := &corev1.ConfigMap{}
		if !exists(t, cm, ns, "m-settings") || cm.Data["greeting"] != "bye" {
			return fmt.Errorf("m-settings: %v", cm.Data)
		}
		return nil
	})
	g := &testv1alpha1.Gadget{}
	exists(t, g, ns, "m")
	// A merge patch: the operator writes the Gadget's status meanwhile.
	if err := k8s.Patch(t.Context(), g, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"value":"now"}}`))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the copy rendered once the value exists", func() error {
		s := &corev1.Secret{}
		if !exists(t, s, ns, "m-copy") || string(s.Data["value"]) != "now" {
			return fmt.Errorf("m-copy: %v", s.Data)
		}
		return nil
	})
}

// TestGraphGeneratedValueKeptAcrossRestarts: a createOnly node's generated
// value is created once: another process, and renders that generate other
// values, never replace it.
func TestGraphGeneratedValueKeptAcrossRestarts(t *testing.T) {
	_, stop := startGadgets(t)
	ns := newGadgetNamespace(t)
	createSettings(t, ns, "settings", "hi")
	createGadget(t, ns, "r", testv1alpha1.GadgetSpec{Value: "one", Settings: "settings"})
	first := &corev1.Secret{}
	eventually(t, 30*time.Second, "the copy of the generated token", func() error {
		copied := &corev1.Secret{}
		if !exists(t, copied, ns, "r-copy") || !exists(t, first, ns, "r-token") {
			return fmt.Errorf("not applied yet")
		}
		if string(copied.Data["token"]) != string(first.Data["token"]) || len(first.Data["token"]) != 24 {
			return fmt.Errorf("r-copy holds %q, the token %q", copied.Data["token"], first.Data["token"])
		}
		return nil
	})
	stop()
	startGadgets(t) // a new process, with no memory of the first
	g := &testv1alpha1.Gadget{}
	exists(t, g, ns, "r")
	// A merge patch: the operator writes the Gadget's status meanwhile.
	if err := k8s.Patch(t.Context(), g, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"value":"two"}}`))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the new process rendering the new value", func() error {
		copied := &corev1.Secret{}
		if !exists(t, copied, ns, "r-copy") || string(copied.Data["value"]) != "two" {
			return fmt.Errorf("r-copy: %v", copied.Data)
		}
		if string(copied.Data["token"]) != string(first.Data["token"]) {
			return fmt.Errorf("r-copy's token changed: the token was generated again")
		}
		return nil
	})
	now := &corev1.Secret{}
	exists(t, now, ns, "r-token")
	if now.UID != first.UID || now.ResourceVersion != first.ResourceVersion || string(now.Data["token"]) != string(first.Data["token"]) {
		t.Fatalf("the generated token changed: uid %s→%s, version %s→%s", first.UID, now.UID, first.ResourceVersion, now.ResourceVersion)
	}
	deleteGadgets(t, ns) // while the second process runs: it removes the finalizer
}

// TestGraphDeletesInReverseOrder: deleting a graph kind's resource deletes
// its objects from the last stage to the first: the first stage's objects
// stay while a later stage's are still there.
func TestGraphDeletesInReverseOrder(t *testing.T) {
	startGadgets(t)
	ns := newGadgetNamespace(t)
	createSettings(t, ns, "settings", "hi")
	createGadget(t, ns, "d", testv1alpha1.GadgetSpec{Value: "v", Settings: "settings"})
	eventually(t, 30*time.Second, "the gate applied", func() error {
		if !exists(t, &corev1.ConfigMap{}, ns, "d-gate") {
			return fmt.Errorf("d-gate not applied yet")
		}
		return nil
	})
	openGate(t, ns, "d")
	eventually(t, 30*time.Second, "the Gadget Ready", func() error {
		return gadgetCondition(t, ns, "d", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)
	})
	// Hold one object of the last stage (1) with a finalizer of the test's.
	late := &corev1.ConfigMap{}
	setHold(t, ns, "d-after-gate", true)
	if err := k8s.Delete(t.Context(), &testv1alpha1.Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the last stage being deleted", func() error {
		exists(t, late, ns, "d-after-gate")
		if late.DeletionTimestamp == nil {
			return fmt.Errorf("d-after-gate not deleted yet")
		}
		return nil
	})
	eventually(t, 30*time.Second, "the Gadget saying it deletes stage by stage", func() error {
		return gadgetCondition(t, ns, "d", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDeleting, "reverse order of the graph")
	})
	for _, obj := range []struct {
		o    client.Object
		name string
	}{{&corev1.ConfigMap{}, "d-gate"}, {&corev1.ConfigMap{}, "d-value"}, {&corev1.Secret{}, "d-token"}, {&corev1.ConfigMap{}, "d-settings"}} {
		if !exists(t, obj.o, ns, obj.name) || obj.o.GetDeletionTimestamp() != nil {
			t.Errorf("%s (stage 0) deleted while stage 1 is still there", obj.name)
		}
	}
	setHold(t, ns, "d-after-gate", false)
	eventually(t, 30*time.Second, "the Gadget and its objects gone", func() error {
		for _, name := range []string{"d-gate", "d-value", "d-settings", "d-after-gate"} {
			if exists(t, &corev1.ConfigMap{}, ns, name) {
				return fmt.Errorf("%s is still there", name)
			}
		}
		for _, name := range []string{"d-token", "d-copy"} {
			if exists(t, &corev1.Secret{}, ns, name) {
				return fmt.Errorf("%s is still there", name)
			}
		}
		if exists(t, &testv1alpha1.Gadget{}, ns, "d") {
			return fmt.Errorf("the Gadget is still there")
		}
		return nil
	})
}

// hold is the tests' finalizer, which holds an object that is deleted.
const hold = "test.stencil.dev/hold"

// setHold adds (or removes) the finalizer hold on the ConfigMap ns/name,
// reading it again when another writer changed it meanwhile (the operator
// applies it; the garbage collector adds and removes its own finalizer on
// a foreground deletion). A hold it adds is removed when the test ends,
// whatever happened, so that the deletion of the ConfigMap and of its
// owner can finish.
func setHold(t *testing.T, ns, name string, on bool) {
	t.Helper()
	if err := updateHold(t, ns, name, on); err != nil {
		t.Fatalf("setting finalizer %s to %v on %s: %v", hold, on, name, err)
	}
	if on {
		t.Cleanup(func() {
			if err := updateHold(t, ns, name, false); err != nil {
				t.Errorf("removing finalizer %s from %s: %v", hold, name, err)
			}
		})
	}
}

// updateHold is setHold's update, retried on a conflict; removing the
// hold of a ConfigMap that is gone is done.
func updateHold(t *testing.T, ns, name string, on bool) error {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm); err != nil {
			if !on && apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		kept := slices.DeleteFunc(slices.Clone(cm.Finalizers), func(f string) bool { return f == hold })
		if on {
			kept = append(kept, hold)
		}
		if slices.Equal(kept, cm.Finalizers) {
			return nil
		}
		cm.Finalizers = kept
		return k8s.Update(ctx, cm)
	})
}

// stencilObjects is objs and the objects in ns that a stencil operator
// applied (ConfigMaps and Secrets that carry its labels).
func stencilObjects(t *testing.T, ns string, objs ...client.Object) []client.Object {
	t.Helper()
	owned := client.HasLabels{v1alpha1.LabelManagedBy, v1alpha1.LabelOwnerUID}
	cms, secrets := &corev1.ConfigMapList{}, &corev1.SecretList{}
	for _, list := range []client.ObjectList{cms, secrets} {
		if err := k8s.List(t.Context(), list, client.InNamespace(ns), owned); err != nil {
			t.Fatal(err)
		}
	}
	for i := range cms.Items {
		objs = append(objs, &cms.Items[i])
	}
	for i := range secrets.Items {
		objs = append(objs, &secrets.Items[i])
	}
	return objs
}
