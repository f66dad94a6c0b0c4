package engine

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// builtinTypes converts built-in objects to typed values, for extraction:
// parsed once, on first use (the schemas cost memory).
var builtinTypes = sync.OnceValue(func() managedfields.TypeConverter {
	return applyconfigurations.NewTypeConverter(clientgoscheme.Scheme)
})

// ExtractOwned is the part of full that the record owned holds, with
// full's UID as the apply's precondition; nil when full's type has no
// built-in schema.
func ExtractOwned(full *unstructured.Unstructured, owned []string) (*unstructured.Unstructured, error) {
	// status (never ours) and managedFields out first: a field a newer API
	// server added there is not in client-go's schemas, and would fail the
	// conversion.
	trimmed := full.DeepCopy()
	delete(trimmed.Object, "status")
	trimmed.SetManagedFields(nil)
	tv, err := builtinTypes().ObjectToTyped(trimmed, typed.AllowDuplicates)
	if err != nil {
		return nil, nil //nolint:nilerr // no schema: reported, never corrected
	}
	set, err := parseRecord(owned)
	if err != nil {
		return nil, err
	}
	m, ok := tv.ExtractItems(set.Leaves(), typed.WithAppendKeyFields()).AsValue().Unstructured().(map[string]any)
	if !ok {
		return nil, fmt.Errorf("extracting the fields stencil owns: not an object")
	}
	obj := &unstructured.Unstructured{Object: m}
	obj.SetGroupVersionKind(full.GroupVersionKind())
	obj.SetNamespace(full.GetNamespace())
	obj.SetName(full.GetName())
	obj.SetUID(full.GetUID())
	return obj, nil
}
