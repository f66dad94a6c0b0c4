package render

import "testing"

func TestCheckHandOver(t *testing.T) {
	tests := []struct {
		value string
		ok    bool
	}{
		{"", true},
		{"spec.replicas", true},
		{"spec.replicas, spec.template.metadata.annotations", true},
		{"spec..replicas", false},
		{"spec.replicas,", false},
		{`spec.template.spec.containers[name="web"].image`, false},
		{"metadata.annotations", false},
		{"kind", false},
	}
	for _, tt := range tests {
		if err := checkHandOver(tt.value); (err == nil) != tt.ok {
			t.Errorf("checkHandOver(%q) = %v, want ok %v", tt.value, err, tt.ok)
		}
	}
}
