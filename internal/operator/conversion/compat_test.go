package conversion_test

import (
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/operator/conversion"
)

func readCRD(t *testing.T, file string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// TestBreaks: each kind of breaking change to the released Memcached
// (v1alpha1 only) is found, and accepted once declared.
func TestBreaks(t *testing.T) {
	const released = "../../../config/crd/released/cache.example.com_memcacheds.yaml"
	spec := func(crd *apiextensionsv1.CustomResourceDefinition, version string) *apiextensionsv1.JSONSchemaProps {
		for i := range crd.Spec.Versions {
			if crd.Spec.Versions[i].Name == version {
				s := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
				return &s
			}
		}
		t.Fatalf("no version %s", version)
		return nil
	}
	setSpec := func(crd *apiextensionsv1.CustomResourceDefinition, version string, s *apiextensionsv1.JSONSchemaProps) {
		for i := range crd.Spec.Versions {
			if crd.Spec.Versions[i].Name == version {
				crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = *s
			}
		}
	}
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name     string
		change   func(*apiextensionsv1.CustomResourceDefinition)
		converts []string
		want     string // what Breaks says
		declare  map[string][]string
	}{
		{"removed field", func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c, "v1alpha1")
			delete(s.Properties, "autoscaled")
			setSpec(c, "v1alpha1", s)
		}, nil, "v1alpha1 spec.autoscaled: removed (or renamed)", map[string][]string{"v1alpha1": {"spec.autoscaled"}}},
		{"renamed field", func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c, "v1alpha1")
			s.Properties["replicas"] = s.Properties["size"]
			delete(s.Properties, "size")
			s.Required = []string{"replicas"}
			setSpec(c, "v1alpha1", s)
		}, nil, "v1alpha1 spec.size: removed (or renamed)", map[string][]string{"v1alpha1": {"spec.size", "spec.replicas"}}},
		{"changed type", func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c, "v1alpha1")
			p := s.Properties["size"]
			p.Type, p.Minimum, p.Maximum, p.Format = "string", nil, nil, ""
			s.Properties["size"] = p
			setSpec(c, "v1alpha1", s)
		}, nil, "v1alpha1 spec.size: type changed from integer to string", map[string][]string{"v1alpha1": {"spec.size"}}},
		{"narrowed maximum", func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c, "v1alpha1")
			p := s.Properties["size"]
			p.Maximum = f(50)
			s.Properties["size"] = p
			setSpec(c, "v1alpha1", s)
		}, nil, "v1alpha1 spec.size: maximum lowered from 100 to 50", map[string][]string{"v1alpha1": {"spec.size"}}},
		{"narrowed enum", func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c, "v1alpha1")
			p := s.Properties["driftPolicy"]
			p.Enum = p.Enum[:1]
			s.Properties["driftPolicy"] = p
			setSpec(c, "v1alpha1", s)
		}, nil, `v1alpha1 spec.driftPolicy: value "Report" no longer allowed`, map[string][]string{"v1alpha1": {"spec.driftPolicy"}}},
		{"newly required", func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c, "v1alpha1")
			s.Required = append(s.Required, "autoscaled")
			setSpec(c, "v1alpha1", s)
		}, nil, "v1alpha1 spec.autoscaled: now required", map[string][]string{"v1alpha1": {"spec.autoscaled"}}},
		{"a pattern", func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c, "v1alpha1")
			p := s.Properties["driftPolicy"]
			p.Pattern = "^C"
			s.Properties["driftPolicy"] = p
			setSpec(c, "v1alpha1", s)
		}, nil, `v1alpha1 spec.driftPolicy: pattern "^C", was none`, map[string][]string{"v1alpha1": {"spec.driftPolicy"}}},
		{"a changed scope", func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Scope = apiextensionsv1.ClusterScoped
		}, nil, "v1alpha1: the scope changed from Namespaced to Cluster", map[string][]string{"v1alpha1": {"*"}}},
		{"a changed format", func(c *apiextensionsv1.CustomResourceDefinition) {
			s := spec(c, "v1alpha1")
			p := s.Properties["size"]
			p.Format = "int64"
			s.Properties["size"] = p
			setSpec(c, "v1alpha1", s)
		}, nil, `v1alpha1 spec.size: format "int64", was "int32"`, map[string][]string{"v1alpha1": {"spec.size"}}},
		{"a dropped version still stored", func(c *apiextensionsv1.CustomResourceDefinition) {
			v := c.Spec.Versions[0]
			v.Name, v.Storage = "v1", true
			c.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{v}
		}, []string{"v1"}, "v1alpha1: removed; it was the storage version", map[string][]string{"v1alpha1": {"*"}, "v1": {"*"}}},
		{"a storage version change without conversion", func(c *apiextensionsv1.CustomResourceDefinition) {
			v := c.Spec.Versions[0]
			v.Name = "v1"
			c.Spec.Versions[0].Storage = false
			c.Spec.Versions = append(c.Spec.Versions, v)
		}, []string{"v1"}, "v1: the storage version, was v1alpha1, with no conversion", map[string][]string{"v1": {"*"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			was := readCRD(t, released)
			now := was.DeepCopy()
			tt.change(now)
			if breaks := conversion.Breaks(was, was, nil, nil); len(breaks) != 0 {
				t.Fatalf("the release breaks itself: %v", breaks)
			}
			breaks := conversion.Breaks(was, now, tt.converts, nil)
			var said []string
			for _, b := range breaks {
				said = append(said, strings.TrimSpace(b.Version+" "+b.Path)+": "+b.What)
			}
			if !strings.Contains(strings.Join(said, "\n"), tt.want) {
				t.Errorf("Breaks says\n%s\nwant %q", strings.Join(said, "\n"), tt.want)
			}
			if left := conversion.Breaks(was, now, tt.converts, tt.declare); len(left) != 0 {
				t.Errorf("declared, still: %v", left)
			}
		})
	}
	// The shipped change: v1 stored, converted from the released v1alpha1.
	if breaks := conversion.Breaks(readCRD(t, released), readCRD(t, "../../../config/crd/bases/cache.example.com_memcacheds.yaml"), []string{"v1", "v1alpha1"}, nil); len(breaks) != 0 {
		t.Errorf("the shipped Memcached breaks its release: %v", breaks)
	}
}
