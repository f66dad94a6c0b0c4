package schema

import "testing"

// TestIndexPath: structured-merge-diff's paths name list items by their
// keys; problems name them by index, as the API server does.
func TestIndexPath(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{
		"containers": []any{
			map[string]any{"name": "web", "ports": []any{map[string]any{"containerPort": int64(80), "protocol": "TCP"}}},
			map[string]any{"name": "a,b]c", "imagePullPolcy": "Always"},
		},
		"finalizers": []any{"x", "y"},
	}}
	tests := []struct {
		name, path string
		// want is the path by index; "" when the path does not lead through obj.
		want string
	}{
		{"a field", ".spec.containers", ".spec.containers"},
		{"an item by key", `.spec.containers[name="web"].ports`, ".spec.containers[0].ports"},
		{"keys with a quoted comma and bracket", `.spec.containers[name="a,b]c"].imagePullPolcy`, ".spec.containers[1].imagePullPolcy"},
		{"an item by two keys, one a number", `.spec.containers[name="web"].ports[containerPort=80,protocol="TCP"].protocol`, ".spec.containers[0].ports[0].protocol"},
		{"a set's value", `.spec.finalizers[="y"]`, ".spec.finalizers[1]"},
		{"an index", ".spec.containers[1].name", ".spec.containers[1].name"},
		{"no such item", `.spec.containers[name="db"].image`, ""},
		{"through a scalar", ".spec.containers[0].name.first", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, _, ok := indexPath(obj, tt.path)
			if !ok {
				got = ""
			}
			if got != tt.want {
				t.Errorf("indexPath(%s) = %q, want %q", tt.path, got, tt.want)
			}
		})
	}
}
