package localcluster

import (
	"slices"
	"testing"
)

func TestOverride(t *testing.T) {
	base := []string{"--a=1", "--b=2", "--ab=3"}
	tests := []struct {
		name  string
		flags []string
		want  []string
	}{
		{"none: the first start's flags", nil, []string{"--a=1", "--b=2", "--ab=3"}},
		{"a flag replaced, not its prefix's namesake", []string{"--a=9"}, []string{"--a=9", "--b=2", "--ab=3"}},
		{"a flag added", []string{"--c=4"}, []string{"--a=1", "--b=2", "--ab=3", "--c=4"}},
		{"an empty value", []string{"--b="}, []string{"--a=1", "--b=", "--ab=3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := override(base, tt.flags); !slices.Equal(got, tt.want) {
				t.Errorf("override(%v, %v) = %v, want %v", base, tt.flags, got, tt.want)
			}
			if !slices.Equal(base, []string{"--a=1", "--b=2", "--ab=3"}) {
				t.Errorf("override changed its argument: %v", base)
			}
		})
	}
}
