package engine

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// TestDecide: what apply does with one desired object, from the cache's
// copy of it alone.
func TestDecide(t *testing.T) {
	const owner = "Widget.test.stencil.dev/ns/web"
	desired := func(hash string, createOnly bool) *unstructured.Unstructured {
		d := &unstructured.Unstructured{}
		d.SetAPIVersion("v1")
		d.SetKind("ConfigMap")
		d.SetNamespace("ns")
		d.SetName("web")
		d.SetLabels(map[string]string{v1alpha1.LabelOwnerUID: "uid-web"})
		annotations := map[string]string{v1alpha1.AnnotationOwner: owner, v1alpha1.AnnotationDesiredHash: hash}
		if createOnly {
			annotations[v1alpha1.AnnotationSSA] = v1alpha1.SSAIfNotPresent
		}
		d.SetAnnotations(annotations)
		return d
	}
	ours := func(hash string) *metav1.PartialObjectMetadata {
		live := &metav1.PartialObjectMetadata{}
		live.SetResourceVersion("7")
		live.SetLabels(map[string]string{v1alpha1.LabelOwnerUID: "uid-web"})
		live.SetAnnotations(map[string]string{v1alpha1.AnnotationOwner: owner, v1alpha1.AnnotationDesiredHash: hash})
		live.SetOwnerReferences([]metav1.OwnerReference{{Kind: "Widget", Name: "web", UID: types.UID("uid-web"), Controller: new(true)}})
		return live
	}
	someoneElses := &metav1.PartialObjectMetadata{}
	adoptable := &metav1.PartialObjectMetadata{}
	adoptable.SetResourceVersion("3")
	adoptable.SetAnnotations(map[string]string{v1alpha1.AnnotationAdopt: owner})
	deleting := ours("h1")
	deleting.SetDeletionTimestamp(&metav1.Time{})

	tests := []struct {
		name string
		// desired is the rendered object.
		desired *unstructured.Unstructured
		// live is the cache's copy (nil: the cache does not hold it).
		live client.Object
		// newerThan is the cached version below which this process's last
		// apply of this render is newer (0: it applied none lately).
		newerThan uint64
		// want is the decision.
		want decision
		// wantVersion: the apply carries the live object's version.
		wantVersion string
	}{
		{name: "not in the cache: create it if it does not exist", desired: desired("h1", false), want: create},
		{name: "not in the cache yet after our apply: wait", desired: desired("h1", false), newerThan: 1, want: wait},
		{name: "someone else's: leave it", desired: desired("h1", false), live: someoneElses, want: leave},
		{name: "ours, being deleted: leave it", desired: desired("h1", false), live: deleting, want: leave},
		{name: "a person asked that we adopt it", desired: desired("h1", false), live: adoptable, want: adopt, wantVersion: "3"},
		{name: "ours, a new render: apply it", desired: desired("h2", false), live: ours("h1"), want: apply},
		{name: "ours, a new render we applied, the cache behind: wait", desired: desired("h2", false), live: ours("h1"), newerThan: 8, want: wait},
		{name: "ours, this render: compare its fields", desired: desired("h1", false), live: ours("h1"), want: compare},
		{name: "ours, this render, the cache behind our last apply: wait", desired: desired("h1", false), live: ours("h1"), newerThan: 8, want: wait},
		{name: "create-only, from an earlier render: compare, never apply", desired: desired("h2", true), live: ours("h1"), want: compare},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newer := func(cached uint64) bool { return cached < tt.newerThan }
			got := decide(tt.desired, tt.live, newer)
			if got.decision != tt.want {
				t.Errorf("decision = %s, want %s", got.decision, tt.want)
			}
			if got.resourceVersion != tt.wantVersion {
				t.Errorf("resourceVersion = %q, want %q", got.resourceVersion, tt.wantVersion)
			}
			if (got.decision == leave) != (got.conflict != nil) {
				t.Errorf("conflict = %v with decision %s: a conflict goes with leave, and only with it", got.conflict, got.decision)
			}
		})
	}
}

// TestAppliedAction: an apply tells what it did to the object.
func TestAppliedAction(t *testing.T) {
	cached := &metav1.PartialObjectMetadata{}
	tests := []struct {
		name string
		// v is the verdict the apply acted on.
		v verdict
		// want is the action it reports.
		want Action
	}{
		{name: "created first", v: verdict{decision: create}, want: Created},
		{name: "read missing, then applied", v: verdict{decision: apply}, want: Created},
		{name: "a new render of a cached object", v: verdict{decision: apply, live: cached}, want: Configured},
		{name: "ours, read from the API server", v: verdict{decision: apply, resourceVersion: "7"}, want: Configured},
		{name: "drift corrected", v: verdict{decision: compare, live: cached}, want: Configured},
		{name: "adopted", v: verdict{decision: adopt, resourceVersion: "7"}, want: Adopted},
	}
	for _, tt := range tests {
		if got := appliedAction(tt.v); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
	out := ApplyOutcome{}
	for _, a := range []Action{Configured, Unchanged, Configured, Skipped} {
		out.Changes = append(out.Changes, Change{Kind: "ConfigMap", Namespace: "ns", Name: "web", Action: a})
	}
	if got, want := out.Tally(), "configured 2, unchanged 1, skipped 1"; got != want {
		t.Errorf("Tally = %q, want %q", got, want)
	}
}

func TestMissingFields(t *testing.T) {
	record := func(fields ...string) []string {
		var entries []metav1.ManagedFieldsEntry
		for _, f := range fields {
			entries = append(entries, metav1.ManagedFieldsEntry{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(f)})
		}
		return OwnedRecord(entries, FieldManager)
	}
	both := `{"f:data":{"f:a":{},"f:b":{}}}`
	tests := []struct {
		name       string
		base, live []string
		want       []string
	}{
		{"the same record", record(both), record(both), nil},
		{"the same fields, written in another order", record(both), record(`{"f:data":{"f:b":{},"f:a":{}}}`), nil},
		{"a field taken", record(both), record(`{"f:data":{"f:a":{}}}`), []string{".data.b"}},
		{"a field gained is no drift", record(`{"f:data":{"f:a":{}}}`), record(both), nil},
		{"every field taken", record(both), nil, []string{".data.a", ".data.b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			missing, err := MissingFields(tt.base, tt.live, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for p := range missing.Leaves().All() {
				got = append(got, p.String())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("missing %q, want %q", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("missing %q, want %q", got, tt.want)
				}
			}
		})
	}
}

func TestOwnedRecordSkipsOtherEntries(t *testing.T) {
	entries := []metav1.ManagedFieldsEntry{
		{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{"f:a":{}}`)},
		{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, Subresource: "status", FieldsV1: metav1.NewFieldsV1(`{"f:b":{}}`)},
		{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(`{"f:c":{}}`)},
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{"f:d":{}}`)},
	}
	got := OwnedRecord(entries, FieldManager)
	if len(got) != 1 || got[0] != `{"f:a":{}}` {
		t.Errorf("record %q, want only our Apply entry on the object", got)
	}
}
