package decorator

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"unique"

	"github.com/stencil-operator/stencil/internal/testing/testutil"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestJudgeMetadata: which rendered keys are applied, set back or left to
// another manager, by what managedFields and the status annotation say.
func TestJudgeMetadata(t *testing.T) {
	const mine = "stencil-decorator-d"
	fields := func(keys ...string) *metav1.FieldsV1 {
		raw := `{"f:metadata":{"f:labels":{`
		for i, k := range keys {
			if i > 0 {
				raw += ","
			}
			raw += `"f:` + k + `":{}`
		}
		return metav1.NewFieldsV1(raw + `}}}`)
	}
	tests := []struct {
		name        string
		live        map[string]string
		ours, other []string // keys each manager holds
		held        []string // the status annotation's holds
		want        string   // the rendered value of label k
		applied     bool     // k stays in what is applied
		drift       bool     // counted as drift set back
		foreign     bool     // told as a conflict
	}{
		{name: "new key", want: "1", applied: true},
		{name: "ours, older value", live: map[string]string{"k": "1"}, ours: []string{"k"}, held: []string{"labels/k"}, want: "2", applied: true},
		{name: "ours, as rendered", live: map[string]string{"k": "2"}, ours: []string{"k"}, held: []string{"labels/k"}, want: "2", applied: true},
		{name: "held, changed by another", live: map[string]string{"k": "9"}, other: []string{"k"}, held: []string{"labels/k"}, want: "2", applied: true, drift: true},
		{name: "held, removed by another", held: []string{"labels/k"}, want: "2", applied: true, drift: true},
		{name: "held, set to the same by another", live: map[string]string{"k": "2"}, other: []string{"k"}, held: []string{"labels/k"}, want: "2", applied: true},
		{name: "another's, another value", live: map[string]string{"k": "42"}, other: []string{"k"}, want: "2", foreign: true},
		{name: "another's, the same value", live: map[string]string{"k": "2"}, other: []string{"k"}, want: "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := &metav1.PartialObjectMetadata{}
			parent.SetLabels(tt.live)
			var entries []metav1.ManagedFieldsEntry
			if tt.ours != nil {
				entries = append(entries, metav1.ManagedFieldsEntry{Manager: mine, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: fields(tt.ours...)})
			}
			if tt.other != nil {
				entries = append(entries, metav1.ManagedFieldsEntry{Manager: "kubectl-label", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: fields(tt.other...)})
			}
			parent.SetManagedFields(entries)
			owned, err := ownedMetadata(entries, mine)
			if err != nil {
				t.Fatal(err)
			}
			held := map[string]bool{}
			for _, k := range tt.held {
				held[k] = true
			}
			labels := map[string]string{"k": tt.want}
			plan := judgeMetadata(parent, owned, held, labels, nil)
			_, applied := labels["k"]
			if applied != tt.applied || slices.Contains(plan.holds, "labels/k") != tt.applied {
				t.Errorf("applied %v (holds %v), want %v", applied, plan.holds, tt.applied)
			}
			if (len(plan.drifts) == 1) != tt.drift {
				t.Errorf("drifts %+v, want drift %v", plan.drifts, tt.drift)
			}
			if (len(plan.foreign) == 1) != tt.foreign {
				t.Errorf("foreign %v, want %v", plan.foreign, tt.foreign)
			}
		})
	}
}

// TestCacheTransform: the decorators' cache holds an observed object
// (metadata only) without managedFields and a parent with them, and two
// objects decoded apart hold one copy of a label they share.
func TestCacheTransform(t *testing.T) {
	entries := []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
	pod := func() *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Labels:        map[string]string{strings.Clone("app.kubernetes.io/name"): strings.Clone("web")},
			ManagedFields: entries,
		}}
	}
	// The canonical strings live while a handle does: a collection between
	// the two transforms would otherwise give the second pod new copies.
	held := []unique.Handle[string]{unique.Make("app.kubernetes.io/name"), unique.Make("web")}
	defer runtime.KeepAlive(held)
	var pods []*metav1.PartialObjectMetadata
	for range 2 {
		out, err := cacheTransform(pod())
		if err != nil {
			t.Fatal(err)
		}
		p := out.(*metav1.PartialObjectMetadata)
		if p.ManagedFields != nil || p.Labels["app.kubernetes.io/name"] != "web" {
			t.Fatalf("cached as %+v, want the labels without managedFields", p.ObjectMeta)
		}
		pods = append(pods, p)
	}
	if copied := testutil.CopiedTwice(pods[0].Labels, pods[1].Labels); len(copied) > 0 {
		t.Errorf("labels %v: the two pods hold two copies", copied)
	}
	parent := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{ManagedFields: entries}}
	if out, err := cacheTransform(parent); err != nil || len(out.(*appsv1.ReplicaSet).ManagedFields) != 1 {
		t.Errorf("a parent lost its managedFields (%v): they say what stencil holds", err)
	}
}
