package engine

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// TestTrimAnswersAsTheWholeObject is the trim's property: for random
// objects of the types whose health stencil judges or a status template
// reads, and random sets of
// fields stencil's manager owns beside random other managers, what the
// trimmed object answers equals what the whole one does: kstatus's
// verdict and message, the value at every field stencil owns, the
// metadata (managedFields, so the drift check's and hand-over's records)
// and the status.
func TestTrimAnswersAsTheWholeObject(t *testing.T) {
	const runs = 300
	fill := randfill.NewWithSeed(54).NilChance(0.2).NumElements(0, 3).MaxDepth(8).Funcs(
		func(q *resource.Quantity, c randfill.Continue) { *q = resource.MustParse("100m") },
		func(tm *metav1.Time, c randfill.Continue) { *tm = metav1.NewTime(time.Unix(int64(c.Intn(1e9)), 0)) },
		func(tm *metav1.MicroTime, c randfill.Continue) {
			*tm = metav1.NewMicroTime(time.Unix(int64(c.Intn(1e9)), 0))
		},
		func(i *intstr.IntOrString, c randfill.Continue) { *i = intstr.FromInt32(c.Int31n(5)) },
		func(r *runtime.RawExtension, c randfill.Continue) {},
		func(m *metav1.ManagedFieldsEntry, c randfill.Continue) {},
		func(s *corev1.ServiceSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Type = []corev1.ServiceType{"ClusterIP", "LoadBalancer", "NodePort", ""}[c.Intn(4)]
		},
		func(cond *metav1.Condition, c randfill.Continue) {
			c.FillNoCustom(cond)
			cond.Type = []string{"Ready", "Reconciling", "Stalled"}[c.Intn(3)]
			cond.Status = metav1.ConditionStatus([]string{"True", "False", "Unknown"}[c.Intn(3)])
		},
	)
	rng := rand.New(rand.NewPCG(54, 58))
	news := []func() runtime.Object{
		func() runtime.Object { return &appsv1.Deployment{} },
		func() runtime.Object { return &appsv1.StatefulSet{} },
		func() runtime.Object { return &appsv1.DaemonSet{} },
		func() runtime.Object { return &appsv1.ReplicaSet{} },
		func() runtime.Object { return &batchv1.Job{} },
		func() runtime.Object { return &corev1.Service{} },
		func() runtime.Object { return &corev1.PersistentVolumeClaim{} },
		func() runtime.Object { return &corev1.Pod{} },
		func() runtime.Object { return &corev1.ConfigMap{} },
		func() runtime.Object { return &corev1.Secret{} },
	}
	for i := range runs {
		obj := news[i%len(news)]()
		fill.Fill(obj)
		whole, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		gvk := map[string]string{"*v1.Deployment": "apps/v1/Deployment", "*v1.StatefulSet": "apps/v1/StatefulSet", "*v1.DaemonSet": "apps/v1/DaemonSet", "*v1.ReplicaSet": "apps/v1/ReplicaSet", "*v1.Job": "batch/v1/Job", "*v1.Service": "v1/Service", "*v1.PersistentVolumeClaim": "v1/PersistentVolumeClaim", "*v1.Pod": "v1/Pod", "*v1.ConfigMap": "v1/ConfigMap", "*v1.Secret": "v1/Secret"}[reflect.TypeOf(obj).String()]
		u := &unstructured.Unstructured{Object: whole}
		setGVK(u, gvk)
		coherent(u, rng)
		ours := randomSubset(t, rng, u)
		entries := randomManagers(t, rng, u, ours)
		u.SetManagedFields(entries)
		trimmed, err := Trim(u.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		sameAnswers(t, i, gvk, u.Object, trimmed.(*unstructured.Unstructured).Object, ours)
		if t.Failed() {
			t.FailNow()
		}
	}
}

// sameAnswers fails t when trimmed answers otherwise than whole.
func sameAnswers(t *testing.T, run int, what string, whole, trimmed map[string]any, ours *fieldpath.Set) {
	t.Helper()
	w, tr := &unstructured.Unstructured{Object: whole}, &unstructured.Unstructured{Object: trimmed}
	wv, werr := kstatus.Compute(w)
	tv, terr := kstatus.Compute(tr)
	if (werr == nil) != (terr == nil) || werr == nil && (wv.Status != tv.Status || wv.Message != tv.Message) {
		t.Errorf("run %d, %s: kstatus says %v (%v) of the whole object, %v (%v) of the trimmed one", run, what, wv, werr, tv, terr)
	}
	for _, top := range []string{"metadata", "status", "apiVersion", "kind"} {
		if !reflect.DeepEqual(whole[top], trimmed[top]) {
			t.Errorf("run %d, %s: %s changed:\n%v\n%v", run, what, top, whole[top], trimmed[top])
		}
	}
	ours.Leaves().Iterate(func(p fieldpath.Path) {
		a, aok := valueAt(whole, p)
		b, bok := valueAt(trimmed, p)
		if a != b || aok != bok {
			t.Errorf("run %d, %s: at %s the whole object holds %s (%v), the trimmed one %s (%v)", run, what, p, a, aok, b, bok)
		}
	})
}

// coherent makes u's counts small and, most times, its status observe its
// generation, so that kstatus gets past its first checks and compares the
// spec with the status, as it does of real objects.
func coherent(u *unstructured.Unstructured, rng *rand.Rand) {
	if rng.IntN(4) != 0 {
		u.SetDeletionTimestamp(nil)
		u.SetGeneration(3)
		_ = unstructured.SetNestedField(u.Object, int64(3), "status", "observedGeneration")
	}
	small := func(m map[string]any, keys ...string) {
		for _, k := range keys {
			if _, ok := m[k]; ok || rng.IntN(2) == 0 {
				m[k] = int64(rng.IntN(3))
			}
		}
	}
	if spec, ok := u.Object["spec"].(map[string]any); ok {
		small(spec, "replicas", "parallelism", "completions")
		if rng.IntN(2) == 0 {
			delete(spec, "progressDeadlineSeconds")
		}
		if _, ok := spec["clusterIP"]; ok {
			spec["clusterIP"] = []string{"", "None", "10.0.0.1"}[rng.IntN(3)]
		}
	}
	if status, ok := u.Object["status"].(map[string]any); ok {
		small(status, "replicas", "readyReplicas", "availableReplicas", "updatedReplicas", "currentReplicas", "fullyLabeledReplicas",
			"desiredNumberScheduled", "currentNumberScheduled", "updatedNumberScheduled", "numberAvailable", "numberReady", "succeeded", "active", "failed")
		if rng.IntN(2) == 0 {
			delete(status, "conditions")
		}
		if _, ok := status["phase"]; ok {
			status["phase"] = []string{"Pending", "Running", "Succeeded", "Failed", "Bound", "Lost"}[rng.IntN(6)]
		}
	}
}

func setGVK(u *unstructured.Unstructured, gvk string) {
	switch gvk {
	case "v1/Service", "v1/PersistentVolumeClaim", "v1/Pod", "v1/ConfigMap", "v1/Secret":
		u.SetAPIVersion("v1")
		u.SetKind(gvk[3:])
	default:
		i := len(gvk) - 1
		for gvk[i] != '/' {
			i--
		}
		u.SetAPIVersion(gvk[:i])
		u.SetKind(gvk[i+1:])
	}
}

// randomSubset is a random set of the fields of u outside metadata and
// status, as stencil's managedFields entry would record them: leaves and,
// some of the time, the maps and list items above them ("."); list items
// by key when they have a unique name, else as SetFromValue names them.
func randomSubset(t *testing.T, rng *rand.Rand, u *unstructured.Unstructured) *fieldpath.Set {
	t.Helper()
	all := fieldpath.SetFromValue(value.NewValueInterface(u.Object))
	s := &fieldpath.Set{}
	all.Leaves().Iterate(func(p fieldpath.Path) {
		if len(p) == 0 || p[0].FieldName == nil || kept[*p[0].FieldName] || rng.IntN(3) != 0 {
			return
		}
		p = keyed(u.Object, p)
		s.Insert(p)
		// As a record holds "." for an item or a map it set, beside
		// their fields: a member with children, which is not kept whole.
		for j := 1; j < len(p); j++ {
			if rng.IntN(2) == 0 {
				s.Insert(p[:j].Copy())
			}
		}
	})
	return s
}

// keyed is p with each index of a list item that has a name replaced by
// the item's key, as managedFields record an associative list.
func keyed(obj map[string]any, p fieldpath.Path) fieldpath.Path {
	out := make(fieldpath.Path, 0, len(p))
	var cur any = obj
	for _, pe := range p {
		next, _ := step(cur, pe)
		if pe.Index != nil {
			if m, ok := next.(map[string]any); ok {
				if name, ok := m["name"].(string); ok && uniqueName(cur.([]any), name) {
					kv := value.FieldList{{Name: "name", Value: value.NewValueInterface(name)}}
					pe = fieldpath.PathElement{Key: &kv}
				}
			}
		}
		out = append(out, pe)
		cur = next
	}
	return out
}

func uniqueName(items []any, name string) bool {
	n := 0
	for _, x := range items {
		if m, ok := x.(map[string]any); ok && m["name"] == name {
			n++
		}
	}
	return n == 1
}

// randomManagers are managedFields entries: stencil's Apply entry of ours,
// and up to three other managers' entries of random fields, some of them
// stencil's too, one of them a status write.
func randomManagers(t *testing.T, rng *rand.Rand, u *unstructured.Unstructured, ours *fieldpath.Set) []metav1.ManagedFieldsEntry {
	t.Helper()
	entry := func(manager string, op metav1.ManagedFieldsOperationType, sub string, s *fieldpath.Set) metav1.ManagedFieldsEntry {
		raw, err := s.ToJSON()
		if err != nil {
			t.Fatal(err)
		}
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: sub, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(raw))}
	}
	entries := []metav1.ManagedFieldsEntry{entry(FieldManager, metav1.ManagedFieldsOperationApply, "", ours)}
	all := fieldpath.SetFromValue(value.NewValueInterface(u.Object))
	for i := range rng.IntN(4) {
		s := &fieldpath.Set{}
		all.Leaves().Iterate(func(p fieldpath.Path) {
			if rng.IntN(4) == 0 {
				s.Insert(p)
			}
		})
		sub := ""
		if i == 1 {
			sub = "status"
		}
		entries = append(entries, entry([]string{"kubectl", "hpa", "kube-controller-manager"}[i%3], metav1.ManagedFieldsOperationUpdate, sub, s))
	}
	return entries
}

// TestTrimKeepsWhatItMust: a Deployment as an API server returns it keeps
// what the template set, its status and metadata, and spec.replicas
// whoever set it; loses the pod template's defaults and another writer's
// fields; and an object stencil's manager owns nothing of stays whole.
func TestTrimKeepsWhatItMust(t *testing.T) {
	d := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "labels": map[string]any{"app": "web"}},
		"spec": map[string]any{
			"replicas":             int64(2),
			"revisionHistoryLimit": int64(10),
			"selector":             map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"spec": map[string]any{
				"dnsPolicy": "ClusterFirst",
				"containers": []any{
					map[string]any{"name": "web", "image": "nginx", "imagePullPolicy": "Always", "ports": []any{map[string]any{"containerPort": int64(80), "protocol": "TCP"}}},
					map[string]any{"name": "sidecar", "image": "injected"},
				},
			}},
		},
		"status": map[string]any{"readyReplicas": int64(2)},
	}}
	ours := `{"f:spec":{"f:selector":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}}}}}}`
	d.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(ours)}})
	out, err := Trim(d.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*unstructured.Unstructured)
	want := map[string]any{
		"replicas": int64(2),
		"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
		"template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "web", "image": "nginx", "ports": []any{map[string]any{"containerPort": int64(80), "protocol": "TCP"}}},
		}}},
	}
	if !reflect.DeepEqual(got.Object["spec"], want) {
		t.Errorf("trimmed spec\n%v\nwant\n%v", got.Object["spec"], want)
	}
	if !reflect.DeepEqual(got.Object["status"], d.Object["status"]) || got.GetName() != "web" || len(got.GetManagedFields()) != 1 {
		t.Errorf("status or metadata changed: %v", got.Object)
	}
	none := d.DeepCopy()
	none.SetManagedFields(nil)
	if out, err := Trim(none.DeepCopy()); err != nil || !reflect.DeepEqual(out.(*unstructured.Unstructured).Object, none.Object) {
		t.Errorf("an object stencil owns nothing of was trimmed: %v", err)
	}
}

// TestTrimBoundsAForgedRecord: whoever may update an object stencil
// applies can write its managedFields, stencil's entry too. A forged
// record of a megabyte is used, not remembered (the parsed sets the trim
// keeps stay bounded); one nested past what JSON decoding takes keeps the
// object whole; none fails the transform or panics.
func TestTrimBoundsAForgedRecord(t *testing.T) {
	object := func(record string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "forged", "namespace": "ns"},
			"data":     map[string]any{"kept": "yes", "dropped": "no"},
		}}
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(record)}})
		return u
	}
	var huge strings.Builder
	huge.WriteString(`{"f:data":{"f:kept":{}`)
	for i := 0; huge.Len() < 1<<20; i++ {
		fmt.Fprintf(&huge, `,"f:k%07d":{}`, i)
	}
	huge.WriteString(`}}`)
	before := parsedRecords.Len()
	out, err := Trim(object(huge.String()))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out.(*unstructured.Unstructured).Object["data"], map[string]any{"kept": "yes"}; !reflect.DeepEqual(got, want) {
		t.Errorf("data trimmed by a megabyte's record = %v, want %v", got, want)
	}
	if parsedRecords.Len() != before {
		t.Errorf("the trim remembers a megabyte's record (%d sets, %d before)", parsedRecords.Len(), before)
	}

	for _, depth := range []int{5_000, 20_000} {
		deep := `{"f:data":` + strings.Repeat(`{"f:a":`, depth) + `{}` + strings.Repeat(`}`, depth) + `}`
		u := object(deep)
		whole := u.DeepCopy()
		out, err := Trim(u)
		if err != nil {
			t.Fatalf("depth %d: %v", depth, err)
		}
		if depth > 10_000 && !reflect.DeepEqual(out.(*unstructured.Unstructured).Object, whole.Object) {
			t.Errorf("depth %d: a record too deep to decode trimmed the object", depth)
		}
	}
}
