package render

import "testing"

// TestLineOfKey: a key is placed when it is written once in the document of
// the object's kind; not when it is written in several places.
func TestLineOfKey(t *testing.T) {
	src := []byte("apiVersion: v1\nkind: ConfigMap\ndata:\n  selector: x\n---\napiVersion: apps/v1\nkind: Deployment\nspec:\n  replicas: 1\n  selector: {}\n")
	tests := []struct {
		kind, key string
		want      int
	}{
		{"Deployment", "replicas", 9},
		{"Deployment", "selector", 10},      // the ConfigMap's data key is another document
		{"ConfigMap", "selector", 4},        // and the other way round
		{"Service", "selector", 0},          // no document of that kind: the whole file, where it is twice
		{"Deployment", "maxUnavailabel", 0}, // not written
	}
	for _, tt := range tests {
		if got := lineOfKey(src, tt.kind, tt.key); got != tt.want {
			t.Errorf("%s %s: line %d, want %d", tt.kind, tt.key, got, tt.want)
		}
	}
}
