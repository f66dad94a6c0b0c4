package reconciler

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestMissingFields(t *testing.T) {
	record := func(fields ...string) []string {
		var entries []metav1.ManagedFieldsEntry
		for _, f := range fields {
			entries = append(entries, metav1.ManagedFieldsEntry{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(f)})
		}
		return ownedRecord(entries, FieldManager)
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
			missing, err := missingFields(tt.base, tt.live, nil)
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
	got := ownedRecord(entries, FieldManager)
	if len(got) != 1 || got[0] != `{"f:a":{}}` {
		t.Errorf("record %q, want only our Apply entry on the object", got)
	}
}

func TestWithoutOthersFields(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType, subresource, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: subresource, FieldsV1: metav1.NewFieldsV1(fields)}
	}
	apply, update := metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate
	desired := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"data": map[string]any{"a": "1", "b": "2"},
			"spec": map[string]any{
				"replicas": int64(2),
				"containers": []any{
					map[string]any{"name": "web", "image": "nginx:1"},
					map[string]any{"name": "side", "image": "busybox"},
				},
			},
		}}
	}
	tests := []struct {
		name     string
		entries  []metav1.ManagedFieldsEntry
		wantHeld []string
		want     map[string]any
	}{
		{
			name:    "nobody else",
			entries: []metav1.ManagedFieldsEntry{entry(FieldManager, apply, "", `{"f:data":{"f:a":{},"f:b":{}}}`)},
			want:    desired().Object,
		},
		{
			name: "a field, the scale subresource and a container image; status and shared fields stay",
			entries: []metav1.ManagedFieldsEntry{
				entry(FieldManager, apply, "", `{"f:data":{"f:a":{}},"f:spec":{"f:containers":{"k:{\"name\":\"side\"}":{".":{},"f:name":{},"f:image":{}}}}}`),
				entry("kubectl-edit", update, "", `{"f:data":{"f:a":{},"f:b":{}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{"f:name":{},"f:image":{}}}}}`),
				entry("autoscaler", update, "scale", `{"f:spec":{"f:replicas":{}}}`),
				entry("kube-controller-manager", update, "status", `{"f:data":{"f:a":{}}}`),
			},
			wantHeld: []string{`.data.b`, `.spec.containers[name="web"].image`, `.spec.replicas`},
			want: map[string]any{
				"data": map[string]any{"a": "1"},
				"spec": map[string]any{"containers": []any{
					map[string]any{"name": "web"},
					map[string]any{"name": "side", "image": "busybox"},
				}},
			},
		},
		{
			name:     "a whole list item",
			entries:  []metav1.ManagedFieldsEntry{entry("other", apply, "", `{"f:spec":{"f:containers":{"k:{\"name\":\"side\"}":{}}}}`)},
			wantHeld: []string{`.spec.containers[name="side"]`},
			want: map[string]any{
				"data": map[string]any{"a": "1", "b": "2"},
				"spec": map[string]any{"replicas": int64(2), "containers": []any{map[string]any{"name": "web", "image": "nginx:1"}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := desired()
			out, held, err := withoutOthersFields(d, tt.entries, FieldManager)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if held != nil {
				for p := range held.Leaves().All() {
					got = append(got, p.String())
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.wantHeld) {
				t.Errorf("held = %v, want %v", got, tt.wantHeld)
			}
			if !equality.Semantic.DeepEqual(out.Object, tt.want) {
				t.Errorf("body = %v, want %v", out.Object, tt.want)
			}
			if !equality.Semantic.DeepEqual(d.Object, desired().Object) {
				t.Errorf("the desired object was changed: %v", d.Object)
			}
		})
	}
}

// extract keeps the fields of a managedFields record with their values:
// list items by their keys, set members by value, and nothing else.
func TestExtract(t *testing.T) {
	live := map[string]any{
		"metadata": map[string]any{"name": "web", "uid": "u", "labels": map[string]any{"a": "1", "theirs": "x"},
			"finalizers": []any{"stencil.dev/f", "other/f"}},
		"spec": map[string]any{
			"replicas": int64(3),
			"template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "web", "image": "nginx", "imagePullPolicy": "Always",
					"ports": []any{map[string]any{"containerPort": int64(80), "protocol": "TCP", "name": "http"}}},
				map[string]any{"name": "sidecar", "image": "theirs"},
			}}},
		},
		"status": map[string]any{"replicas": int64(3)},
	}
	set, err := parseRecord([]string{`{"f:metadata":{"f:labels":{"f:a":{}},"f:finalizers":{"v:\"stencil.dev/f\"":{}}},` +
		`"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},` +
		`"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{}}}}}}}}}`})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"a": "1"}, "finalizers": []any{"stencil.dev/f"}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "web", "image": "nginx",
				"ports": []any{map[string]any{"containerPort": int64(80), "protocol": "TCP", "name": "http"}}},
		}}}},
	}
	if got := extract(live, set); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("extract =\n%v\nwant\n%v", got, want)
	}
}
