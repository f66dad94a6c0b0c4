package kinds_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/reconciler/decorator"
)

var eventually = testutil.Eventually

// newNamespace creates a namespace for one test, deleted when it ends.
func newNamespace(t *testing.T, name string, labels map[string]string) *corev1.Namespace {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := k8s.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(t.Context(), ns) })
	return ns
}

// mergePatch patches obj (a merge patch: the decorators write the same
// objects, so an update could conflict).
func mergePatch(t *testing.T, obj client.Object, patch string) {
	t.Helper()
	if err := k8s.Patch(t.Context(), obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// podCounts maps each ReplicaSet in ns to its pod-count label ("" when
// unset).
func podCounts(t *testing.T, ns string) map[string]string {
	t.Helper()
	list := &appsv1.ReplicaSetList{}
	if err := k8s.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, rs := range list.Items {
		out[rs.Name] = rs.Labels["pod-count"]
	}
	return out
}

func deployment(ns string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
}

// onlyReplicaSet is the name of the one ReplicaSet in ns.
func onlyReplicaSet(t *testing.T, ns string) (string, error) {
	t.Helper()
	counts := podCounts(t, ns)
	if len(counts) != 1 {
		return "", fmt.Errorf("%d ReplicaSets, want 1", len(counts))
	}
	for name := range counts {
		return name, nil
	}
	return "", nil
}

// waitPodCount waits until the Deployment's ReplicaSet has want pods (as
// the API server lists them) and the label pod-count says so.
func waitPodCount(t *testing.T, ns string, want int) {
	t.Helper()
	eventually(t, time.Minute, fmt.Sprintf("pod-count=%d", want), func() error {
		rs, err := onlyReplicaSet(t, ns)
		if err != nil {
			return err
		}
		pods := &corev1.PodList{}
		if err := k8s.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{"app": "web"}); err != nil {
			return err
		}
		if len(pods.Items) != want {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		if got := podCounts(t, ns)[rs]; got != fmt.Sprint(want) {
			return fmt.Errorf("%s has pod-count=%q", rs, got)
		}
		return nil
	})
}

// TestReplicaSetPodCount is seed 004: the label pod-count on a Deployment's
// ReplicaSet follows its pods as it scales 3 → 5 → 2; the ReplicaSet
// controller's own writes never conflict with stencil's; a value another
// manager writes is set back, and said in an event and in the status
// annotation.
func TestReplicaSetPodCount(t *testing.T) {
	ns := newNamespace(t, "podcount", nil).Name
	d := deployment(ns, 3)
	if err := k8s.Create(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	waitPodCount(t, ns, 3)
	for _, n := range []int32{5, 2} {
		if err := k8s.Patch(t.Context(), d, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))); err != nil {
			t.Fatal(err)
		}
		waitPodCount(t, ns, int(n))
	}

	rsName, err := onlyReplicaSet(t, ns)
	if err != nil {
		t.Fatal(err)
	}
	rs := &appsv1.ReplicaSet{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: rsName}, rs); err != nil {
		t.Fatal(err)
	}
	// stencil holds pod-count and nothing else; the ReplicaSet controller
	// still holds what it wrote.
	var managers []string
	for _, e := range rs.ManagedFields {
		managers = append(managers, e.Manager)
		if e.Manager == decorator.Manager("replicaset-podcount") && !strings.Contains(e.FieldsV1.GetRawString(), `"f:pod-count"`) {
			t.Errorf("stencil's fields on the ReplicaSet: %s, want only pod-count", e.FieldsV1.GetRawString())
		}
	}
	if !slices.Contains(managers, "kube-controller-manager") || !slices.Contains(managers, decorator.Manager("replicaset-podcount")) {
		t.Errorf("managers of the ReplicaSet: %v; want kube-controller-manager's and stencil's", managers)
	}

	// Another manager overwrites the label: stencil sets it back.
	out, err := kubectl(t, "", "-n", ns, "label", "rs", rsName, "pod-count=7", "--overwrite")
	if err != nil {
		t.Fatal(out)
	}
	eventually(t, 30*time.Second, "pod-count set back to 2", func() error {
		if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: rsName}, rs); err != nil {
			return err
		}
		if got := rs.Labels["pod-count"]; got != "2" {
			return fmt.Errorf("pod-count=%q", got)
		}
		return nil
	})
	var st struct {
		Reverted int
		Last     v1alpha1.FieldDrift
	}
	if err := json.Unmarshal([]byte(rs.Annotations[v1alpha1.AnnotationDecoratorStatus+"replicaset-podcount"]), &st); err != nil {
		t.Fatalf("status annotation: %v (%v)", err, rs.Annotations)
	}
	if st.Reverted != 1 || st.Last.Path != ".metadata.labels.pod-count" || st.Last.Live != `"7"` || st.Last.Manager != "kubectl-label" {
		t.Errorf("status annotation %+v; want 1 revert of pod-count from \"7\" by kubectl-label", st)
	}
	eventually(t, 30*time.Second, "a DriftReverted event", func() error {
		out, err := kubectl(t, "", "-n", ns, "get", "events", "--field-selector", "reason=DriftReverted", "-o", "name")
		if err != nil || strings.TrimSpace(out) == "" {
			return fmt.Errorf("none: %s %w", out, err)
		}
		return nil
	})
	// No failure was ever told about this ReplicaSet: the controller's
	// writes and stencil's never conflicted.
	if out, _ := kubectl(t, "", "-n", ns, "get", "events", "--field-selector", "type=Warning", "-o", "custom-columns=REASON:.reason,MESSAGE:.message"); strings.Contains(out, "Failed") {
		t.Errorf("warnings: %s", out)
	}
}

// TestNamespaceDefaults: a Namespace labelled stencil.dev/defaults=on gets
// a NetworkPolicy and a ResourceQuota, owned by it; the quota follows the
// label stencil.dev/pods; removing the label prunes both and removes the
// annotation stencil set on the Namespace.
func TestNamespaceDefaults(t *testing.T) {
	ns := newNamespace(t, "defaults", map[string]string{"stencil.dev/defaults": "on"})
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: ns.Name, Name: name} }
	quota := &corev1.ResourceQuota{}
	eventually(t, 30*time.Second, "defaults created", func() error {
		if err := k8s.Get(t.Context(), key("same-namespace-only"), &networkingv1.NetworkPolicy{}); err != nil {
			return err
		}
		if err := k8s.Get(t.Context(), key("defaults"), quota); err != nil {
			return err
		}
		if got := quota.Spec.Hard.Pods().String(); got != "50" {
			return fmt.Errorf("quota pods %s", got)
		}
		return nil
	})
	if refs := quota.OwnerReferences; len(refs) != 1 || refs[0].UID != ns.UID || refs[0].Kind != "Namespace" {
		t.Errorf("quota's ownerReferences %+v, want the Namespace", refs)
	}
	if quota.Labels[v1alpha1.LabelDecorator] != "namespace-defaults" {
		t.Errorf("quota's labels %v", quota.Labels)
	}
	eventually(t, 30*time.Second, "the Namespace annotated", func() error {
		if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(ns), ns); err != nil {
			return err
		}
		if ns.Annotations["stencil.dev/defaults"] == "" {
			return fmt.Errorf("annotations %v", ns.Annotations)
		}
		return nil
	})

	mergePatch(t, ns, `{"metadata":{"labels":{"stencil.dev/pods":"10"}}}`)
	eventually(t, 30*time.Second, "quota of 10 pods", func() error {
		if err := k8s.Get(t.Context(), key("defaults"), quota); err != nil {
			return err
		}
		if got := quota.Spec.Hard.Pods().String(); got != "10" {
			return fmt.Errorf("quota pods %s", got)
		}
		return nil
	})

	mergePatch(t, ns, `{"metadata":{"labels":{"stencil.dev/defaults":null}}}`)
	eventually(t, 30*time.Second, "defaults pruned, the annotation removed", func() error {
		if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(ns), ns); err != nil {
			return err
		}
		if v, ok := ns.Annotations["stencil.dev/defaults"]; ok {
			return fmt.Errorf("annotation still %q", v)
		}
		if err := k8s.Get(t.Context(), key("same-namespace-only"), &networkingv1.NetworkPolicy{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("NetworkPolicy: %w", err)
		}
		if err := k8s.Get(t.Context(), key("defaults"), &corev1.ResourceQuota{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("ResourceQuota: %w", err)
		}
		return nil
	})
}

// TestNamespaceDefaultsLeaveOthersObjects: a NetworkPolicy of the
// decorator's name that someone else created is neither changed nor taken
// over; a Warning event says why, and the Namespace's annotation, which
// lists the defaults it got, is not set (before issue 32 it was, first,
// claiming the NetworkPolicy it did not get).
func TestNamespaceDefaultsLeaveOthersObjects(t *testing.T) {
	ns := newNamespace(t, "defaults-taken", nil)
	theirs := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "same-namespace-only", Namespace: ns.Name, Labels: map[string]string{"team": "theirs"}},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}},
	}
	if err := k8s.Create(t.Context(), theirs); err != nil {
		t.Fatal(err)
	}
	mergePatch(t, ns, `{"metadata":{"labels":{"stencil.dev/defaults":"on"}}}`)
	eventually(t, 30*time.Second, "the quota created", func() error {
		return k8s.Get(t.Context(), client.ObjectKey{Namespace: ns.Name, Name: "defaults"}, &corev1.ResourceQuota{})
	})
	eventually(t, 30*time.Second, "an ApplyFailed event on the Namespace", func() error {
		out, _ := kubectl(t, "", "get", "events", "-A", "--field-selector", "reason=ApplyFailed,involvedObject.name="+ns.Name, "-o", "custom-columns=MESSAGE:.message")
		if !strings.Contains(out, "is not this decorator's") {
			return fmt.Errorf("events: %s", out)
		}
		return nil
	})
	got := &networkingv1.NetworkPolicy{}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(theirs), got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[v1alpha1.LabelManagedBy] != "" || len(got.OwnerReferences) != 0 || !slices.Equal(got.Spec.PolicyTypes, theirs.Spec.PolicyTypes) {
		t.Errorf("their NetworkPolicy was changed: %+v", got)
	}
	live := &corev1.Namespace{}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(ns), live); err != nil {
		t.Fatal(err)
	}
	if claim, ok := live.Annotations["stencil.dev/defaults"]; ok {
		t.Errorf("the Namespace claims defaults %q, one of which someone else's object blocked", claim)
	}
}

// TestPodCountTakesNoForeignLabel: a ReplicaSet whose pod-count label
// another manager set before stencil is left as it is (stencil never held
// it, so it is not drift to set back), and an event says so.
func TestPodCountTakesNoForeignLabel(t *testing.T) {
	ns := newNamespace(t, "podcount-foreign", nil).Name
	labels := map[string]string{"app": "nobody"}
	replicas := int32(0)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: ns, Labels: map[string]string{"pod-count": "42"}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}},
		},
	}
	if err := k8s.Create(t.Context(), rs); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a KeyConflict event", func() error {
		out, _ := kubectl(t, "", "-n", ns, "get", "events", "--field-selector", "reason=KeyConflict", "-o", "custom-columns=MESSAGE:.message")
		if !strings.Contains(out, "metadata.labels.pod-count set by another manager") {
			return fmt.Errorf("events: %s", out)
		}
		return nil
	})
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(rs), rs); err != nil {
		t.Fatal(err)
	}
	if got := rs.Labels["pod-count"]; got != "42" {
		t.Errorf("pod-count=%q, want their 42", got)
	}
	for _, e := range rs.ManagedFields {
		if e.Manager == decorator.Manager("replicaset-podcount") && strings.Contains(e.FieldsV1.GetRawString(), `"f:pod-count"`) {
			t.Errorf("stencil holds pod-count: %s", e.FieldsV1.GetRawString())
		}
	}
}
