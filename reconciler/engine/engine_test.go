package engine_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler/engine"
)

// newWidget creates a Widget (the owner: its objects' ownerReferences
// point at it) and returns it with its render.
func newWidget(t testing.TB, ns string, spec testv1alpha1.WidgetSpec) (*testv1alpha1.Widget, []*unstructured.Unstructured) {
	t.Helper()
	cluster.Get(t)
	w := &testv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: spec}
	if err := k8s.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	desired, err := widget.Render(w)
	if err != nil {
		t.Fatal(err)
	}
	return w, desired
}

// converge applies desired until an apply finds nothing to do (the cache
// has shown every earlier apply), and takes the requests that took, so
// that none of them counts afterwards.
func converge(t testing.TB, h *harness, w v1alpha1.Object, desired []*unstructured.Unstructured) {
	t.Helper()
	eventually(t, 30*time.Second, "an apply with nothing to do", func() error {
		out, err := h.Apply(t.Context(), w, desired)
		h.requests.take()
		switch {
		case err != nil:
			return err
		case len(out.Conflicts()) > 0:
			t.Fatalf("conflicts: %v", engine.ConflictsError(out.Conflicts()))
		case out.Waiting() || len(out.Applied()) > 0:
			return errNotYet
		}
		return nil
	})
}

var errNotYet = apierrors.NewServiceUnavailable("not converged yet")

// TestConvergedSetCostsNothing: the first apply creates every object, with
// field manager stencil; once the cache has shown them, an apply of the same
// render sends no request at all.
func TestConvergedSetCostsNothing(t *testing.T) {
	h, ns := newHarness(t), newNamespace(t)
	w, desired := newWidget(t, ns, testv1alpha1.WidgetSpec{Message: "hello", Replicas: 1, Service: true})
	converge(t, h, w, desired)
	for _, d := range desired {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(d.GroupVersionKind())
		if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(d), live); err != nil {
			t.Fatalf("%s %s: %v", d.GetKind(), d.GetName(), err)
		}
		if engine.OwnedRecord(live.GetManagedFields(), engine.FieldManager) == nil {
			t.Errorf("%s %s has no fields of manager %s", d.GetKind(), d.GetName(), engine.FieldManager)
		}
	}
	h.requests.take()
	for range 3 {
		out, err := h.Apply(t.Context(), w, desired)
		if err != nil || len(out.Applied()) > 0 || out.Waiting() {
			t.Fatalf("apply of a converged set: applied %d, waiting %v, err %v", len(out.Applied()), out.Waiting(), err)
		}
		if got, want := out.Tally(), "unchanged "+strconv.Itoa(len(desired)); got != want {
			t.Errorf("apply of a converged set: %s, want %s", got, want)
		}
	}
	if sent := h.requests.take(); len(sent) > 0 {
		t.Errorf("3 applies of a converged set sent %v, want no request", sent)
	}
}

// TestDriftIsReportedAndReverted: a field that another manager took from
// stencil is reported as drift, with both values, and set back (drift
// policy Correct, the default).
func TestDriftIsReportedAndReverted(t *testing.T) {
	h, ns := newHarness(t), newNamespace(t)
	w, desired := newWidget(t, ns, testv1alpha1.WidgetSpec{Message: "hello", Replicas: 1})
	converge(t, h, w, desired)
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web-config"}, cm); err != nil {
		t.Fatal(err)
	}
	taken := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": ns, "name": "web-config"}, "data": map[string]any{"message": "edited"}}}
	if err := k8s.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(taken), client.FieldOwner("someone-else"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	var drift []v1alpha1.ObjectDrift
	eventually(t, 30*time.Second, "the drift found", func() error {
		out, err := h.Apply(t.Context(), w, desired)
		if err != nil {
			return err
		}
		if drift = append(drift, out.Drift()...); len(drift) == 0 {
			return errNotYet
		}
		if !slices.ContainsFunc(out.Changes, func(c engine.Change) bool {
			return c.Kind == "ConfigMap" && c.Namespace == ns && c.Name == "web-config" && c.Action == engine.Configured
		}) {
			t.Errorf("the apply that reverted the drift: %v, want ConfigMap %s/web-config configured", out.Changes, ns)
		}
		return nil
	})
	if drift[0].Kind != "ConfigMap" || drift[0].Name != "web-config" || len(drift[0].Fields) == 0 || drift[0].Fields[0].Manager != "someone-else" {
		t.Errorf("drift = %+v; want ConfigMap web-config's data.message, taken by someone-else", drift)
	}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(cm), cm); err != nil || cm.Data["message"] != "hello" {
		t.Errorf("ConfigMap data = %v (%v); want message set back to hello", cm.Data, err)
	}
}

// TestNewApplierLearnsEachBaselineWithOneDryRun: an Applier that knows no
// baseline (a new process, with no digest in status to restore them from)
// learns each converged object's with one server-side dry-run apply, and
// finds the drift another manager makes afterwards. The baselines are in the
// cache's form for every way it holds an object: typed (the Deployment),
// metadata only (the ConfigMap, the Service) and a map (a custom resource's
// type the scheme does not know), so their digest in status lets the next
// new Applier restore them from the cache with no request.
func TestNewApplierLearnsEachBaselineWithOneDryRun(t *testing.T) {
	gizmo := installSchemaless(t, "Gizmo")
	ns := newNamespace(t)
	w, desired := newWidget(t, ns, testv1alpha1.WidgetSpec{Message: "hello", Replicas: 1, Service: true})
	desired = append(desired, ownedLike(desired[0], gizmo, "web-gizmo", map[string]any{"spec": map[string]any{"size": int64(3)}}))
	converge(t, newHarness(t, gizmo), w, desired)

	h := newHarness(t, gizmo)
	h.requests.take()
	out, err := h.Apply(t.Context(), w, desired)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out.Tally(), "unchanged "+strconv.Itoa(len(desired)); got != want {
		t.Errorf("the new Applier's first apply: %s, want %s", got, want)
	}
	dryRuns := 0
	for request, n := range h.requests.take() {
		switch {
		case request == "GET /api" || request == "GET /apis":
			// discovery, once per client
		case strings.HasPrefix(request, "PATCH ") && strings.HasSuffix(request, " (dry run)"):
			dryRuns += n
		default:
			t.Errorf("the new Applier's first apply sent %d× %s; want only dry-run applies", n, request)
		}
	}
	if dryRuns != len(desired) {
		t.Errorf("the new Applier's first apply sent %d dry-run applies, want one per object (%d)", dryRuns, len(desired))
	}
	if out, err := h.Apply(t.Context(), w, desired); err != nil || len(h.requests.take()) > 0 || out.Tally() != "unchanged "+strconv.Itoa(len(desired)) {
		t.Errorf("the second apply: %s, %v; want every object unchanged and no request", out.Tally(), err)
	}
	// The baselines it learnt are in the cache's form: their digest, in
	// status, lets the next new Applier take them from the cache, with no
	// request at all.
	if w.Status.OwnedFields = h.OwnedDigest(desired); w.Status.OwnedFields == "" {
		t.Fatal("no digest of the baselines learnt with dry runs")
	}
	next := newHarness(t, gizmo)
	next.requests.take()
	if out, err := next.Apply(t.Context(), w, desired); err != nil || out.Tally() != "unchanged "+strconv.Itoa(len(desired)) {
		t.Errorf("the next new Applier's first apply: %s, %v; want every object unchanged", out.Tally(), err)
	}
	for request, n := range next.requests.take() {
		if request != "GET /api" && request != "GET /apis" {
			t.Errorf("the next new Applier, given the digest, sent %d× %s; want no request", n, request)
		}
	}

	taken := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": ns, "name": "web-config"}, "data": map[string]any{"message": "edited"}}}
	if err := k8s.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(taken), client.FieldOwner("someone-else"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the drift found by the new Applier", func() error {
		out, err := h.Apply(t.Context(), w, desired)
		switch {
		case err != nil:
			return err
		case len(out.Drift()) == 0:
			return errNotYet
		case out.Drift()[0].Name != "web-config" || out.Drift()[0].Fields[0].Manager != "someone-else":
			t.Errorf("drift = %+v; want ConfigMap web-config's data.message, taken by someone-else", out.Drift())
		}
		return nil
	})
}

// TestForeignObjectIsAConflict: an object of the render's name that is not
// the owner's is left as it is, and reported as a conflict.
func TestForeignObjectIsAConflict(t *testing.T) {
	h, ns := newHarness(t), newNamespace(t)
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-config"}, Data: map[string]string{"message": "theirs"}}
	if err := k8s.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	w, desired := newWidget(t, ns, testv1alpha1.WidgetSpec{Message: "hello", Replicas: 1})
	out, err := h.Apply(t.Context(), w, desired)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Conflicts()) != 1 || out.Conflicts()[0].ID != engine.NewID(corev1.SchemeGroupVersion.WithKind("ConfigMap"), ns, "web-config") {
		t.Errorf("conflicts = %v; want the ConfigMap web-config", engine.ConflictsError(out.Conflicts()))
	}
	for _, c := range out.Changes {
		want := engine.Created
		if c.Kind == "ConfigMap" && c.Name == "web-config" {
			want = engine.Skipped
		}
		if c.Action != want {
			t.Errorf("%s, want %s", c, want)
		}
	}
	if len(out.Changes) != len(desired) {
		t.Errorf("changes %v, want one per desired object (%d)", out.Changes, len(desired))
	}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(foreign), foreign); err != nil || foreign.Data["message"] != "theirs" || len(foreign.OwnerReferences) > 0 {
		t.Errorf("the foreign ConfigMap = %v %v (%v); want it untouched", foreign.Data, foreign.OwnerReferences, err)
	}
}

// TestPruneDeletesOnlyWhatIsOwned: prune deletes the owner's object that the
// render no longer holds, and keeps one that only copied the owner's
// labels (no controller ownerReference: no proof of ownership).
func TestPruneDeletesOnlyWhatIsOwned(t *testing.T) {
	h, ns := newHarness(t), newNamespace(t)
	w, desired := newWidget(t, ns, testv1alpha1.WidgetSpec{Message: "hello", Replicas: 1, Service: true})
	converge(t, h, w, desired)
	copied := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "copied-labels",
		Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByStencil, v1alpha1.LabelOwnerUID: string(w.GetUID())}}}
	if err := k8s.Create(t.Context(), copied); err != nil {
		t.Fatal(err)
	}
	var kept []*unstructured.Unstructured
	for _, d := range desired {
		if d.GetKind() != "Service" {
			kept = append(kept, d)
		}
	}
	eventually(t, 30*time.Second, "the Service pruned", func() error {
		if _, err := h.Prune(t.Context(), w, kept, false); err != nil {
			return err
		}
		return k8sGone(t, &corev1.Service{}, ns, "web")
	})
	for _, o := range []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}} {
		name := "web"
		if _, ok := o.(*corev1.ConfigMap); ok {
			name = "web-config"
		}
		if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
			t.Errorf("%T %s: %v; want it kept (the render holds it)", o, name, err)
		}
	}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(copied), copied); err != nil {
		t.Errorf("the ConfigMap that copied the owner's labels: %v; want it kept", err)
	}
}

// k8sGone is nil when the object ns/name is gone.
func k8sGone(t testing.TB, obj client.Object, ns, name string) error {
	t.Helper()
	cluster.Get(t)
	err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		return errNotYet
	}
	return err
}

// BenchmarkConvergedApply is the engine's cost of a converged resource's
// reconcile (three objects): every object is judged from the cache against
// its baseline, and nothing is sent.
func BenchmarkConvergedApply(b *testing.B) {
	h, ns := newHarness(b), newNamespace(b)
	w, desired := newWidget(b, ns, testv1alpha1.WidgetSpec{Message: "hello", Replicas: 1, Service: true})
	converge(b, h, w, desired)
	h.requests.take()
	b.ReportAllocs()
	for b.Loop() {
		if out, err := h.Apply(b.Context(), w, desired); err != nil || len(out.Applied()) > 0 {
			b.Fatalf("applied %d, err %v", len(out.Applied()), err)
		}
	}
	if sent := h.requests.take(); len(sent) > 0 {
		b.Fatalf("converged applies sent %v", sent)
	}
}

// TestHandedOverFieldIsLeftToItsTaker: a field the template hands over
// (stencil.dev/hand-over: spec.replicas) is applied at creation, and once
// another manager takes it, it is neither reported nor set back.
func TestHandedOverFieldIsLeftToItsTaker(t *testing.T) {
	h, ns := newHarness(t), newNamespace(t)
	w, desired := newWidget(t, ns, testv1alpha1.WidgetSpec{Message: "hello", Replicas: 1, HandOverReplicas: true})
	converge(t, h, w, desired)
	scaled := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"namespace": ns, "name": "web"}, "spec": map[string]any{"replicas": int64(4)}}}
	if err := k8s.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(scaled), client.FieldOwner("autoscaler"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	deploy := &appsv1.Deployment{}
	eventually(t, 30*time.Second, "an apply with nothing to do after the scale", func() error {
		out, err := h.Apply(t.Context(), w, desired)
		switch {
		case err != nil:
			return err
		case len(out.Drift()) > 0:
			t.Fatalf("drift reported for a handed-over field: %+v", out.Drift())
		case out.Waiting() || len(out.Applied()) > 0:
			return errNotYet
		}
		return nil
	})
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, deploy); err != nil || *deploy.Spec.Replicas != 4 {
		t.Errorf("replicas = %v (%v); want the autoscaler's 4 kept", deploy.Spec.Replicas, err)
	}
}

// TestClusterScopedObjectIsPrunedByItsOwnerAnnotation: a cluster-scoped
// object has no ownerReference to a namespaced owner; prune takes the owner
// annotation as the second proof, lists it from the API server when asked
// to (fresh, as the finalizer does), and deletes it.
func TestClusterScopedObjectIsPrunedByItsOwnerAnnotation(t *testing.T) {
	h, ns := newHarness(t), newNamespace(t)
	w, desired := newWidget(t, ns, testv1alpha1.WidgetSpec{Message: "hello", Replicas: 1, ClusterRole: true})
	converge(t, h, w, desired)
	name := "widget-" + ns + "-web"
	role := &rbacv1.ClusterRole{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Name: name}, role); err != nil {
		t.Fatal(err)
	}
	if len(role.OwnerReferences) > 0 || role.Annotations[v1alpha1.AnnotationOwner] == "" {
		t.Fatalf("ClusterRole %s: ownerReferences %v, owner annotation %q; want none and one", name, role.OwnerReferences, role.Annotations[v1alpha1.AnnotationOwner])
	}
	pruned, err := h.PruneFrom(t.Context(), w, nil, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(pruned) != 1 || pruned[0].Name != name {
		t.Errorf("pruned %v; want only ClusterRole %s (namespaced objects go with their owner)", pruned, name)
	}
	eventually(t, 30*time.Second, "the ClusterRole gone", func() error { return k8sGone(t, &rbacv1.ClusterRole{}, "", name) })
}
