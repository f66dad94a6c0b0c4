package schema

import (
	"strings"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	runtimeschema "k8s.io/apimachinery/pkg/runtime/schema"
)

// Examples returns two objects of gvk (a custom resource type v knows)
// whose spec and status set every field their schema declares, each to a
// value it allows: the first to true, the first enum value, 1 (within
// bounds); the second to false, the last enum value, 0 (within bounds), so
// that a conversion that drops false or zero values shows. They are what a
// check that every field is handled (a conversion's) starts from. ok is
// false when v has no schema for gvk.
func (v *Validator) Examples(gvk runtimeschema.GroupVersionKind) (objs []map[string]any, ok bool) {
	crd, ok := v.crds[gvk]
	if !ok {
		return nil, false
	}
	for variant := range 2 {
		obj := map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind, "metadata": map[string]any{"name": "example", "namespace": "default"}}
		for _, part := range []string{"spec", "status"} {
			if s, ok := crd.structural.Properties[part]; ok {
				obj[part] = example(&s, 0, variant == 1)
			}
		}
		objs = append(objs, obj)
	}
	return objs, true
}

// maxExampleDepth bounds an example of a recursive or very deep schema.
const maxExampleDepth = 12

func example(s *structuralschema.Structural, depth int, low bool) any {
	vv := s.ValueValidation
	if vv == nil {
		vv = &structuralschema.ValueValidation{}
	}
	if len(vv.Enum) > 0 {
		if low {
			return vv.Enum[len(vv.Enum)-1].Object
		}
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
			out[name] = example(&prop, depth+1, low)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
			out["key"] = example(s.AdditionalProperties.Structural, depth+1, low)
		}
		return out
	case "array":
		if s.Items == nil || depth >= maxExampleDepth {
			return []any{}
		}
		return []any{example(s.Items, depth+1, low)}
	case "boolean":
		return !low
	case "integer":
		if low {
			return int64(within(0, vv.Minimum, vv.Maximum))
		}
		return int64(within(1, vv.Minimum, vv.Maximum))
	case "number":
		if low {
			return within(0, vv.Minimum, vv.Maximum)
		}
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
