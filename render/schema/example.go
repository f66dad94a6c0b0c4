package schema

import (
	"strings"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	runtimeschema "k8s.io/apimachinery/pkg/runtime/schema"
)

// Example returns an object of gvk (a custom resource type v knows) whose
// spec and status set every field their schema declares, each to a value
// it allows: what a check that every field is handled (a conversion's)
// starts from. ok is false when v has no schema for gvk.
func (v *Validator) Example(gvk runtimeschema.GroupVersionKind) (obj map[string]any, ok bool) {
	crd, ok := v.crds[gvk]
	if !ok {
		return nil, false
	}
	obj = map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind, "metadata": map[string]any{"name": "example", "namespace": "default"}}
	for _, part := range []string{"spec", "status"} {
		if s, ok := crd.structural.Properties[part]; ok {
			obj[part] = example(&s, 0)
		}
	}
	return obj, true
}

// maxExampleDepth bounds an example of a recursive or very deep schema.
const maxExampleDepth = 12

func example(s *structuralschema.Structural, depth int) any {
	vv := s.ValueValidation
	if vv == nil {
		vv = &structuralschema.ValueValidation{}
	}
	if len(vv.Enum) > 0 {
		return vv.Enum[0].Object
	}
	if s.XIntOrString {
		return int64(1)
	}
	switch s.Type {
	case "object":
		out := map[string]any{}
		if depth >= maxExampleDepth {
			return out
		}
		for name, prop := range s.Properties {
			out[name] = example(&prop, depth+1)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
			out["key"] = example(s.AdditionalProperties.Structural, depth+1)
		}
		return out
	case "array":
		if s.Items == nil || depth >= maxExampleDepth {
			return []any{}
		}
		return []any{example(s.Items, depth+1)}
	case "boolean":
		return true
	case "integer":
		return int64(within(1, vv.Minimum, vv.Maximum))
	case "number":
		return within(1.5, vv.Minimum, vv.Maximum)
	case "string":
		n := 1
		if vv.MinLength != nil {
			n = max(n, int(*vv.MinLength))
		}
		return strings.Repeat("x", n)
	}
	return nil
}

// within is want, moved into [lo, hi].
func within(want float64, lo, hi *float64) float64 {
	if lo != nil && want < *lo {
		want = *lo
	}
	if hi != nil && want > *hi {
		want = *hi
	}
	return want
}
