package schema

import (
	"fmt"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Default sets, in place, the defaults the CustomResourceDefinition of o's
// type declares for the fields o lacks, as the API server does before it
// stores a custom resource: what the operator reads back is o defaulted.
// It returns an error wrapping ErrNoSchema when v has no
// CustomResourceDefinition for o's type.
func (v *Validator) Default(o *unstructured.Unstructured) error {
	crd, ok := v.crds[o.GroupVersionKind()]
	if !ok {
		return fmt.Errorf("%s %s: %w (give its CustomResourceDefinition)", o.GetKind(), name(o), ErrNoSchema)
	}
	defaultObject(o.Object, crd.structural)
	return nil
}

// defaultObject is the API server's defaulting of a custom resource: nulls
// of non-nullable fields without a default are dropped, then defaults set.
func defaultObject(x map[string]any, s *structuralschema.Structural) {
	pruneNonNullableNullsWithoutDefaults(x, s)
	applyDefaults(x, s)
}

// The functions below are apiextensions-apiserver's
// pkg/apiserver/schema/defaulting (algorithm.go, prunenulls.go), line for
// line. That package is not imported because its validation.go links the
// CEL runtime (and the API server's feature gates) into the operator's
// binary; TestDefault runs the cases of the package's own tests.

// applyDefaults is defaulting.Default: it sets the defaults of s in x, deep
// copied; a non-nullable null that has a default is defaulted too.
func applyDefaults(x any, s *structuralschema.Structural) {
	if s == nil {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		for k, prop := range s.Properties {
			if prop.Default.Object == nil {
				continue
			}
			if _, found := x[k]; !found || isNonNullableNull(x[k], &prop) {
				x[k] = runtime.DeepCopyJSONValue(prop.Default.Object)
			}
		}
		for k := range x {
			if prop, found := s.Properties[k]; found {
				applyDefaults(x[k], &prop)
			} else if s.AdditionalProperties != nil {
				if isNonNullableNull(x[k], s.AdditionalProperties.Structural) {
					x[k] = runtime.DeepCopyJSONValue(s.AdditionalProperties.Structural.Default.Object)
				}
				applyDefaults(x[k], s.AdditionalProperties.Structural)
			}
		}
	case []any:
		for i := range x {
			if isNonNullableNull(x[i], s.Items) {
				x[i] = runtime.DeepCopyJSONValue(s.Items.Default.Object)
			}
			applyDefaults(x[i], s.Items)
		}
	}
}

func isNonNullableNull(x any, s *structuralschema.Structural) bool {
	return x == nil && s != nil && !s.Nullable
}

// pruneNonNullableNullsWithoutDefaults is
// defaulting.PruneNonNullableNullsWithoutDefaults: it drops the nulls of
// non-nullable fields that have no default (those with one are defaulted).
func pruneNonNullableNullsWithoutDefaults(x any, s *structuralschema.Structural) {
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			field := schemaOfField(k, s)
			if v == nil && field != nil && !field.Nullable && field.Default.Object == nil {
				delete(x, k)
			} else {
				pruneNonNullableNullsWithoutDefaults(v, field)
			}
		}
	case []any:
		var items *structuralschema.Structural
		if s != nil {
			items = s.Items
		}
		for i := range x {
			pruneNonNullableNullsWithoutDefaults(x[i], items)
		}
	}
}

func schemaOfField(field string, s *structuralschema.Structural) *structuralschema.Structural {
	if s == nil {
		return nil
	}
	if prop, ok := s.Properties[field]; ok {
		return &prop
	}
	if s.AdditionalProperties != nil {
		return s.AdditionalProperties.Structural
	}
	return nil
}
