package reconciler_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/testing/testkind"
	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
)

// onceGadget is the Gadget kind with a hook as a chart import makes one:
// a Job declared once, which its TTL removes as soon as it completes, and
// a ConfigMap after it.
func onceGadget() fstest.MapFS {
	return fstest.MapFS{
		"_kind.yaml": {Data: []byte(`owns:
- {apiVersion: v1, kind: ConfigMap}
- {apiVersion: batch/v1, kind: Job}
graph:
  hook: {once: true}
  app: {after: [hook]}
`)},
		"hook.yaml": {Data: []byte(`apiVersion: batch/v1
kind: Job
metadata:
  name: {{ printf "%s-hook" .Name | quote }}
spec:
  ttlSecondsAfterFinished: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: hook, image: busybox}
`)},
		"app.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ printf "%s-app" .Name | quote }}
data:
  value: {{ .Spec.Value | quote }}
`)},
	}
}

// TestOnceHookIsNotMadeAgain: a hook Job with ttlSecondsAfterFinished: 0
// runs once: it completes, the TTL controller removes it, and stencil does
// not make it again (it did, for ever, before once), neither then nor on a
// later change of the spec that leaves the Job as it was; status.once
// records it and the resource is Ready.
func TestOnceHookIsNotMadeAgain(t *testing.T) {
	def := testkind.Gadget()
	def.Templates = onceGadget()
	startGadgetKind(t, def)
	ns := newGadgetNamespace(t)
	wc, err := client.NewWithWatch(cluster.Get(t).Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(t.Context(), &batchv1.JobList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	var created []string // the Jobs the watch saw created, by name
	go func() {
		for e := range w.ResultChan() {
			if job, ok := e.Object.(*batchv1.Job); ok && e.Type == watch.Added {
				mu.Lock()
				created = append(created, job.Name)
				mu.Unlock()
			}
		}
	}()

	createGadget(t, ns, "g", testv1alpha1.GadgetSpec{Value: "a"})
	waitOnce(t, ns, "g", "a")
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"value":"b"}}`))
	if err := k8s.Patch(t.Context(), &testv1alpha1.Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"}}, patch); err != nil {
		t.Fatal(err)
	}
	waitOnce(t, ns, "g", "b")
	// A Job of the test's own, suspended: once the watch has seen it
	// created, it has seen every Job created before.
	sentinel := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sentinel"}, Spec: batchv1.JobSpec{Suspend: new(true),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	if err := k8s.Create(t.Context(), sentinel); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the watch sees the sentinel Job", func() error {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(created, "sentinel") {
			return fmt.Errorf("created so far: %v", created)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if n := len(slices.DeleteFunc(slices.Clone(created), func(name string) bool { return name != "g-hook" })); n != 1 {
		t.Errorf("the hook Job was created %d times (%v), want once", n, created)
	}
}

// waitOnce waits until Gadget name has applied value, is Ready at its
// generation with its hook recorded in status.once, and the hook Job is
// gone (its TTL removed it).
func waitOnce(t *testing.T, ns, name, value string) {
	t.Helper()
	eventually(t, 90*time.Second, fmt.Sprintf("%s Ready with value %s, its hook done and gone", name, value), func() error {
		g := &testv1alpha1.Gadget{}
		if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, g); err != nil {
			return err
		}
		st := g.Status.Status
		ready := slices.ContainsFunc(st.Conditions, func(c metav1.Condition) bool {
			return c.Type == v1alpha1.ConditionReady && c.Status == metav1.ConditionTrue
		})
		if !ready || st.ObservedGeneration != g.Generation || len(st.Once) != 1 || st.Once[0].Node != "hook" {
			return fmt.Errorf("status: generation %d of %d, ready %v, once %v", st.ObservedGeneration, g.Generation, ready, st.Once)
		}
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name + "-app"}, cm); err != nil {
			return err
		}
		if cm.Data["value"] != value {
			return fmt.Errorf("the ConfigMap's value is %q", cm.Data["value"])
		}
		if exists(t, &batchv1.Job{}, ns, name+"-hook") {
			return fmt.Errorf("the hook Job is still there")
		}
		return nil
	})
}

// TestDriftIsCorrectedInAKindWithHooks: a graph kind whose hook ran once
// (as a chart kind with hooks is) records corrected drift as a kind
// without a graph does: another manager's change is reverted, status.drift
// names it, and Drifted is False/DriftCorrected.
func TestDriftIsCorrectedInAKindWithHooks(t *testing.T) {
	def := testkind.Gadget()
	def.Templates = onceGadget()
	startGadgetKind(t, def)
	ns := newGadgetNamespace(t)
	createGadget(t, ns, "g", testv1alpha1.GadgetSpec{Value: "a"})
	gadgetStatus(t, ns, "g", v1alpha1.ConditionReady, v1alpha1.ReasonReconciled)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g-app"}}
	if err := k8s.Patch(t.Context(), cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"value":"x"}}`)), client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the drift corrected and recorded", func() error {
		g := &testv1alpha1.Gadget{}
		if err := k8s.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "g"}, g); err != nil {
			return err
		}
		if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(cm), cm); err != nil {
			return err
		}
		if cm.Data["value"] != "a" {
			return fmt.Errorf("the ConfigMap's value is %q", cm.Data["value"])
		}
		var drifted *metav1.Condition
		for i := range g.Status.Conditions {
			if g.Status.Conditions[i].Type == v1alpha1.ConditionDrifted {
				drifted = &g.Status.Conditions[i]
			}
		}
		if drifted == nil || drifted.Status != metav1.ConditionFalse || drifted.Reason != v1alpha1.ReasonDriftCorrected {
			return fmt.Errorf("Drifted is %+v", drifted)
		}
		if !slices.ContainsFunc(g.Status.Drift, func(d v1alpha1.ObjectDrift) bool { return d.Name == "g-app" && d.Reverted }) {
			return fmt.Errorf("status.drift is %+v", g.Status.Drift)
		}
		return nil
	})
}
