package engine

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

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
			out, leftOut, err := withoutOthersFields(d, tt.entries, FieldManager)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if leftOut != nil {
				for p := range leftOut.Leaves().All() {
					got = append(got, p.String())
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.wantHeld) {
				t.Errorf("left out = %v, want %v", got, tt.wantHeld)
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

// ExtractOwned keeps the fields our manager's record holds, with their
// values, as client-go's Extract functions do: list items in the live
// order (containers and env reordered would restart pods, and break
// $(VAR) references), and nothing of what other managers own inside a map
// stencil owns fields of.
func TestExtractOwned(t *testing.T) {
	full := &unstructured.Unstructured{}
	if err := full.UnmarshalJSON([]byte(`{"apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "labels": {"a": "1", "theirs": "x"},
    "managedFields": [
      {"manager": "stencil", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}}},
        "f:spec": {"f:template": {"f:spec": {"f:containers": {
          "k:{\"name\":\"zeta\"}": {".": {}, "f:name": {}, "f:image": {}, "f:env": {"k:{\"name\":\"B\"}": {".": {}, "f:name": {}, "f:value": {}}, "k:{\"name\":\"A\"}": {".": {}, "f:name": {}, "f:value": {}}},
            "f:resources": {"f:limits": {"f:cpu": {}}}},
          "k:{\"name\":\"alpha\"}": {".": {}, "f:name": {}, "f:image": {}}}}}}}},
      {"manager": "other", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:theirs": {}}},
        "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"zeta\"}": {"f:resources": {"f:limits": {"f:memory": {}}}}}}}}}}]},
  "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
    {"name": "zeta", "image": "z", "env": [{"name": "B", "value": "b"}, {"name": "A", "value": "$(B)-a"}], "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
    {"name": "alpha", "image": "a"}]}}}}`)); err != nil {
		t.Fatal(err)
	}
	got, err := ExtractOwned(full, OwnedRecord(full.GetManagedFields(), FieldManager))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "ns", "uid": "u1", "labels": map[string]any{"a": "1"}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "zeta", "image": "z", "env": []any{map[string]any{"name": "B", "value": "b"}, map[string]any{"name": "A", "value": "$(B)-a"}},
				"resources": map[string]any{"limits": map[string]any{"cpu": "1"}}},
			map[string]any{"name": "alpha", "image": "a"},
		}}}},
	}
	if !equality.Semantic.DeepEqual(got.Object, want) {
		t.Errorf("extractOwned =\n%v\nwant\n%v", got.Object, want)
	}

	// A type without a built-in schema is kept for reports only.
	custom := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Thing", "metadata": map[string]any{"name": "t"}}}
	if got, err := ExtractOwned(custom, nil); got != nil || err != nil {
		t.Errorf("extractOwned of a custom resource = %v, %v; want nil, nil", got, err)
	}
}
